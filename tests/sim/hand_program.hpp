// Hand-written programs for the simulator's tests (test_sim_choices, test_sim_burst): ops on
// output regions, each rank's dependencies inferred, the ranks linked, run on hosts 0..p-1.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "coll/schedule.hpp"
#include "sim/engine.hpp"
#include "sim/program.hpp"
#include "sim/topology.hpp"

namespace inc::sim::test {

using coll::BufferId;
using coll::Op;
using coll::OpKind;
using coll::Region;

inline Op make(OpKind k, int peer, Region src, Region dst) {
  Op o;
  o.kind = k;
  o.peer = peer;
  o.src = src;
  o.dst = dst;
  return o;
}
inline Region out(std::uint64_t off, std::uint64_t bytes) { return {BufferId::output, off, bytes}; }
inline Op send(int peer, Region r) { return make(OpKind::send, peer, r, {}); }
inline Op recv(int peer, Region r) { return make(OpKind::recv, peer, {}, r); }

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
