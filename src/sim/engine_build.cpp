// Simulator::Impl, adding jobs: validation, the event loop's op layout, step gates.
#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "sim/engine_impl.hpp"
#include <unordered_set>

#include "sim/contention.hpp"

namespace inc::sim {

void Simulator::Impl::add(JobSpec spec, Program prog) {
  const int p = prog.nranks;
  if (static_cast<int>(spec.hosts.size()) != p)
    throw Error(Error::Kind::config, fmt::format("job '{}': {} ranks but {} hosts placed", spec.name, p, spec.hosts.size()));
  std::unordered_set<int> seen;
  for (int h : spec.hosts) {
    if (h < 0 || h >= topo.num_hosts())
      throw Error(Error::Kind::config, fmt::format("job '{}': host {} does not exist ({} hosts)", spec.name, h, topo.num_hosts()));
    if (!seen.insert(h).second)
      throw Error(Error::Kind::config, fmt::format("job '{}': host {} holds two ranks", spec.name, h));
  }
  Job J;
  J.spec = std::move(spec);
  J.prog = std::move(prog);
  J.res.name = J.spec.name;
  J.rank_busy.assign(p, 0);
  if (opt.model_contention && J.prog.num_pairs > 0) {
    const Contention c = contention(J.prog, J.spec.hosts, topo);
    J.res.contended_bandwidth_s = c.bandwidth_s;
    J.res.worst_step_share = c.worst_step_share;
  }
  // The event loop's op order is step-major: the i-th op of every rank side by side. Ranks
  // advance roughly together, so the ops touched at one moment (a send and its matching
  // receive on the next rank, their successors) share cache lines instead of lying a rank's
  // schedule apart.
  const std::size_t N = J.prog.num_ops();
  BigVec<std::uint32_t> perm(N);
  {
    std::vector<int> active;
    for (int r = 0; r < p; ++r)
      if (J.prog.rank_begin[r + 1] > J.prog.rank_begin[r]) active.push_back(r);
    std::uint32_t next = 0;
    for (std::uint32_t i = 0; !active.empty(); ++i) {
      std::size_t keep = 0;
      for (int r : active) {
        const std::uint32_t pi = J.prog.rank_begin[r] + i;
        perm[pi] = next++;
        if (pi + 1 < J.prog.rank_begin[r + 1]) active[keep++] = r;
      }
      active.resize(keep);
    }
  }
  // Read the program sequentially, scatter into E; successor lists stay in program order
  // (E points into them) with their targets renumbered.
  J.E.resize(N);
  for (int r = 0; r < p; ++r)
    for (std::uint32_t i = J.prog.rank_begin[r]; i < J.prog.rank_begin[r + 1]; ++i) {
      EngOp& x = J.E[perm[i]];
      x.op = J.prog.ops[i];
      const bool inc = x.op.kind == OpKind::inc_reduce || x.op.kind == OpKind::inc_broadcast ||
                       x.op.kind == OpKind::inc_gather;
      x.match = inc || J.prog.match[i] == ~0u ? J.prog.match[i] : perm[J.prog.match[i]];  // inc: group id
      x.pair_of = J.prog.pair_of[i];
      x.pair_seq = J.prog.pair_seq[i];
      x.succ_begin = J.prog.succ_begin[i];
      x.succ_end = J.prog.succ_begin[i + 1];
      x.pending = J.prog.ndeps[i];
      x.rank = r;
    }
  if (opt.matching != Matching::dataflow) setup_steps(J, perm);
  J.succ = std::move(J.prog.succ);
  for (auto& t : J.succ) t = perm[t];
  for (auto& m : J.prog.inc_members) m = perm[m];
  // The event loop reads everything from E, succ and inc_members: release the rest.
  for (auto* v : {&J.prog.ndeps, &J.prog.match, &J.prog.pair_of, &J.prog.pair_seq, &J.prog.succ_begin, &J.prog.succ}) {
    v->clear();
    v->shrink_to_fit();
  }
  J.prog.ops.clear();
  J.prog.ops.shrink_to_fit();
  J.runs.assign(J.prog.num_inc_groups(), -1);
  J.pair_q.resize(J.prog.num_pairs);
  J.pair_busy.assign(J.prog.num_pairs, 0);
  J.pair_next.assign(J.prog.num_pairs, 0);
  if (J.prog.num_inc_groups() > 0) {
    J.tree = topo.build_tree(J.spec.hosts, jobs.size() * 0x51ed27u + 1);
    J.res.tree_switches = J.tree.switch_count();
    J.up_q.resize(J.tree.nodes.size());
    J.down_q.resize(J.tree.nodes.size());
    J.up_busy.assign(J.tree.nodes.size(), 0);
    J.down_busy.assign(J.tree.nodes.size(), 0);
    J.res.tree_depth = J.tree.depth;
  }
  total_ops += J.E.size();
  jobs.push_back(std::move(J));
}

// Every op after a rank's first step waits for one more thing: its step opening.
void Simulator::Impl::setup_steps(Job& J, const BigVec<std::uint32_t>& perm) {
  const Program& P = J.prog;
  const std::vector<std::uint32_t> step = program_steps(P);
  const std::size_t N = P.num_ops();
  J.gate_ops.resize(N);
  J.step_start.assign(N, 0);
  for (std::size_t i = 0; i < N; ++i) {
    J.gate_ops[i] = perm[i];
    const int r = J.E[perm[i]].rank;
    J.step_start[i] = i == P.rank_begin[r] || step[i] != step[i - 1];
    if (step[i] > 0) ++J.E[perm[i]].pending;
  }
  J.rank_end.assign(P.nranks, 0);
  J.step_end.assign(P.nranks, 0);
  J.step_left.assign(P.nranks, 0);
  for (int r = 0; r < P.nranks; ++r) {
    J.rank_end[r] = P.rank_begin[r + 1];
    open_step(J, r, P.rank_begin[r], false);
  }
}

// Opens the step of rank r that begins at program index `from` (if any).
void Simulator::Impl::open_step(Job& J, int r, std::uint32_t from, bool release) {
  std::uint32_t e = from;
  while (e < J.rank_end[r] && (e == from || !J.step_start[e])) ++e;
  J.step_end[r] = e;
  J.step_left[r] = e - from;
  if (!release) return;
  const auto ji = static_cast<std::uint32_t>(&J - jobs.data());
  for (std::uint32_t i = from; i < e; ++i)
    if (--J.E[J.gate_ops[i]].pending == 0) work.emplace_back(ji, J.gate_ops[i]);
}

}  // namespace inc::sim
