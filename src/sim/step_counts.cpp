// The analytical model's counts (analytical.hpp, StepCounts): what a collective's schedule moves,
// counted from the real schedules of every rank (schedule_counts) or from closed forms
// (closed_form_counts); analytical.cpp turns counts into times (cost) and models iterations.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "sim/analytical.hpp"

namespace inc::sim {

using coll::Algorithm;
using coll::OpKind;

// ---- Counts from schedules -----------------------------------------------------------------

StepCounts schedule_counts(const Program& P) {
  StepCounts out;
  out.inc_members = P.nranks;
  const std::size_t N = P.num_ops();
  // Per-rank totals.
  for (int r = 0; r < P.nranks; ++r) {
    double sent = 0, recv = 0, red = 0, fwd = 0, inc = 0, msgs = 0;
    for (std::uint32_t i = P.rank_begin[r]; i < P.rank_begin[r + 1]; ++i) {
      const SimOp& o = P.ops[i];
      const double b = static_cast<double>(o.bytes);
      switch (o.kind) {
        case OpKind::send:
          sent += b;
          msgs += 1;
          if (o.forwards) fwd += b;
          break;
        case OpKind::recv:
          recv += b;
          break;
        case OpKind::recv_reduce:
          recv += b;
          red += b;
          break;
        case OpKind::reduce:
        case OpKind::repro_scan:  // local passes of a reproducible sum: as a reduce
        case OpKind::repro_encode:
        case OpKind::repro_decode:
        case OpKind::widen:
        case OpKind::narrow:
          red += b;
          break;
        case OpKind::copy:
          break;
        case OpKind::inc_reduce:
        case OpKind::inc_gather:
          inc += b;
          break;
        case OpKind::inc_broadcast:
          inc += o.receives || o.peer == r ? b : 0;
          break;
      }
    }
    out.bytes_sent = std::max(out.bytes_sent, sent);
    out.bytes_recv = std::max(out.bytes_recv, recv);
    out.bytes_reduced = std::max(out.bytes_reduced, red);
    out.bytes_forwarded = std::max(out.bytes_forwarded, fwd);
    out.inc_bytes = std::max(out.inc_bytes, inc);
    out.messages = std::max(out.messages, msgs);
    out.mem_host = std::max(out.mem_host, recv + sent);
    out.mem_edge = std::max(out.mem_edge, recv + sent - fwd);
  }
  // Critical path in rounds: a global topological pass. level = rounds completed when an op
  // can start; a matched message adds one round, a Core-INC group one (inc) round.
  std::vector<std::uint32_t> pending(N, 0);
  std::vector<std::uint32_t> level(N, 0), inc_level(N, 0);
  const std::size_t G = P.num_inc_groups();
  std::vector<std::uint32_t> group_pending(G, 0);
  // A rank starts one send per round, in program order (LogP's overhead serialises sends):
  // each send also waits for the previous send of its rank.
  std::vector<std::uint32_t> next_send(N, ~0u);
  for (int r = 0; r < P.nranks; ++r) {
    std::uint32_t prev = ~0u;
    for (std::uint32_t i = P.rank_begin[r]; i < P.rank_begin[r + 1]; ++i)
      if (P.ops[i].kind == OpKind::send) {
        if (prev != ~0u) {
          next_send[prev] = i;
          ++pending[i];
        }
        prev = i;
      }
  }
  for (std::size_t i = 0; i < N; ++i) {
    pending[i] += P.ndeps[i] + (is_recv(P.ops[i].kind) ? 1u : 0u);
    if (is_inc(P.ops[i].kind)) group_pending[P.match[i]] += P.ndeps[i];
  }
  std::vector<std::uint32_t> ready;
  ready.reserve(1024);
  std::size_t done = 0;
  auto release_group = [&](std::uint32_t g) {
    std::uint32_t lv = 0, il = 0;
    for (std::uint32_t m = P.inc_begin[g]; m < P.inc_begin[g + 1]; ++m) {
      lv = std::max(lv, level[P.inc_members[m]]);
      il = std::max(il, inc_level[P.inc_members[m]]);
    }
    for (std::uint32_t m = P.inc_begin[g]; m < P.inc_begin[g + 1]; ++m) {
      level[P.inc_members[m]] = lv;
      inc_level[P.inc_members[m]] = il;
      ready.push_back(P.inc_members[m]);
    }
  };
  for (std::size_t i = 0; i < N; ++i)
    if (pending[i] == 0 && !is_inc(P.ops[i].kind)) ready.push_back(static_cast<std::uint32_t>(i));
  for (std::size_t g = 0; g < G; ++g)
    if (group_pending[g] == 0) release_group(static_cast<std::uint32_t>(g));
  std::uint32_t max_level = 0, max_inc = 0;
  while (!ready.empty()) {
    const std::uint32_t i = ready.back();
    ready.pop_back();
    ++done;
    const SimOp& o = P.ops[i];
    // Level at completion.
    std::uint32_t fin = level[i], fin_inc = inc_level[i];
    if (is_inc(o.kind)) {
      ++fin;
      ++fin_inc;
    }
    max_level = std::max(max_level, fin);
    max_inc = std::max(max_inc, fin_inc);
    if (o.kind == OpKind::send) {
      if (const std::uint32_t ns = next_send[i]; ns != ~0u) {
        level[ns] = std::max(level[ns], fin + 1);
        inc_level[ns] = std::max(inc_level[ns], fin_inc);
        if (--pending[ns] == 0) ready.push_back(ns);
      }
      const std::uint32_t r = P.match[i];
      level[r] = std::max(level[r], fin + 1);
      inc_level[r] = std::max(inc_level[r], fin_inc);
      max_level = std::max(max_level, fin + 1);
      if (--pending[r] == 0) ready.push_back(r);
    }
    for (std::uint32_t s = P.succ_begin[i]; s < P.succ_begin[i + 1]; ++s) {
      const std::uint32_t j = P.succ[s];
      level[j] = std::max(level[j], fin);
      inc_level[j] = std::max(inc_level[j], fin_inc);
      if (is_inc(P.ops[j].kind)) {
        --pending[j];
        if (--group_pending[P.match[j]] == 0) release_group(P.match[j]);
      } else if (--pending[j] == 0) {
        ready.push_back(j);
      }
    }
  }
  if (done != N)
    throw Error(Error::Kind::mismatch,
                fmt::format("schedule deadlocks: {} of {} ops can never run", N - done, N));
  out.rounds = max_level;
  out.inc_rounds = max_inc;
  return out;
}

StepCounts schedule_counts(Collective c, Algorithm a, int p, std::uint64_t n, DataType dt) {
  coll::CollectiveParams cp;
  cp.coll = c;
  cp.algo = a;
  cp.nranks = p;
  cp.dtype = dt;
  cp.count = count_for_bytes(c, p, n, dt);
  // One message per step: segmentation changes neither the rounds nor the bytes.
  cp.segment_bytes = std::max<std::uint64_t>(n, 1);
  return schedule_counts(build_program(cp));
}

// ---- Closed forms --------------------------------------------------------------------------

namespace {
int floor_log2(int p) {
  int l = 0;
  while ((2 << l) <= p) ++l;
  return l;
}
int ceil_log2(int p) {
  int l = 0;
  while ((1 << l) < p) ++l;
  return l;
}
[[noreturn]] void unsupported(Collective c, Algorithm a) {
  throw Error(Error::Kind::invalid_argument,
              fmt::format("model: {} has no {} algorithm", name(c), coll::name(a)));
}
}  // namespace

namespace {
StepCounts closed_form_steps(Collective c, Algorithm a, int p, double n);
}  // namespace

StepCounts closed_form_counts(Collective c, Algorithm a, int p, double n) {
  StepCounts s = closed_form_steps(c, a, p, n);
  // Symmetric schedules: every rank sends, receives and forwards the same (broadcast trees set
  // their own).
  if (s.mem_host == 0) {
    s.mem_host = s.bytes_recv + s.bytes_sent;
    s.mem_edge = s.mem_host - s.bytes_forwarded;
  }
  return s;
}

namespace {
StepCounts closed_form_steps(Collective c, Algorithm a, int p, double n) {
  StepCounts s;
  if (p < 1) throw Error(Error::Kind::invalid_argument, "model: ranks must be >= 1");
  if (p == 1) return s;
  s.inc_members = p;
  // Core-INC: one switch operation on the whole vector (a barrier's carries none); an alltoall
  // has nothing for a switch to combine or replicate.
  if (a == Algorithm::inc) {
    if (c == Collective::alltoall) unsupported(c, a);
    s.rounds = s.inc_rounds = 1;
    if (c != Collective::barrier) s.inc_bytes = n;
    return s;
  }
  const double P = p, f = (P - 1) / P;
  const bool pow2 = (p & (p - 1)) == 0;
  const int lg = floor_log2(p);
  const double extra = pow2 ? 0 : 1;  // non-powers of two: fold the excess ranks in and out
  // p - 1 steps, each sending one block of n/p and receiving another (ring, pairwise).
  auto block_steps = [&] {
    s.rounds = s.messages = P - 1;
    s.bytes_sent = s.bytes_recv = f * n;
  };
  switch (c) {
    case Collective::allreduce:
      switch (a) {
        case Algorithm::ring:
          s.rounds = 2 * (P - 1);
          s.messages = 2 * (P - 1);
          s.bytes_sent = s.bytes_recv = 2 * f * n;
          s.bytes_reduced = f * n;
          // Every send but the first reads what the rank's previous receive wrote: the partial
          // sums of the reduce-scatter, then the own reduced shard and the forwarded ones.
          s.bytes_forwarded = (2 * P - 3) / P * n;
          return s;
        case Algorithm::recursive_doubling:
          s.rounds = lg + 2 * extra;
          s.messages = lg + extra;
          s.bytes_sent = s.bytes_recv = n * (lg + extra);
          s.bytes_reduced = n * (lg + extra);
          // Each step sends the vector the previous step's receive-reduce wrote; with a fold, a
          // folded-in rank's every send is such a forward.
          s.bytes_forwarded = n * (pow2 ? lg - 1 : lg + 1);
          s.mem_host = 2 * s.bytes_sent;
          s.mem_edge = n * (lg + 1);
          return s;
        case Algorithm::rabenseifner: {
          s.rounds = 2 * lg + 2 * extra;
          s.messages = 2 * lg + extra;
          const double q = std::ldexp(1.0, lg), fq = (q - 1) / q;
          s.bytes_sent = s.bytes_recv = 2 * fq * n + extra * n;
          s.bytes_reduced = fq * n + extra * n;
          // Every send but the first half vector forwards (a folded-in rank's every send).
          s.bytes_forwarded = pow2 ? (2 * fq - 0.5) * n : s.bytes_sent;
          s.mem_host = 2 * s.bytes_sent;
          s.mem_edge = (2 * fq + (pow2 ? 0.5 : 1.0)) * n;
          return s;
        }
        default:
          unsupported(c, a);
      }
    case Collective::reduce_scatter:
      if (a != Algorithm::ring) unsupported(c, a);
      block_steps();
      s.bytes_reduced = f * n;
      s.bytes_forwarded = (P - 2) / P * n;  // every partial sum but the first
      return s;
    case Collective::allgather:
      switch (a) {
        case Algorithm::ring:
          block_steps();
          s.bytes_forwarded = (P - 2) / P * n;
          return s;
        case Algorithm::recursive_doubling:
          // Powers of two: recursive doubling. Otherwise Bruck: ceil(lg p) steps, and a block
          // range that wraps around the end goes as two messages (steps that send >= 2 blocks).
          s.rounds = s.messages = ceil_log2(p);
          if (!pow2)
            for (int d = 1; d < p; d <<= 1)
              if (std::min(d, p - d) >= 2) s.rounds = s.messages = s.rounds + 1;
          s.bytes_sent = s.bytes_recv = f * n;
          // Every message but Bruck's wrapped pieces carries the rank's own block (read from
          // host memory): the most forwarded is rank p-1's, min(d, p-d) - 1 blocks per step d.
          s.bytes_forwarded = 0;
          if (!pow2)
            for (int d = 2; d < p; d <<= 1) s.bytes_forwarded += (std::min(d, p - d) - 1) * n / P;
          s.mem_host = s.mem_edge = 2 * f * n;
          return s;
        default:
          unsupported(c, a);
      }
    case Collective::broadcast:
      switch (a) {
        case Algorithm::binomial_tree:
          s.rounds = s.messages = ceil_log2(p);
          s.bytes_sent = n * ceil_log2(p);
          s.bytes_recv = n;
          // The root sends the most and forwards nothing; the first child forwards to its own
          // floor(log2 p) - 1 children.
          s.bytes_forwarded = n * (lg - 1);
          s.mem_host = s.mem_edge = s.bytes_sent;
          return s;
        case Algorithm::pipelined_chain:
          s.rounds = P - 1;
          s.messages = 1;
          s.bytes_sent = s.bytes_recv = n;
          s.bytes_forwarded = p > 2 ? n : 0;  // every rank between the root and the last
          s.mem_host = p > 2 ? 2 * n : n;
          s.mem_edge = n;
          return s;
        default:
          unsupported(c, a);
      }
    case Collective::alltoall:
      if (a != Algorithm::pairwise) unsupported(c, a);
      block_steps();
      return s;
    case Collective::barrier:
      if (a != Algorithm::dissemination) unsupported(c, a);
      s.rounds = s.messages = ceil_log2(p);
      return s;
  }
  unsupported(c, a);
}
}  // namespace

}  // namespace inc::sim
