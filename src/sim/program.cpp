#include "sim/program.hpp"

#include <algorithm>
#include <exception>
#include <numeric>
#include <thread>

#include <fmt/format.h>

namespace inc::sim {

using coll::OpKind;

int Program::rank_of(std::uint32_t op) const {
  auto it = std::upper_bound(rank_begin.begin(), rank_begin.end(), op);
  return static_cast<int>(it - rank_begin.begin()) - 1;
}

std::uint64_t count_for_bytes(Collective c, int p, std::uint64_t bytes, DataType dt) {
  const std::uint64_t e = size_of(dt);
  switch (c) {
    case Collective::allreduce:
    case Collective::broadcast:
      return bytes / e;
    case Collective::reduce_scatter:
    case Collective::allgather:
    case Collective::alltoall:
      return bytes / (e * static_cast<std::uint64_t>(p));
    case Collective::barrier:
      return 0;
  }
  return 0;
}

namespace {

bool overlaps(const coll::Region& a, const coll::Region& b) {
  return a.buf == b.buf && a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
}

// Forwarding (docs/EDGE.md, "Memory traffic"): a send every byte of which the receives it
// depends on wrote, so that an Edge-INC NIC holds the whole message and need not read it from
// host memory. A message that also carries the rank's own data (its input, or a block it
// copied) is read from host memory.
bool forwards(const coll::RankSchedule& s, std::size_t i) {
  const coll::Op& op = s.ops[i];
  if (op.kind != OpKind::send || op.src.bytes == 0) return false;
  thread_local std::vector<std::pair<std::uint64_t, std::uint64_t>> iv;
  iv.clear();
  const std::uint64_t lo = op.src.offset, hi = op.src.offset + op.src.bytes;
  for (std::uint32_t d = s.dep_begin[i]; d < s.dep_begin[i + 1]; ++d) {
    const coll::Op& w = s.ops[s.deps[d]];
    if (is_recv(w.kind) && overlaps(w.dst, op.src))
      iv.emplace_back(std::max(lo, w.dst.offset), std::min(hi, w.dst.offset + w.dst.bytes));
  }
  std::sort(iv.begin(), iv.end());
  std::uint64_t covered = lo;
  for (auto [a, b] : iv) {
    if (a > covered) return false;
    covered = std::max(covered, b);
  }
  return covered >= hi;
}

std::uint64_t op_bytes(const coll::Op& op) {
  switch (op.kind) {
    case OpKind::inc_broadcast:  // only the root has a source; everybody has the destination
    case OpKind::inc_gather:     // each rank's block travels in the whole vector (zero-padded)
      return std::max(op.src.bytes, op.dst.bytes);
    case OpKind::send:
    case OpKind::inc_reduce:
    case OpKind::copy:
    case OpKind::repro_scan:  // local passes of a reproducible sum, costed as a reduce
    case OpKind::repro_encode:
    case OpKind::repro_decode:
    case OpKind::widen:  // local conversions of a wide accumulator, costed as a reduce
    case OpKind::narrow:
      return op.src.bytes;
    case OpKind::recv:
    case OpKind::recv_reduce:
    case OpKind::reduce:
      return op.dst.bytes;
  }
  return 0;
}

// Appends one rank's schedule to the program (ops, deps as successors later).
struct Builder {
  Program prog;
  BigVec<std::uint32_t> dep_edges_from, dep_edges_to;  // global op indices

  void reserve(std::size_t ops, std::size_t deps) {
    prog.ops.reserve(ops);
    prog.ndeps.reserve(ops);
    dep_edges_from.reserve(deps);
    dep_edges_to.reserve(deps);
  }

