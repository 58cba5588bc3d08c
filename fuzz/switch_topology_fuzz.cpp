// libFuzzer target for switch topology files (`inc switch --topology`, docs/SWITCH.md):
// parse_topology, then plan_job and switch_config for what it accepted.
// Invariants: no exception ever (the API reports errors through `err`); a rejected file has a
// message; an accepted file's plan of every job gives each rank an attachment on a switch of
// the file, and each switch's configuration is built without error.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_check.hpp"
#include "src/switch/topology.hpp"

using inc::fuzz::fail;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    std::string err;
    auto topo = inc::sw::parse_topology(inc::fuzz::text_of(data, size), err);
    if (!topo) {
      if (err.empty()) fail("rejected without a message");
      return 0;
    }
    for (const auto& s : topo->switches) (void)inc::sw::switch_config(*topo, s);
    for (const auto& j : topo->jobs) {
      std::string perr;
      auto plan = inc::sw::plan_job(*topo, j, perr);
      if (!plan) {
        if (perr.empty()) fail("plan_job failed without a message");
        continue;
      }
      if (plan->ranks.size() != j.nranks) fail("plan_job: one attachment per rank expected");
      for (const auto& r : plan->ranks)
        if (!topo->find(r.sw)) fail("plan_job attached a rank to an unknown switch", r.sw);
      if (!plan->specs.count(plan->root)) fail("plan_job: the root has no admission");
    }
  } catch (const std::exception& e) {
    fail("exception from the topology parser", e.what());
  }
  return 0;
}
