// Step, message and byte counts of each algorithm (the analytical model relies on them), the
// barrier's happens-before property, algorithm names and the default selection.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <queue>
#include <vector>

#include "coll/local_executor.hpp"
#include "coll/schedule.hpp"

namespace inc::coll {
namespace {

CollectiveParams params(Collective coll, Algorithm algo, int p, std::uint64_t count,
                        DataType t = DataType::f32) {
  CollectiveParams c;
  c.coll = coll;
  c.algo = algo;
  c.nranks = p;
  c.count = count;
  c.dtype = t;
  return c;
}

int ceil_log2(int p) { return p <= 1 ? 0 : static_cast<int>(std::bit_width(static_cast<unsigned>(p - 1))); }

TEST(Counts, RingAllreduceSendsTwoPMinusOneChunks) {
  for (int p : {2, 3, 4, 5, 8, 16}) {
    auto c = params(Collective::allreduce, Algorithm::ring, p, static_cast<std::uint64_t>(p) * 1000);
    const std::uint64_t n = c.count * 4;
    for (const auto& s : build_schedules(c)) {
      const ScheduleCounts k = summarize(s);
      EXPECT_EQ(k.sends, 2u * static_cast<unsigned>(p - 1)) << p;
      EXPECT_EQ(k.recvs, 2u * static_cast<unsigned>(p - 1)) << p;
      EXPECT_EQ(k.send_bytes * static_cast<std::uint64_t>(p), 2 * static_cast<std::uint64_t>(p - 1) * n) << p;
      EXPECT_EQ(k.reduce_bytes * static_cast<std::uint64_t>(p), static_cast<std::uint64_t>(p - 1) * n) << p;
      EXPECT_EQ(k.copy_bytes, 0u) << "out of place reads the input directly";
      EXPECT_EQ(s.scratch_bytes, 0u);
    }
  }
}

TEST(Counts, RingAllreduceSegmentsEachChunk) {
  const int p = 4;
  auto c = params(Collective::allreduce, Algorithm::ring, p, 4000);  // chunks of 4000 B
  c.segment_bytes = 1000;
  for (const auto& s : build_schedules(c)) {
    const ScheduleCounts k = summarize(s);
    EXPECT_EQ(k.sends, 2u * (p - 1) * 4);
    for (const Op& op : s.ops)
      if (op.kind == OpKind::send) {
        EXPECT_LE(op.src.bytes, 1000u);
      }
  }
}

TEST(Counts, RecursiveDoublingLog2PSteps) {
  for (int p : {2, 4, 8, 16}) {
    auto c = params(Collective::allreduce, Algorithm::recursive_doubling, p, 1000);
    for (const auto& s : build_schedules(c)) {
      const ScheduleCounts k = summarize(s);
      EXPECT_EQ(k.sends, static_cast<std::uint64_t>(std::countr_zero(static_cast<unsigned>(p))));
      EXPECT_EQ(k.send_bytes, k.sends * 4000);
    }
  }
  // Not a power of two: 2(p - p2) ranks fold; the rest run log2(p2) steps.
  auto c = params(Collective::allreduce, Algorithm::recursive_doubling, 7, 1000);
  const auto all = build_schedules(c);
  EXPECT_EQ(summarize(all[0]).sends, 1u);  // sits out: hands its data over
  EXPECT_EQ(summarize(all[0]).recvs, 1u);  // and gets the result
  EXPECT_EQ(summarize(all[1]).sends, 3u);  // absorbs rank 0: 2 steps + result back
  EXPECT_EQ(summarize(all[1]).recvs, 3u);
  EXPECT_EQ(summarize(all[6]).sends, 2u);
}

TEST(Counts, RabenseifnerHalvesAndDoubles) {
  for (int p : {2, 4, 8, 16}) {
    auto c = params(Collective::allreduce, Algorithm::rabenseifner, p, static_cast<std::uint64_t>(p) * 100);
    const std::uint64_t n = c.count * 4;
    for (const auto& s : build_schedules(c)) {
      const ScheduleCounts k = summarize(s);
      EXPECT_EQ(k.sends, 2u * static_cast<unsigned>(std::countr_zero(static_cast<unsigned>(p))));
      EXPECT_EQ(k.send_bytes * static_cast<std::uint64_t>(p), 2 * static_cast<std::uint64_t>(p - 1) * n);
      EXPECT_EQ(s.scratch_bytes, 0u);
    }
  }
}

TEST(Counts, ReduceScatterAndAllgatherRing) {
  for (int p : {2, 3, 5, 8}) {
    for (const auto& s : build_schedules(params(Collective::reduce_scatter, Algorithm::ring, p, 100))) {
      const ScheduleCounts k = summarize(s);
      EXPECT_EQ(k.sends, static_cast<std::uint64_t>(p - 1));
      EXPECT_EQ(k.send_bytes, static_cast<std::uint64_t>(p - 1) * 400);
      EXPECT_LE(s.scratch_bytes, 800u) << "two shard-sized slots at most";
    }
    for (const auto& s : build_schedules(params(Collective::allgather, Algorithm::ring, p, 100))) {
      const ScheduleCounts k = summarize(s);
      EXPECT_EQ(k.sends, static_cast<std::uint64_t>(p - 1));
      EXPECT_EQ(k.send_bytes, static_cast<std::uint64_t>(p - 1) * 400);
    }
  }
}

TEST(Counts, AllgatherRecursiveDoublingAndBruck) {
  for (int p : {2, 3, 4, 5, 7, 8, 9, 16}) {
    for (const auto& s : build_schedules(params(Collective::allgather, Algorithm::recursive_doubling, p, 10))) {
      const ScheduleCounts k = summarize(s);
      EXPECT_EQ(k.send_bytes, static_cast<std::uint64_t>(p - 1) * 40) << p;
      EXPECT_EQ(k.recv_bytes, static_cast<std::uint64_t>(p - 1) * 40) << p;
      // One message per step, two when a Bruck range wraps around.
      EXPECT_GE(k.sends, static_cast<std::uint64_t>(ceil_log2(p))) << p;
      EXPECT_LE(k.sends, 2 * static_cast<std::uint64_t>(ceil_log2(p))) << p;
      if (std::has_single_bit(static_cast<unsigned>(p))) {
        EXPECT_EQ(k.sends, static_cast<std::uint64_t>(ceil_log2(p)));
      }
    }
  }
}

TEST(Counts, BroadcastTrees) {
  for (int p : {2, 3, 5, 8, 9, 16}) {
    for (int root : {0, p - 1}) {
      auto c = params(Collective::broadcast, Algorithm::binomial_tree, p, 100);
      c.root = root;
      std::uint64_t total_sends = 0;
      const auto all = build_schedules(c);
      for (int r = 0; r < p; ++r) {
        const ScheduleCounts k = summarize(all[static_cast<std::size_t>(r)]);
        total_sends += k.sends;
        EXPECT_EQ(k.recvs, r == root ? 0u : 1u);
        if (r == root) {
          EXPECT_EQ(k.sends, static_cast<std::uint64_t>(ceil_log2(p)));
        }
      }
      EXPECT_EQ(total_sends, static_cast<std::uint64_t>(p - 1));

      c.algo = Algorithm::pipelined_chain;
      c.segment_bytes = 100;  // 400 B: 4 segments
      const auto chain = build_schedules(c);
      for (int r = 0; r < p; ++r) {
        const ScheduleCounts k = summarize(chain[static_cast<std::size_t>(r)]);
        const bool last = r == (root + p - 1) % p;
        EXPECT_EQ(k.sends, last ? 0u : 4u);
        EXPECT_EQ(k.recvs, r == root ? 0u : 4u);
      }
    }
  }
}

TEST(Counts, AlltoallAndBarrier) {
  for (int p : {2, 3, 4, 7, 16}) {
    const auto all = build_schedules(params(Collective::alltoall, Algorithm::pairwise, p, 10));
    for (int r = 0; r < p; ++r) {
      const RankSchedule& s = all[static_cast<std::size_t>(r)];
      const ScheduleCounts k = summarize(s);
      EXPECT_EQ(k.sends, static_cast<std::uint64_t>(p - 1));
      EXPECT_EQ(k.send_bytes, static_cast<std::uint64_t>(p - 1) * 40);
      EXPECT_EQ(k.copy_bytes, 40u);  // own block
      std::vector<int> sent(static_cast<std::size_t>(p), 0), received(static_cast<std::size_t>(p), 0);
      for (const Op& op : s.ops) {
        if (op.kind == OpKind::send) ++sent[static_cast<std::size_t>(op.peer)];
        if (op.kind == OpKind::recv) ++received[static_cast<std::size_t>(op.peer)];
      }
      for (int q = 0; q < p; ++q) {  // every other rank exactly once
        EXPECT_EQ(sent[static_cast<std::size_t>(q)], q == r ? 0 : 1);
        EXPECT_EQ(received[static_cast<std::size_t>(q)], q == r ? 0 : 1);
      }
    }
    for (const auto& s : build_schedules(params(Collective::barrier, Algorithm::automatic, p, 0))) {
      const ScheduleCounts k = summarize(s);
      EXPECT_EQ(s.algo, Algorithm::dissemination);
      EXPECT_EQ(k.sends, static_cast<std::uint64_t>(ceil_log2(p)));
      EXPECT_EQ(k.send_bytes, 0u);
    }
  }
}

TEST(Counts, IncSegments) {
  auto c = params(Collective::allreduce, Algorithm::inc, 4, 100000);  // 400000 B
  for (const auto& s : build_schedules(c)) {
    const ScheduleCounts k = summarize(s);
    EXPECT_EQ(k.sends, 0u);
    EXPECT_EQ(k.inc_ops, (400000u + 65535) / 65536);
    EXPECT_EQ(k.inc_bytes, 400000u);
  }
  c.coll = Collective::reduce_scatter;  // 4 shards of 400000 B, only the owner receives
  const auto rs = build_schedules(c);
  for (int r = 0; r < 4; ++r) {
    std::uint64_t received = 0;
    for (const Op& op : rs[static_cast<std::size_t>(r)].ops) received += op.dst.bytes;
    EXPECT_EQ(received, 400000u);
  }
  c.coll = Collective::allgather;  // 4 blocks of 40000 B: one replication per owner
  c.count = 10000;
  const auto ag = build_schedules(c);
  for (int me = 0; me < 4; ++me) {
    std::vector<int> roots;
    std::uint64_t copied = 0, received = 0;
    for (const Op& op : ag[static_cast<std::size_t>(me)].ops) {
      if (op.kind == OpKind::inc_broadcast) roots.push_back(op.peer);
      if (op.kind == OpKind::inc_broadcast) received += op.dst.bytes;
      if (op.kind == OpKind::copy) copied += op.dst.bytes;
    }
    EXPECT_EQ(roots, (std::vector<int>{0, 1, 2, 3}));
    EXPECT_EQ(copied, 40000u);  // its own block, locally, not back from the switch
    EXPECT_EQ(received, 120000u);
  }
  // Small (16 KiB in all at most): one switch operation for the whole vector.
  c.count = 10;
  for (const auto& s : build_schedules(c)) {
    ASSERT_EQ(s.ops.size(), 1u);
    EXPECT_EQ(s.ops[0].kind, OpKind::inc_gather);
    EXPECT_EQ(s.ops[0].dst.bytes, 160u);
  }
  c.coll = Collective::reduce_scatter;
  for (const auto& s : build_schedules(c)) {
    EXPECT_EQ(summarize(s).inc_ops, 1u);
    EXPECT_EQ(summarize(s).inc_bytes, 160u);
    EXPECT_EQ(summarize(s).copy_bytes, 40u);  // the rank's own shard of the whole result
  }
}

TEST(Counts, EmptyCollectivesAreEmptyOnEveryRank) {
  for (Collective coll : {Collective::allreduce, Collective::reduce_scatter, Collective::allgather,
                          Collective::broadcast, Collective::alltoall}) {
    for (int p : {1, 3, 8}) {
      for (const auto& s : build_schedules(params(coll, Algorithm::automatic, p, 0))) {
        EXPECT_TRUE(s.ops.empty());
        EXPECT_EQ(s.dep_begin.size(), 1u);
      }
    }
  }
}

// The k-th send of every (a, b) is no larger than segment_bytes whenever it is set.
TEST(Counts, SegmentBytesBoundsEveryMessage) {
  for (Collective coll : {Collective::allreduce, Collective::reduce_scatter, Collective::allgather,
                          Collective::broadcast, Collective::alltoall}) {
    for (Algorithm algo : {Algorithm::ring, Algorithm::recursive_doubling, Algorithm::rabenseifner,
                           Algorithm::binomial_tree, Algorithm::pipelined_chain, Algorithm::pairwise,
                           Algorithm::inc}) {
      if (!supports(coll, algo)) continue;
      auto c = params(coll, algo, 5, 777);
      c.segment_bytes = 256;
      for (const auto& s : build_schedules(c))
        for (const Op& op : s.ops) {
          if (op.kind == OpKind::copy || op.kind == OpKind::reduce) continue;  // local, not messages
          EXPECT_LE(op.src.bytes, 256u) << name(coll) << " " << name(algo) << " " << to_string(op);
          EXPECT_LE(op.dst.bytes, 256u) << name(coll) << " " << name(algo) << " " << to_string(op);
        }
    }
  }
}

// Barrier: every rank's last op must happen after some op of every other rank (through local
// dependencies and messages), i.e. no rank can leave before all have entered.
TEST(Barrier, EveryRankHearsFromEveryRank) {
  for (int p : {2, 3, 5, 8, 9, 16}) {
    const auto all = build_schedules(params(Collective::barrier, Algorithm::dissemination, p, 0));
    // Global graph: ops numbered by rank; edges deps (local) and send -> matching recv.
    std::vector<std::uint32_t> base(static_cast<std::size_t>(p) + 1, 0);
    for (int r = 0; r < p; ++r) base[static_cast<std::size_t>(r) + 1] = base[static_cast<std::size_t>(r)] + static_cast<std::uint32_t>(all[static_cast<std::size_t>(r)].ops.size());
    const std::uint32_t n = base.back();
    std::vector<std::vector<std::uint32_t>> preds(n);
    std::vector<std::vector<std::vector<std::uint32_t>>> sends(static_cast<std::size_t>(p), std::vector<std::vector<std::uint32_t>>(static_cast<std::size_t>(p)));
    std::vector<std::vector<std::uint32_t>> recv_seen(static_cast<std::size_t>(p), std::vector<std::uint32_t>(static_cast<std::size_t>(p), 0));
    for (int r = 0; r < p; ++r) {
      const auto& s = all[static_cast<std::size_t>(r)];
      for (std::uint32_t i = 0; i < s.ops.size(); ++i) {
        for (auto d = s.dep_begin[i]; d < s.dep_begin[i + 1]; ++d) preds[base[static_cast<std::size_t>(r)] + i].push_back(base[static_cast<std::size_t>(r)] + s.deps[d]);
        if (s.ops[i].kind == OpKind::send) sends[static_cast<std::size_t>(r)][static_cast<std::size_t>(s.ops[i].peer)].push_back(base[static_cast<std::size_t>(r)] + i);
      }
    }
    for (int r = 0; r < p; ++r) {
      const auto& s = all[static_cast<std::size_t>(r)];
      for (std::uint32_t i = 0; i < s.ops.size(); ++i)
        if (s.ops[i].kind == OpKind::recv) {
          const auto from = static_cast<std::size_t>(s.ops[i].peer);
          preds[base[static_cast<std::size_t>(r)] + i].push_back(sends[from][static_cast<std::size_t>(r)][recv_seen[static_cast<std::size_t>(r)][from]++]);
        }
    }
    auto rank_of = [&](std::uint32_t g) {
      int r = 0;
      while (base[static_cast<std::size_t>(r) + 1] <= g) ++r;
      return r;
    };
    for (int r = 0; r < p; ++r) {
      // Rank r leaves when all its ops are done: rank a is heard by r if one of a's ops
      // precedes one of r's.
      std::vector<char> seen(n, 0);
      std::vector<char> heard(static_cast<std::size_t>(p), 0);
      heard[static_cast<std::size_t>(r)] = 1;
      std::queue<std::uint32_t> todo;
      for (std::uint32_t g = base[static_cast<std::size_t>(r)]; g < base[static_cast<std::size_t>(r) + 1]; ++g) todo.push(g);
      while (!todo.empty()) {
        const std::uint32_t g = todo.front();
        todo.pop();
        for (std::uint32_t pr : preds[g])
          if (!seen[pr]) {
            seen[pr] = 1;
            heard[static_cast<std::size_t>(rank_of(pr))] = 1;
            todo.push(pr);
          }
      }
      for (int a = 0; a < p; ++a) EXPECT_TRUE(heard[static_cast<std::size_t>(a)]) << "p=" << p << " rank " << r << " leaves without hearing from " << a;
    }
  }
}

TEST(Names, RoundTripAndAliases) {
  for (int i = 0; i < kNumAlgorithms; ++i) {
    const auto a = static_cast<Algorithm>(i);
    Algorithm out = Algorithm::automatic;
    ASSERT_TRUE(parse_algorithm(name(a), out)) << name(a);
    EXPECT_EQ(out, a);
  }
  Algorithm a{};
  EXPECT_TRUE(parse_algorithm("rd", a));
  EXPECT_EQ(a, Algorithm::recursive_doubling);
  EXPECT_TRUE(parse_algorithm("Tree", a));
  EXPECT_EQ(a, Algorithm::binomial_tree);
  EXPECT_TRUE(parse_algorithm("chain", a));
  EXPECT_EQ(a, Algorithm::pipelined_chain);
  EXPECT_TRUE(parse_algorithm("auto", a));
  EXPECT_EQ(a, Algorithm::automatic);
  EXPECT_TRUE(parse_algorithm("recursive-doubling", a));
  EXPECT_FALSE(parse_algorithm("ringg", a));
  EXPECT_FALSE(parse_algorithm("", a));
}

TEST(Selection, DefaultsAreSupportedAndFollowTheDocumentedRule) {
  for (int c = 0; c < kNumCollectives; ++c)
    for (int p : {1, 2, 3, 8, 1024})
      for (std::uint64_t count : {0ull, 1ull, 1000ull, 1000000ull, 100000000ull}) {
        auto prm = params(static_cast<Collective>(c), Algorithm::automatic, p, count);
        const Algorithm a = select_algorithm(prm);
        EXPECT_NE(a, Algorithm::automatic);
        EXPECT_NE(a, Algorithm::inc) << "inc needs a switch: the caller decides";
        EXPECT_TRUE(supports(prm.coll, a)) << name(prm.coll) << " " << name(a);
      }
  auto ar = [](int p, std::uint64_t bytes) {
    return select_algorithm(params(Collective::allreduce, Algorithm::automatic, p, bytes / 4));
  };
  EXPECT_EQ(ar(8, 4 << 10), Algorithm::recursive_doubling);
  EXPECT_EQ(ar(5, 32 << 10), Algorithm::recursive_doubling);
  EXPECT_EQ(ar(8, 128 << 10), Algorithm::ring);
  EXPECT_EQ(ar(8, 2 << 20), Algorithm::rabenseifner);
  EXPECT_EQ(ar(5, 2 << 20), Algorithm::rabenseifner);
  EXPECT_EQ(ar(8, 64 << 20), Algorithm::ring);
  auto bc = [](int p, std::uint64_t bytes) {
    return select_algorithm(params(Collective::broadcast, Algorithm::automatic, p, bytes / 4));
  };
  EXPECT_EQ(bc(16, 64 << 10), Algorithm::binomial_tree);
  EXPECT_EQ(bc(16, 64 << 20), Algorithm::pipelined_chain);
  EXPECT_EQ(bc(1024, 4 << 20), Algorithm::binomial_tree);  // chain too deep for 4 MiB
  // An explicit algorithm is kept.
  EXPECT_EQ(select_algorithm(params(Collective::allreduce, Algorithm::ring, 8, 1)), Algorithm::ring);
}

TEST(BuildSchedule, RejectsBadCalls) {
  EXPECT_THROW(build_schedule(params(Collective::alltoall, Algorithm::ring, 4, 10)), Error);
  EXPECT_THROW(build_schedule(params(Collective::barrier, Algorithm::ring, 4, 0)), Error);
  auto c = params(Collective::broadcast, Algorithm::binomial_tree, 4, 10);
  c.root = 4;
  EXPECT_THROW(build_schedule(c), Error);
  c = params(Collective::allreduce, Algorithm::ring, 4, 10);
  c.rank = 4;
  EXPECT_THROW(build_schedule(c), Error);
  c.rank = 0;
  c.nranks = 0;
  EXPECT_THROW(build_schedule(c), Error);
  c = params(Collective::allreduce, Algorithm::ring, 4, ~0ull / 2);
  EXPECT_THROW(build_schedule(c), Error);
  try {
    build_schedule(params(Collective::alltoall, Algorithm::ring, 4, 10));
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("ring"), std::string::npos) << e.what();
  }
}

TEST(InPlace, SchedulesUseOnlyTheOutputBuffer) {
  for (Collective coll : {Collective::allreduce, Collective::reduce_scatter, Collective::allgather,
                          Collective::broadcast, Collective::alltoall}) {
    for (Algorithm algo : {Algorithm::ring, Algorithm::recursive_doubling, Algorithm::rabenseifner,
                           Algorithm::binomial_tree, Algorithm::pipelined_chain, Algorithm::pairwise,
                           Algorithm::inc}) {
      if (!supports(coll, algo)) continue;
      for (int p : {1, 3, 4}) {
        auto c = params(coll, algo, p, 50);
        c.in_place = true;
        EXPECT_EQ(input_bytes(c), output_bytes(c));
        for (const auto& s : build_schedules(c))
          for (const Op& op : s.ops) {
            EXPECT_NE(op.src.bytes && op.src.buf == BufferId::input, true) << to_string(op);
            EXPECT_NE(op.dst.bytes && op.dst.buf == BufferId::input, true) << to_string(op);
          }
      }
    }
  }
  auto c = params(Collective::reduce_scatter, Algorithm::ring, 4, 50);
  c.in_place = true;
  c.rank = 2;
  EXPECT_EQ(result_region(c), (Region{BufferId::output, 2 * 50 * 4, 50 * 4}));
  c.in_place = false;
  EXPECT_EQ(result_region(c), (Region{BufferId::output, 0, 50 * 4}));
}

// Schedules for large jobs build quickly enough for the simulator (no timing asserted here; the
// point is that building is near-linear, which the op counts let us check).
TEST(Scale, LargeRankCounts) {
  auto c = params(Collective::allreduce, Algorithm::ring, 1024, 1024 * 256);
  c.rank = 17;
  const RankSchedule s = build_schedule(c);
  EXPECT_EQ(summarize(s).sends, 2046u);
  EXPECT_LE(s.deps.size(), 4 * s.ops.size());
  c = params(Collective::allreduce, Algorithm::recursive_doubling, 16384, 1000);
  c.rank = 12345;
  EXPECT_EQ(summarize(build_schedule(c)).sends, 14u);
  c = params(Collective::allgather, Algorithm::recursive_doubling, 16383, 10);
  c.rank = 77;
  EXPECT_LE(summarize(build_schedule(c)).sends, 28u);
}

// rotation_symmetric's claim, checked on every rank: rank r's schedule is rank 0's with peers
// shifted by r (kinds, sizes, fences, dependency sets), and where it answers false for an
// Allreduce ring some rank indeed differs (uneven chunks), so the predicate is not "never".
bool rotated(const RankSchedule& a, const RankSchedule& b, int r, int p) {
  if (a.ops.size() != b.ops.size() || a.dep_begin != b.dep_begin) return false;
  for (std::size_t i = 0; i < a.ops.size(); ++i) {
    const Op &x = a.ops[i], &y = b.ops[i];
    if (x.kind != y.kind || x.src.bytes != y.src.bytes || x.dst.bytes != y.dst.bytes || x.fence != y.fence ||
        (x.peer >= 0 ? (x.peer + r) % p : x.peer) != y.peer)
      return false;
    std::vector<std::uint32_t> da(a.deps.begin() + a.dep_begin[i], a.deps.begin() + a.dep_begin[i + 1]);
    std::vector<std::uint32_t> db(b.deps.begin() + b.dep_begin[i], b.deps.begin() + b.dep_begin[i + 1]);
    std::sort(da.begin(), da.end());
    std::sort(db.begin(), db.end());
    if (da != db) return false;
  }
  return true;
}

TEST(Symmetry, RotationSymmetricSchedulesAreRotationsOfRankZero) {
  int symmetric = 0, asymmetric_found = 0;
  for (Collective c : {Collective::allreduce, Collective::reduce_scatter, Collective::allgather, Collective::broadcast})
    for (Algorithm a : {Algorithm::ring, Algorithm::recursive_doubling, Algorithm::pipelined_chain})
      for (int p : {2, 3, 5, 8})
        for (std::uint64_t count : {std::uint64_t{40}, std::uint64_t{41}, std::uint64_t{4096}})
          for (bool in_place : {false, true})
            for (std::uint64_t seg : {std::uint64_t{0}, std::uint64_t{16}}) {
              if (!supports(c, a)) continue;
              CollectiveParams cp = params(c, a, p, count);
              cp.in_place = in_place;
              cp.segment_bytes = seg;
              const RankSchedule s0 = build_schedule(cp);
              bool all = true;
              for (int r = 1; r < p; ++r) {
                cp.rank = r;
                all = all && rotated(s0, build_schedule(cp), r, p);
              }
              cp.rank = 0;
              if (rotation_symmetric(cp)) {
                ++symmetric;
                EXPECT_TRUE(all) << name(c) << " " << name(a) << " p=" << p << " count=" << count
                                 << " in_place=" << in_place << " segment=" << seg;
              } else if (c == Collective::allreduce && a == Algorithm::ring && !all) {
                ++asymmetric_found;
              }
            }
  EXPECT_GT(symmetric, 50);
  EXPECT_GT(asymmetric_found, 0);
}

}  // namespace
}  // namespace inc::coll