  // Appends rank `shift`'s schedule; with shift > 0, `s` is rank 0's of a rotation-symmetric
  // collective of p ranks and every peer q becomes (q + shift) mod p.
  void add_rank(const coll::RankSchedule& s, int shift = 0, int p = 1) {
    const auto base = static_cast<std::uint32_t>(prog.ops.size());
    const std::size_t n = s.ops.size();
    if (!n) {
      prog.rank_begin.push_back(static_cast<std::uint32_t>(prog.ops.size()));
      return;
    }
    if (s.dep_begin.size() != n + 1)
      throw Error(Error::Kind::internal,
                  fmt::format("rank {}: schedule has no dependencies (infer_dependencies not run)",
                              prog.rank_begin.size() - 1));
    for (std::size_t i = 0; i < n; ++i) {
      const coll::Op& op = s.ops[i];
      SimOp so;
      so.kind = op.kind;
      so.peer = shift > 0 && op.peer >= 0 ? (op.peer + shift) % p : op.peer;
      so.bytes = op_bytes(op);
      so.receives = !is_inc(op.kind) || op.dst.bytes > 0;
      std::uint32_t nd = 0;
      for (std::uint32_t d = s.dep_begin[i]; d < s.dep_begin[i + 1]; ++d) {
        const std::uint32_t j = s.deps[d];
        ++nd;
        dep_edges_from.push_back(base + j);
        dep_edges_to.push_back(base + static_cast<std::uint32_t>(i));
      }
      so.forwards = forwards(s, i);
      prog.ops.push_back(so);
      prog.ndeps.push_back(nd);
    }
    prog.rank_begin.push_back(static_cast<std::uint32_t>(prog.ops.size()));
  }

