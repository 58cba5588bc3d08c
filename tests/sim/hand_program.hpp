// Hand-written programs for the simulator's tests (test_sim_choices, test_sim_burst): ops on
// output regions (built by tests/coll/ops_builder.hpp), each rank's dependencies inferred, the
// ranks linked, run on hosts 0..p-1.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "coll/schedule.hpp"
#include "sim/engine.hpp"
#include "sim/program.hpp"
#include "sim/topology.hpp"
#include "tests/coll/ops_builder.hpp"

namespace inc::sim::test {

using coll::BufferId;
using coll::Op;
using coll::OpKind;
using coll::Region;
using coll::test::make_op;
using coll::test::out;
using coll::test::recv;
using coll::test::send;

inline Program program(std::vector<std::vector<Op>> ops) {
  std::vector<coll::RankSchedule> s(ops.size());
  for (std::size_t r = 0; r < ops.size(); ++r) {
    s[r].ops = std::move(ops[r]);
    coll::infer_dependencies(s[r]);
  }
  return link_program(s);
}

inline SimResult run(const Topology& topo, SimOptions opt, Program prog, std::vector<int> hosts = {}) {
  if (hosts.empty())
    for (int r = 0; r < prog.nranks; ++r) hosts.push_back(r);
  Simulator sim(topo, opt);
  JobSpec j;
  j.name = "hand";
  j.params.nranks = prog.nranks;
  j.hosts = hosts;
  sim.add_job(j, std::move(prog));
  return sim.run();
}

}  // namespace inc::sim::test
