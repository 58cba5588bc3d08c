// libFuzzer target for simulator scenario files (`inc sim run FILE`, examples/sim/*.toml):
// parse_scenario, then, for topologies of at most 4096 hosts, the topology and the placement
// of the jobs on it (both check what the parser cannot).
// Invariants: each step succeeds or throws inc::Error(config) with a message; every placed
// job has its ranks.
#include <cstddef>
#include <cstdint>
#include <memory>

#include "fuzz/fuzz_check.hpp"
#include "sim/scenario.hpp"

using inc::fuzz::fail;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  inc::sim::Scenario s;
  if (!inc::fuzz::parses([&] { s = inc::sim::parse_scenario(inc::fuzz::text_of(data, size), "scenario.toml"); }))
    return 0;
  if (s.topo.hosts < 1) fail("accepted scenario without hosts");
  if (s.topo.hosts > 4096) return 0;  // valid, but building it is not what this target tests
  std::unique_ptr<inc::sim::Topology> topo;
  if (!inc::fuzz::parses([&] { topo = std::make_unique<inc::sim::Topology>(s.topo); })) return 0;
  std::vector<inc::sim::JobSpec> specs;
  if (!inc::fuzz::parses([&] { specs = inc::sim::place_jobs(s, *topo); })) return 0;
  if (specs.size() != s.jobs.size()) fail("place_jobs: one spec per job expected");
  for (const auto& j : specs)
    if (j.hosts.size() != static_cast<std::size_t>(j.params.nranks)) fail("place_jobs: one host per rank expected", j.name);
  return 0;
}