  // Successor lists, then (if `link`) point-to-point matching and Core-INC groups.
  void finish(bool link = true) {
    Program& P = prog;
    const std::size_t N = P.ops.size();
    P.nranks = static_cast<int>(P.rank_begin.size()) - 1;
    // Successor CSR.
    P.succ_begin.assign(N + 1, 0);
    for (auto f : dep_edges_from) ++P.succ_begin[f + 1];
    std::partial_sum(P.succ_begin.begin(), P.succ_begin.end(), P.succ_begin.begin());
    P.succ.resize(dep_edges_from.size());
    {
      std::vector<std::uint32_t> fill(P.succ_begin.begin(), P.succ_begin.end() - 1);
      for (std::size_t e = 0; e < dep_edges_from.size(); ++e)
        P.succ[fill[dep_edges_from[e]]++] = dep_edges_to[e];
    }
    dep_edges_from.clear();
    dep_edges_from.shrink_to_fit();
    dep_edges_to.clear();
    dep_edges_to.shrink_to_fit();
    if (!link) return;

    P.match.assign(N, ~0u);
    P.pair_of.assign(N, ~0u);
    P.pair_seq.assign(N, ~0u);
    // Point-to-point matching: per rank, sends and recvs grouped by peer in program order.
    struct Item {
      std::int32_t peer;
      std::uint32_t op;
    };
    std::vector<std::vector<Item>> recvs(P.nranks);
    for (int r = 0; r < P.nranks; ++r) {
      auto& v = recvs[r];
      for (std::uint32_t i = P.rank_begin[r]; i < P.rank_begin[r + 1]; ++i)
        if (is_recv(P.ops[i].kind)) {
          if (P.ops[i].peer < 0 || P.ops[i].peer >= P.nranks || P.ops[i].peer == r)
            throw Error(Error::Kind::mismatch,
                        fmt::format("rank {} op {}: receive from invalid peer {}", r,
                                    i - P.rank_begin[r], P.ops[i].peer));
          v.push_back({P.ops[i].peer, i});
        }
      std::stable_sort(v.begin(), v.end(), [](const Item& a, const Item& b) { return a.peer < b.peer; });
    }
    std::vector<Item> sends;
    std::vector<std::size_t> used(P.nranks, 0);  // matched receive count per receiver (check)
    for (int a = 0; a < P.nranks; ++a) {
      sends.clear();
      for (std::uint32_t i = P.rank_begin[a]; i < P.rank_begin[a + 1]; ++i)
        if (P.ops[i].kind == OpKind::send) {
          if (P.ops[i].peer < 0 || P.ops[i].peer >= P.nranks || P.ops[i].peer == a)
            throw Error(Error::Kind::mismatch,
                        fmt::format("rank {} op {}: send to invalid peer {}", a,
                                    i - P.rank_begin[a], P.ops[i].peer));
          sends.push_back({P.ops[i].peer, i});
        }
      std::stable_sort(sends.begin(), sends.end(),
                       [](const Item& x, const Item& y) { return x.peer < y.peer; });
      for (std::size_t s = 0; s < sends.size();) {
        const int b = sends[s].peer;
        std::size_t e = s;
        while (e < sends.size() && sends[e].peer == b) ++e;
        auto& rv = recvs[b];
        auto lo = std::lower_bound(rv.begin(), rv.end(), a,
                                   [](const Item& x, int peer) { return x.peer < peer; });
        auto hi = lo;
        while (hi != rv.end() && hi->peer == a) ++hi;
        if (static_cast<std::size_t>(hi - lo) != e - s)
          throw Error(Error::Kind::mismatch,
                      fmt::format("rank {} sends {} messages to rank {}, which receives {} from it",
                                  a, e - s, b, hi - lo));
        const std::uint32_t pair_id = P.num_pairs++;
        for (std::size_t k = 0; k < e - s; ++k) {
          const std::uint32_t so = sends[s + k].op, ro = (lo + static_cast<std::ptrdiff_t>(k))->op;
          P.pair_of[so] = pair_id;
          P.pair_seq[so] = P.pair_seq[ro] = static_cast<std::uint32_t>(k);
          if (P.ops[so].bytes != P.ops[ro].bytes)
            throw Error(Error::Kind::mismatch,
                        fmt::format("message {} from rank {} to rank {}: {} bytes sent, {} expected",
                                    k, a, b, P.ops[so].bytes, P.ops[ro].bytes));
          P.match[so] = ro;
          P.match[ro] = so;
        }
        used[b] += e - s;
        s = e;
      }
    }
    for (int b = 0; b < P.nranks; ++b)
      if (used[b] != recvs[b].size())
        throw Error(Error::Kind::mismatch,
                    fmt::format("rank {} posts {} receives but only {} messages are sent to it", b,
                                recvs[b].size(), used[b]));

    // Core-INC groups: the k-th inc op of every rank.
    std::vector<std::vector<std::uint32_t>> per_rank(P.nranks);
    std::size_t groups = 0;
    for (int r = 0; r < P.nranks; ++r) {
      for (std::uint32_t i = P.rank_begin[r]; i < P.rank_begin[r + 1]; ++i)
        if (is_inc(P.ops[i].kind)) per_rank[r].push_back(i);
      if (r > 0 && per_rank[r].size() != groups)
        throw Error(Error::Kind::mismatch,
                    fmt::format("rank {} issues {} Core-INC ops, rank 0 issues {}", r,
                                per_rank[r].size(), groups));
      groups = per_rank[r].size();
    }
    P.inc_begin.assign(1, 0);
    for (std::size_t g = 0; g < groups; ++g) {
      for (int r = 0; r < P.nranks; ++r) {
        const std::uint32_t o = per_rank[r][g];
        const SimOp& first = P.ops[per_rank[0][g]];
        if (P.ops[o].kind != first.kind || P.ops[o].peer != first.peer ||
            ((first.kind == OpKind::inc_reduce || first.kind == OpKind::inc_gather) &&
             P.ops[o].bytes != first.bytes))
          throw Error(Error::Kind::mismatch,
                      fmt::format("Core-INC op {}: rank {} disagrees with rank 0 (kind, root or size)",
                                  g, r));
        P.match[o] = static_cast<std::uint32_t>(g);
        P.inc_members.push_back(o);
      }
      P.inc_begin.push_back(static_cast<std::uint32_t>(P.inc_members.size()));
    }
  }
};

// Rank r's schedule `b` is rank 0's `a` rotated by r: same kinds, sizes, dependencies and
// forwarding, peers shifted by r.
bool rotated_equal(const coll::RankSchedule& a, const coll::RankSchedule& b, int r, int p) {
  if (a.ops.size() != b.ops.size() || a.dep_begin != b.dep_begin) return false;
  for (std::size_t i = 0; i < a.ops.size(); ++i) {
    const coll::Op &x = a.ops[i], &y = b.ops[i];
    if (x.kind != y.kind || op_bytes(x) != op_bytes(y) || x.fence != y.fence) return false;
    if ((x.peer >= 0 ? (x.peer + r) % p : x.peer) != y.peer) return false;
    std::vector<std::uint32_t> da(a.deps.begin() + a.dep_begin[i], a.deps.begin() + a.dep_begin[i + 1]);
    std::vector<std::uint32_t> db(b.deps.begin() + b.dep_begin[i], b.deps.begin() + b.dep_begin[i + 1]);
    std::sort(da.begin(), da.end());
    std::sort(db.begin(), db.end());
    if (da != db) return false;
    if (forwards(a, i) != forwards(b, i)) return false;
  }
  return true;
}

}  // namespace

bool symmetric_template(const coll::CollectiveParams& proto, coll::RankSchedule& out) {
  if (!coll::rotation_symmetric(proto)) return false;
  coll::CollectiveParams p = proto;
  p.rank = 0;
  out = coll::build_schedule(p);
  for (int r : {1, proto.nranks / 2, proto.nranks - 1}) {
    p.rank = r;
    if (!rotated_equal(out, coll::build_schedule(p), r, proto.nranks)) return false;
  }
  return true;
}

Program template_program(const coll::RankSchedule& s0) {
  Builder b;
  b.prog.rank_begin.push_back(0);
  b.add_rank(s0);
  b.finish(/*link=*/false);
  return std::move(b.prog);
}

Program build_program(const coll::CollectiveParams& proto) {
  Builder b;
  b.prog.rank_begin.push_back(0);
  // Rotation-symmetric collectives: one schedule for all ranks.
  coll::RankSchedule s0;
  if (symmetric_template(proto, s0)) {
    {
      const double n = static_cast<double>(proto.nranks);
      b.reserve(static_cast<std::size_t>(static_cast<double>(s0.ops.size()) * n) + 16,
                static_cast<std::size_t>(static_cast<double>(s0.deps.size()) * n) + 16);
      for (int r = 0; r < proto.nranks; ++r) b.add_rank(s0, r, proto.nranks);
      b.finish();
      return std::move(b.prog);
    }
  }
  // Schedules are built in parallel, in batches (build_schedule is a pure function), and
  // appended in rank order; the batches bound the memory held in coll::RankSchedule form.
  const int threads = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
  const int batch = 8 * threads;
  std::vector<coll::RankSchedule> buf(static_cast<std::size_t>(std::min(batch, std::max(proto.nranks, 1))));
  for (int base = 0; base < proto.nranks; base += batch) {
    const int n = std::min(batch, proto.nranks - base);
    std::vector<std::exception_ptr> errors(static_cast<std::size_t>(threads));
    auto work = [&](int t) {
      try {
        coll::CollectiveParams p = proto;
        for (int i = t; i < n; i += threads) {
          p.rank = base + i;
          buf[static_cast<std::size_t>(i)] = coll::build_schedule(p);
        }
      } catch (...) {
        errors[static_cast<std::size_t>(t)] = std::current_exception();
      }
    };
    if (threads == 1 || n == 1) {
      work(0);
    } else {
      std::vector<std::thread> pool;
      for (int t = 1; t < threads; ++t) pool.emplace_back(work, t);
      work(0);
      for (auto& th : pool) th.join();
    }
    for (auto& e : errors)
      if (e) std::rethrow_exception(e);
    if (base == 0) {
      // Reserve from the first batch (growing these arrays by doubling would fault in and
      // zero-fill fresh pages at every step).
      std::size_t ops = 0, deps = 0;
      for (int i = 0; i < n; ++i) {
        ops += buf[static_cast<std::size_t>(i)].ops.size();
        deps += buf[static_cast<std::size_t>(i)].deps.size();
      }
      const double scale = 1.02 * proto.nranks / n;
      b.reserve(static_cast<std::size_t>(ops * scale) + 16, static_cast<std::size_t>(deps * scale) + 16);
    }
    for (int i = 0; i < n; ++i) {
      b.add_rank(buf[static_cast<std::size_t>(i)]);
      buf[static_cast<std::size_t>(i)] = coll::RankSchedule{};
    }
  }
  b.finish();
  return std::move(b.prog);
}

std::vector<std::uint32_t> program_steps(const Program& P) {
  const std::size_t N = P.num_ops();
  std::vector<std::uint32_t> step(N, 0);
  // latest[i] = 1 + the highest step of op i's predecessors seen so far (0: none).
  std::vector<std::uint32_t> latest(N, 0);
  for (int r = 0; r < P.nranks; ++r) {
    std::uint32_t cur = 0;
    for (std::uint32_t i = P.rank_begin[r]; i < P.rank_begin[r + 1]; ++i) {
      if (i > P.rank_begin[r] && latest[i] == cur + 1) ++cur;  // depends on the current step
      step[i] = cur;
      for (std::uint32_t s = P.succ_begin[i]; s < P.succ_begin[i + 1]; ++s)
        latest[P.succ[s]] = std::max(latest[P.succ[s]], cur + 1);
    }
  }
  return step;
}

Program link_program(const std::vector<coll::RankSchedule>& ranks) {
  Builder b;
  b.prog.rank_begin.push_back(0);
  for (const auto& s : ranks) b.add_rank(s);
  b.finish();
  return std::move(b.prog);
}

}  // namespace inc::sim
