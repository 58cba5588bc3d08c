// Simulator::Impl, adding jobs: validation, the event loop's op layout, step gates.
#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include <map>
#include <unordered_set>

#include "sim/contention.hpp"
#include "sim/engine_impl.hpp"

namespace inc::sim {

void Simulator::Impl::check_hosts(const JobSpec& spec, int p) const {
  if (static_cast<int>(spec.hosts.size()) != p)
    throw Error(Error::Kind::config, fmt::format("job '{}': {} ranks but {} hosts placed", spec.name, p, spec.hosts.size()));
  std::unordered_set<int> seen;
  for (int h : spec.hosts) {
    if (h < 0 || h >= topo.num_hosts())
      throw Error(Error::Kind::config, fmt::format("job '{}': host {} does not exist ({} hosts)", spec.name, h, topo.num_hosts()));
    if (!seen.insert(h).second)
      throw Error(Error::Kind::config, fmt::format("job '{}': host {} holds two ranks", spec.name, h));
  }
  if (spec.rank_start_s.empty()) return;
  if (static_cast<int>(spec.rank_start_s.size()) != p)
    throw Error(Error::Kind::config, fmt::format("job '{}': {} rank starts for {} ranks", spec.name,
                                                 spec.rank_start_s.size(), p));
  for (std::size_t r = 0; r < spec.rank_start_s.size(); ++r)
    if (!(spec.rank_start_s[r] >= 0 && spec.rank_start_s[r] < std::numeric_limits<double>::infinity()))
      throw Error(Error::Kind::config, fmt::format("job '{}': rank {} starts at {} s after the job (must be finite "
                                                   "and >= 0)", spec.name, r, spec.rank_start_s[r]));
}

// Per-rank starts (JobSpec::rank_start_s): rank r posts its ready ops at start_s + its offset.
// The ops ready at the start are listed per rank once (a symmetric layout's rank r has every
// S-th op, so it needs no list); each rank's event then posts its own.
void Simulator::Impl::schedule_rank_starts(std::uint32_t ji) {
  Job& J = jobs[ji];
  const std::size_t P = J.spec.rank_start_s.size();
  J.res.rank_start_s.resize(P);
  for (std::size_t r = 0; r < P; ++r) J.res.rank_start_s[r] = J.spec.start_s + J.spec.rank_start_s[r];
  J.res.rank_end_s = J.res.rank_start_s;
  if (!J.sym) {
    J.start_ops.assign(P, {});
    for (std::uint32_t i = 0; i < J.num_ops(); ++i)
      if (J.ready(i)) J.start_ops[static_cast<std::size_t>(J.rank(i))].push_back(i);
  }
  for (std::size_t r = 0; r < P; ++r) push(J.res.rank_start_s[r], kRankStart, ji, static_cast<std::uint32_t>(r));
}

void Simulator::Impl::start_rank(std::uint32_t ji, std::uint32_t r) {
  Job& J = jobs[ji];
  // As at a job's start (Job::startable).
  const auto take = [&](std::uint32_t i) {
    if (J.startable(i)) work.emplace_back(ji, i);
  };
  if (J.sym) {
    for (std::uint32_t t = 0; t < J.T.ops.size(); ++t) take(t * J.T.S + r);
  } else {
    for (std::uint32_t i : J.start_ops[r]) take(i);
    std::vector<std::uint32_t>().swap(J.start_ops[r]);
  }
}

// A rotation-symmetric job (coll::rotation_symmetric) from rank 0's schedule alone: rank r's op i
// is template op i with peers shifted by r, laid out step-major (op i of rank r at i p + r, as
// add() lays out any job whose ranks have equal lengths). Its matching receive is found in the
// template once: the k-th send to peer q matches the k-th receive of rank q from rank 0, i.e.
// the template's k-th receive from peer (p - q) mod p, on rank (r + q) mod p.
void Simulator::Impl::add_symmetric(JobSpec spec, int p, Program T) {
  check_hosts(spec, p);
  const auto n = static_cast<std::uint32_t>(T.num_ops());
  std::vector<std::uint32_t> mt(n, ~0u), seq(n, 0), conn(n, ~0u);
  std::map<int, std::vector<std::uint32_t>> sends_to, recvs_from;  // template peer -> ops in order
  for (std::uint32_t i = 0; i < n; ++i) {
    const OpKind k = T.ops[i].kind;
    if (k == OpKind::send) sends_to[T.ops[i].peer].push_back(i);
    if (coll::is_recv(k)) recvs_from[T.ops[i].peer].push_back(i);
    if (coll::is_inc(k))
      throw Error(Error::Kind::internal, "symmetric job with Core-INC ops");
  }
  std::uint32_t npeers = 0, matched = 0;
  for (const auto& [q, sends] : sends_to) {
    const auto& recvs = recvs_from[(p - q) % p];
    if (q <= 0 || q >= p || recvs.size() != sends.size())
      throw Error(Error::Kind::mismatch, fmt::format("job '{}': symmetric schedule's sends to +{} do not pair up",
                                                     spec.name, q));
    for (std::size_t k = 0; k < sends.size(); ++k) {
      if (T.ops[sends[k]].bytes != T.ops[recvs[k]].bytes)
        throw Error(Error::Kind::mismatch, fmt::format("job '{}': message {} to +{}: sizes differ", spec.name, k, q));
      mt[sends[k]] = recvs[k];
      mt[recvs[k]] = sends[k];
      seq[sends[k]] = seq[recvs[k]] = static_cast<std::uint32_t>(k);
      conn[sends[k]] = npeers;
    }
    matched += static_cast<std::uint32_t>(sends.size());
    ++npeers;
  }
  std::uint32_t recvs_total = 0;
  for (const auto& [q, recvs] : recvs_from) recvs_total += static_cast<std::uint32_t>(recvs.size());
  if (recvs_total != matched)
    throw Error(Error::Kind::mismatch, fmt::format("job '{}': symmetric schedule posts {} receives, {} are sent",
                                                   spec.name, recvs_total, matched));
  Job J;
  J.spec = std::move(spec);
  J.res.name = J.spec.name;
  if (opt.model_contention && npeers > 0) {
    const Contention c = contention_symmetric(T, p, J.spec.hosts, topo);
    J.res.contended_bandwidth_s = c.bandwidth_s;
    J.res.worst_step_share = c.worst_step_share;
  }
  const auto P = static_cast<std::uint32_t>(p);
  if (static_cast<std::uint64_t>(n) * P >= ~0u)
    throw Error(Error::Kind::config, fmt::format("job '{}': {} ops per rank x {} ranks exceed the simulator's 2^32 ops",
                                                 J.spec.name, n, p));
  // Static data once (rank 0's); the per-rank part (one byte per op: state and pending count)
  // is laid out by layout_symmetric when the run starts and knows whether it folds.
  J.sym = true;
  J.res.symmetric_layout = true;
  J.T.P = P;
  J.T.npeers = npeers;
  J.T.ops.assign(T.ops.begin(), T.ops.end());
  J.T.match = std::move(mt);
  J.T.seq.assign(n, ~0u);
  for (std::uint32_t i = 0; i < n; ++i)
    if (J.T.match[i] != ~0u) J.T.seq[i] = seq[i];
  J.T.conn = std::move(conn);
  J.T.succ_begin.assign(T.succ_begin.begin(), T.succ_begin.end());
  J.T.succ.assign(T.succ.begin(), T.succ.end());
  // Rendezvous and eager: every op after the template's first step also waits for its step.
  if (stepped()) J.T.step = program_steps(T);
  J.T.pending0.resize(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    const std::uint32_t d = T.ndeps[i] + (!J.T.step.empty() && J.T.step[i] > 0 ? 1 : 0);
    if (d > Job::kMaxPending)
      throw Error(Error::Kind::internal, fmt::format("job '{}': template op {} waits for {} things (at most {})",
                                                     J.spec.name, i, d, Job::kMaxPending));
    J.T.pending0[i] = static_cast<std::uint8_t>(d);
  }
  jobs.push_back(std::move(J));
}

// The per-rank part of a symmetric job, S ranks of it (P, or the fold's period).
void Simulator::Impl::layout_symmetric(Job& J, std::uint32_t S) {
  const auto n = static_cast<std::uint32_t>(J.T.ops.size());
  J.T.S = S;
  J.rank_busy.assign(S, 0);
  J.mem_bytes.assign(S, 0);
  J.dyn.resize(static_cast<std::size_t>(n) * S);
  for (std::uint32_t i = 0; i < n; ++i)
    std::fill_n(J.dyn.begin() + static_cast<std::ptrdiff_t>(i) * S, S,
                static_cast<std::uint8_t>(J.T.pending0[i] << Job::kPendShift));
  J.prog.nranks = static_cast<int>(J.T.P);
  J.prog.num_pairs = S * J.T.npeers;
  J.pair_q.resize(J.prog.num_pairs);
  J.pair_busy.assign(J.prog.num_pairs, 0);
  J.pair_next.assign(J.prog.num_pairs, 0);
  init_route_cache(J);
  if (!J.T.step.empty()) {
    // Program indices of a symmetric job are template indices (the same for every rank).
    J.step_start.assign(n, 0);
    for (std::uint32_t i = 0; i < n; ++i) J.step_start[i] = i == 0 || J.T.step[i] != J.T.step[i - 1];
    J.rank_end.assign(S, n);
    J.step_end.assign(S, 0);
    J.step_left.assign(S, 0);
    for (std::uint32_t r = 0; r < S; ++r) open_step(J, static_cast<int>(r), 0, false);
  }
  total_ops += J.num_ops();
}

void Simulator::Impl::add(JobSpec spec, Program prog) {
  const int p = prog.nranks;
  check_hosts(spec, p);
  Job J;
  J.spec = std::move(spec);
  J.prog = std::move(prog);
  J.res.name = J.spec.name;
  J.rank_busy.assign(p, 0);
  J.mem_bytes.assign(p, 0);
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
      const bool inc = coll::is_inc(x.op.kind);
      x.match = inc || J.prog.match[i] == ~0u ? J.prog.match[i] : perm[J.prog.match[i]];  // inc: group id
      x.pair_of = J.prog.pair_of[i];
      x.pair_seq = J.prog.pair_seq[i];
      x.succ_begin = J.prog.succ_begin[i];
      x.succ_end = J.prog.succ_begin[i + 1];
      x.pending = J.prog.ndeps[i];
      x.rank = r;
    }
  if (stepped()) setup_steps(J, perm);
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
  init_route_cache(J);
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
  for (std::uint32_t i = from; i < e; ++i) {
    const std::uint32_t op = J.sym ? i * J.T.S + static_cast<std::uint32_t>(r) : J.gate_ops[i];
    if (J.release(op)) work.emplace_back(ji, op);
  }
}

}  // namespace inc::sim
