// Wide accumulators on the hosts (src/coll/widened.cpp) through the local executor, the
// schedules' oracle: under `wide` and `widen` every rank's result is, bit for bit, the f32
// algorithm's sum of the widened inputs rounded once (the reference decoders and encoders of
// tests/numerics: ldexp values, nearest-even by search; MX: numerics::mx_encode, itself tested
// against a brute-force OCP encoder), for every host algorithm, rank counts with and without a
// fold, in place or not, segmented or not, eager and rendezvous sends; `narrow` is not; the
// bytes each policy puts on the wire; which policy the hosts run (host_accumulate).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "coll/local_executor.hpp"
#include "wide_reference.hpp"

namespace inc::coll {
namespace {

using namespace inc::testing::wide;

struct Case {
  Collective coll;
  Algorithm algo;
};
constexpr Case kCases[] = {{Collective::allreduce, Algorithm::ring},
                           {Collective::allreduce, Algorithm::recursive_doubling},
                           {Collective::allreduce, Algorithm::rabenseifner},
                           {Collective::reduce_scatter, Algorithm::ring}};

TEST(WideHosts, WideAndWidenAreTheF32AlgorithmRoundedOnceOnEveryRank) {
  std::mt19937_64 rng(9);
  int runs = 0, narrow_differs = 0;
  for (DataType t : {DataType::f16, DataType::bf16, DataType::e4m3, DataType::e5m2, DataType::mxfp8_e4m3, DataType::mxint8})
    for (const Case& c : kCases)
      for (int P : {2, 3, 4, 5, 8})
        for (std::uint64_t count : {std::uint64_t{3}, std::uint64_t{37}})
          for (int variant = 0; variant < 3; ++variant) {
            CollectiveParams p;
            p.coll = c.coll;
            p.algo = c.algo;
            p.nranks = P;
            p.count = count;
            p.dtype = t;
            p.op = variant == 2 ? ReduceOp::avg : ReduceOp::sum;
            p.in_place = variant == 1;
            p.segment_bytes = variant == 2 ? 4 * size_of(t) : 0;  // several messages per transfer
            const std::uint64_t units = c.coll == Collective::reduce_scatter ? count * static_cast<std::uint64_t>(P) : count;
            std::vector<std::vector<std::byte>> in;
            for (int r = 0; r < P; ++r) in.push_back(random_input(t, units, rng));
            const auto want = reference(p, in);
            std::vector<std::byte> narrow0;
            for (Accumulate acc : {Accumulate::narrow, Accumulate::widen, Accumulate::wide}) {
              p.accumulate = acc;
              const std::string what = std::string(name(t)) + " " + std::string(name(c.coll)) + " " +
                                       std::string(name(c.algo)) + " P=" + std::to_string(P) + " count=" +
                                       std::to_string(count) + " variant " + std::to_string(variant) + " " +
                                       std::string(name(acc));
              LocalRunOptions o;
              o.seed = static_cast<std::uint64_t>(runs) + 1;
              o.rendezvous = runs % 2 == 1;
              o.ordered_channels = runs % 3 == 0;
              auto bufs = make_buffers(p, in);
              ASSERT_NO_THROW(run_local(p, build_schedules(p), bufs, o)) << what;
              ++runs;
              for (int r = 0; r < P; ++r) {
                const auto got = result_of(p, bufs[static_cast<std::size_t>(r)], r);
                if (acc == Accumulate::narrow) {
                  if (r == 0) narrow0 = got;
                  continue;
                }
                ASSERT_EQ(got, want[static_cast<std::size_t>(r)]) << what << " rank " << r;
              }
              if (acc == Accumulate::narrow && narrow0 != want[0]) ++narrow_differs;
            }
          }
  // The inputs are lossy: rounding at every step (narrow) must give other bits somewhere, or
  // this test could not tell the policies apart.
  EXPECT_GT(narrow_differs, runs / 6) << runs;
}

// Bytes on the wire per policy (every rank's messages, run_local's count), 4 ranks: the first
// step in the call's type, f32 partials, the allgather in the call's type (widen); f32
// throughout (wide); the call's type throughout (narrow).
TEST(WideHosts, BytesOnTheWirePerPolicy) {
  for (DataType t : {DataType::bf16, DataType::mxfp8_e4m3}) {
    const std::uint64_t U = size_of(t), W = 4 * elements_per_unit(t), P = 4, n = 64;  // units
    struct Want {
      Algorithm algo;
      std::uint64_t narrow, widen, wide;  // bytes over all ranks
    };
    const Want wants[] = {
        // ring: 2(P-1) chunk transfers of n/P units per rank; widen: 1 + (P-1) narrow, P-2 f32
        {Algorithm::ring, P * 2 * (P - 1) * (n / P) * U, P * ((n / P) * U + (P - 2) * (n / P) * W + (P - 1) * (n / P) * U),
         P * 2 * (P - 1) * (n / P) * W},
        // recursive doubling: log2 P whole-vector exchanges; widen: the first narrow
        {Algorithm::recursive_doubling, P * 2 * n * U, P * (n * U + n * W), P * 2 * n * W},
        // Rabenseifner: halves n/2, n/4, then n/4, n/2; widen: the first half narrow, the
        // quarter f32, the allgather narrow
        {Algorithm::rabenseifner, P * (3 * n / 2) * U, P * ((n / 2) * U + (n / 4) * W + (3 * n / 4) * U),
         P * (3 * n / 2) * W},
    };
    for (const Want& w : wants) {
      for (Accumulate acc : {Accumulate::narrow, Accumulate::widen, Accumulate::wide}) {
        CollectiveParams p;
        p.algo = w.algo;
        p.nranks = static_cast<int>(P);
        p.count = n;
        p.dtype = t;
        p.accumulate = acc;
        std::mt19937_64 rng(1);
        std::vector<std::vector<std::byte>> in;
        for (std::uint64_t r = 0; r < P; ++r) in.push_back(random_input(t, n, rng));
        auto bufs = make_buffers(p, in);
        const auto res = run_local(p, build_schedules(p), bufs);
        const std::uint64_t want = acc == Accumulate::narrow ? w.narrow : acc == Accumulate::widen ? w.widen : w.wide;
        EXPECT_EQ(res.message_bytes, want) << name(t) << " " << name(w.algo) << " " << name(acc);
        std::uint64_t counted = 0;  // the schedules' own counts (what `inc sim` and the model read)
        for (const auto& s : build_schedules(p)) counted += summarize(s).send_bytes;
        EXPECT_EQ(counted, want) << name(t) << " " << name(w.algo) << " " << name(acc);
      }
    }
  }
}

TEST(WideHosts, WhichPolicyTheHostsRun) {
  CollectiveParams p;
  p.nranks = 4;
  p.count = 8;
  p.dtype = DataType::bf16;
  p.algo = Algorithm::ring;
  auto with = [&](auto&& change) {
    CollectiveParams q = p;
    change(q);
    return host_accumulate(q);
  };
  EXPECT_EQ(with([](auto& q) { q.accumulate = Accumulate::automatic; }), Accumulate::narrow);  // today's bits
  EXPECT_EQ(with([](auto& q) { q.accumulate = Accumulate::narrow; }), Accumulate::narrow);
  EXPECT_EQ(with([](auto& q) { q.accumulate = Accumulate::widen; }), Accumulate::widen);
  EXPECT_EQ(with([](auto& q) { q.accumulate = Accumulate::fixed; }), Accumulate::widen);  // as the switch
  EXPECT_EQ(with([](auto& q) { q.accumulate = Accumulate::wide; }), Accumulate::wide);
  EXPECT_EQ(with([](auto& q) { q.accumulate = Accumulate::reproducible; }), Accumulate::reproducible);
  EXPECT_EQ(with([](auto& q) { q.accumulate = Accumulate::wide; q.op = ReduceOp::max; }), Accumulate::narrow);  // exact anyway
  EXPECT_EQ(with([](auto& q) { q.accumulate = Accumulate::wide; q.dtype = DataType::i8; }), Accumulate::narrow);  // wraps: same bits
  EXPECT_EQ(with([](auto& q) { q.accumulate = Accumulate::wide; q.dtype = DataType::f32; }), Accumulate::narrow);
  EXPECT_EQ(with([](auto& q) { q.accumulate = Accumulate::wide; q.algo = Algorithm::inc; }), Accumulate::narrow);  // the switch's
  EXPECT_EQ(with([](auto& q) { q.accumulate = Accumulate::wide; q.coll = Collective::allgather; }), Accumulate::narrow);
  EXPECT_EQ(with([](auto& q) { q.accumulate = Accumulate::wide; q.dtype = DataType::mxfp4; }), Accumulate::wide);
}

// The local executor counts the hosts' overflow events as coll::Engine does (`inc numerics
// sweep`'s host table): an f16 sum of 40000 on each of 3 ranks overflows once per element under
// narrow (at its first add) and widen (where its owner rounds the f32 total; recursive doubling:
// on both ranks that hold it), and on every rank under wide (each rounds the same f32 total); a
// sum that fits has none.
TEST(WideHosts, TheLocalExecutorCountsTheHostsOverflowEvents) {
  for (Algorithm algo : {Algorithm::ring, Algorithm::recursive_doubling, Algorithm::rabenseifner}) {
    CollectiveParams p;
    p.algo = algo;
    p.dtype = DataType::f16;
    p.nranks = 3;
    p.count = 300;
    for (double v : {40000.0, 1.0})
      for (Accumulate a : {Accumulate::narrow, Accumulate::widen, Accumulate::wide}) {
        p.accumulate = a;
        std::vector<std::vector<std::byte>> in(3, round_all(DataType::f16, std::vector<double>(300, v)));
        auto bufs = make_buffers(p, in);
        const auto res = run_local(p, build_schedules(p), bufs);
        // (widen, recursive doubling: rank 0 folds into rank 1, then ranks 1 and 2 each round the total)
        const std::uint64_t want = v == 1.0                   ? 0
                                   : a == Accumulate::wide    ? 900
                                   : a == Accumulate::widen && algo == Algorithm::recursive_doubling ? 600
                                                                                                     : 300;
        EXPECT_EQ(res.overflow_events, want) << name(algo) << " " << name(a) << " " << v;
      }
  }
}

}  // namespace
}  // namespace inc::coll
