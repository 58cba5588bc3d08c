// Reproducible sums (Accumulate::reproducible, src/numerics/repro.hpp, src/coll/reproducible.cpp):
// the same inputs reduced 1,000 times per type -- through the seeded simulated switch network
// with random arrival orders, loss and tree shapes, and through every host algorithm in the
// in-memory executor (the schedules' oracle) with random interleavings, segment sizes and
// rank placements -- give exactly one distinct result, equal to the correctly rounded exact
// sum (computed here in long double and rounded once, independently of src/numerics); plain
// f32 in the switch gives several.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "coll/local_executor.hpp"
#include "numerics/repro.hpp"
#include "tests/numerics/h16_reference.hpp"
#include "tests/switch/sim_util.hpp"

namespace inc::sw::testing {
namespace {

namespace rp = numerics::repro;
using Bytes = std::vector<std::byte>;
namespace h16 = inc::testing::h16;

// Results as strings for std::set (a set of byte vectors trips GCC 12's -Wstringop-overread).
std::string key(const Bytes& b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

double value(DataType t, const Bytes& v, std::size_t i) {
  if (t == DataType::f32) {
    float x;
    std::memcpy(&x, v.data() + 4 * i, 4);
    return x;
  }
  std::uint16_t b;
  std::memcpy(&b, v.data() + 2 * i, 2);
  return h16::decode(b, t == DataType::f16 ? h16::kF16 : h16::kBF16);
}

// Random values with magnitudes in [2^lo, 2^hi), all representable in t.
Bytes inputs(std::mt19937_64& rng, DataType t, std::size_t n, int lo, int hi) {
  std::uniform_int_distribution<int> ex(lo, hi - 1), sgn(0, 1);
  std::uniform_int_distribution<std::uint32_t> mant(0, (1u << 23) - 1);
  Bytes v(n * size_of(t));
  for (std::size_t i = 0; i < n; ++i) {
    const auto bits = std::uint32_t(sgn(rng)) << 31 | std::uint32_t(ex(rng) + 127) << 23 | mant(rng);
    float x;
    std::memcpy(&x, &bits, 4);
    if (t == DataType::f32) {
      std::memcpy(v.data() + 4 * i, &x, 4);
    } else {  // keep only the type's bits (exact: truncating the f32 mantissa)
      const int m = t == DataType::f16 ? 10 : 7;
      const double y = std::ldexp(std::trunc(std::ldexp(double(x), m - std::ilogb(x))), std::ilogb(x) - m);
      const std::uint16_t b = h16::round_once(y, t == DataType::f16 ? h16::kF16 : h16::kBF16);
      std::memcpy(v.data() + 2 * i, &b, 2);
    }
  }
  return v;
}

// The exact sum (long double holds it: at most 8 inputs within 30 binades) rounded once.
Bytes reference(DataType t, const std::vector<Bytes>& in, std::size_t count) {
  Bytes out(count * size_of(t));
  for (std::size_t i = 0; i < count; ++i) {
    long double s = 0;
    for (const auto& v : in) s += value(t, v, i);
    if (t == DataType::f32) {
      const float x = static_cast<float>(s);  // one rounding, to nearest even
      std::memcpy(out.data() + 4 * i, &x, 4);
    } else {
      const std::uint16_t b = h16::round_once(double(s), t == DataType::f16 ? h16::kF16 : h16::kBF16);
      EXPECT_EQ(static_cast<long double>(double(s)), s) << "test inputs too wide for the reference";
      std::memcpy(out.data() + 2 * i, &b, 2);
    }
  }
  return out;
}

// One reproducible allreduce through the simulated switch tree: the same steps the engine
// runs (scan, i32 max, encode, i32 sum, decode), the network ops on the seeded simulator.
std::vector<Bytes> via_switch(Topo& t, DataType dt, const std::vector<Bytes>& in, std::size_t count,
                              std::vector<rp::BlockStats>* stats = nullptr) {
  const auto n = std::uint16_t(in.size());
  const std::size_t nb = rp::blocks(count);
  std::vector<std::vector<std::int32_t>> loc(n, std::vector<std::int32_t>(2 * nb, rp::kZero)), exps = loc;
  for (std::uint16_t r = 0; r < n; ++r) {
    rp::scan(dt, in[r].data(), count, 0, loc[r].data());
    t.c->start(r, WorkerOp::allreduce(NumKind::i32, ReduceKind::max, cbytes(loc[r]), wbytes(exps[r]), 2 * nb, n));
  }
  EXPECT_TRUE(t.c->run(100 * kSecond));
  std::vector<std::vector<std::int32_t>> limbs(n, std::vector<std::int32_t>(2 * count)), sums = limbs;
  for (std::uint16_t r = 0; r < n; ++r) {
    EXPECT_TRUE(t.c->worker(r).done()) << t.c->worker(r).error().message;
    rp::encode(dt, in[r].data(), count, 0, exps[r].data(), n, limbs[r].data());
    t.c->start(r, WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(limbs[r]), wbytes(sums[r]), 2 * count, n));
  }
  EXPECT_TRUE(t.c->run(100 * kSecond));
  std::vector<Bytes> out(n, Bytes(count * size_of(dt)));
  for (std::uint16_t r = 0; r < n; ++r) {
    EXPECT_TRUE(t.c->worker(r).done()) << t.c->worker(r).error().message;
    rp::decode(dt, sums[r].data(), count, 0, exps[r].data(), n, out[r].data());
    if (stats) stats->push_back(rp::block_stats(exps[r].data(), nb, n));
  }
  return out;
}

Topo random_tree(std::mt19937_64& rng, std::uint16_t n, std::uint64_t seed, double loss) {
  // A single switch, or 2 to 4 leaves with a random split of the members (a leaf of one
  // member included), with random slot sizes.
  std::uniform_int_distribution<int> leaves(1, 4), slot(0, 3);
  const std::uint32_t slot_elems = 32u << slot(rng);
  const int L = leaves(rng);
  if (L == 1) return flat(seed, faults_for(loss), n, 4, slot_elems);
  std::vector<std::uint16_t> per(L, 1);
  for (int k = L; k < n; ++k) ++per[std::uniform_int_distribution<int>(0, L - 1)(rng)];
  return two_level(seed, faults_for(loss), per, 4, slot_elems);
}

// One reproducible collective through the in-memory executor: `algo`, a random interleaving
// (seed), rendezvous or eager sends, a random segment size, in place or not.
std::vector<Bytes> via_hosts(std::mt19937_64& rng, DataType dt, Collective coll, coll::Algorithm algo,
                             const std::vector<Bytes>& in, std::size_t count, std::uint64_t seed) {
  coll::CollectiveParams p;
  p.coll = coll;
  p.algo = algo;
  p.nranks = int(in.size());
  p.count = coll == Collective::reduce_scatter ? count / in.size() : count;
  p.dtype = dt;
  p.op = ReduceOp::sum;
  p.accumulate = Accumulate::reproducible;
  p.in_place = rng() % 2 == 0;
  const std::uint64_t segs[] = {0, 256, 4096};
  p.segment_bytes = segs[rng() % 3];
  auto scheds = coll::build_schedules(p);
  std::vector<coll::LocalBuffers> bufs(in.size());
  for (std::size_t r = 0; r < in.size(); ++r) {
    if (p.in_place) bufs[r].output = in[r];
    else bufs[r] = {in[r], Bytes(coll::output_bytes(p), std::byte{0x5a})};
  }
  coll::LocalRunOptions o;
  o.seed = seed;
  o.rendezvous = rng() % 2 == 0;
  o.ordered_channels = rng() % 2 == 0;
  coll::run_local(p, scheds, bufs, o);
  std::vector<Bytes> out;
  for (std::size_t r = 0; r < in.size(); ++r) {
    p.rank = int(r);  // (in place, the result is this rank's shard)
    const coll::Region res = coll::result_region(p);
    out.emplace_back(bufs[r].output.begin() + std::ptrdiff_t(res.offset),
                     bufs[r].output.begin() + std::ptrdiff_t(res.offset + res.bytes));
  }
  return out;
}

constexpr coll::Algorithm kHostAlgos[] = {coll::Algorithm::ring, coll::Algorithm::recursive_doubling,
                                          coll::Algorithm::rabenseifner, coll::Algorithm::inc};

class Repro : public ::testing::TestWithParam<DataType> {};

TEST_P(Repro, OneResultOverAThousandOrdersTreesAlgorithmsAndPlacements) {
  const DataType dt = GetParam();
  const std::uint16_t n = 6;
  const std::size_t count = 600;  // three blocks of 256, the last partial
  std::mt19937_64 rng(2024 + int(dt));
  // f32 values over 30 binades (2^-15 .. 2^15): f32 sums in the switch round differently by
  // order; within the 62 - 2*3 = 56-bit window every value is exact.
  const int lo = dt == DataType::f16 ? -14 : -15, hi = dt == DataType::f16 ? 12 : 15;
  std::vector<Bytes> in;
  for (std::uint16_t r = 0; r < n; ++r) in.push_back(inputs(rng, dt, count, lo, hi));
  const Bytes want = reference(dt, in, count);

  std::set<std::string> distinct;
  int runs = 0;
  for (int k = 0; k < 160; ++k, ++runs) {  // switch trees x arrival orders (x loss)
    Topo t = random_tree(rng, n, 1000 + k, k % 2 ? 0.05 : 0.0);
    std::vector<rp::BlockStats> stats;
    for (const Bytes& b : via_switch(t, dt, in, count, &stats)) distinct.insert(key(b));
    for (const auto& s : stats) ASSERT_EQ(s.inexact + s.nonfinite, 0u);
  }
  for (int k = 0; runs < 1000; ++k, ++runs) {  // host algorithms x interleavings x placements
    std::vector<Bytes> placed = in;
    std::shuffle(placed.begin(), placed.end(), rng);  // which rank holds which input
    for (const Bytes& b : via_hosts(rng, dt, Collective::allreduce, kHostAlgos[k % 4], placed, count, 77 + k))
      distinct.insert(key(b));
  }
  ASSERT_EQ(distinct.size(), 1u) << runs << " runs";
  EXPECT_EQ(*distinct.begin(), key(want)) << "not the correctly rounded exact sum";

  // Reduce_scatter (ring, and the switch's shard-by-shard schedule): each rank's shard of it.
  for (coll::Algorithm a : {coll::Algorithm::ring, coll::Algorithm::inc}) {
    auto shards = via_hosts(rng, dt, Collective::reduce_scatter, a, in, count, 5);
    const std::size_t bytes = count / n * size_of(dt);
    for (std::uint16_t r = 0; r < n; ++r)
      for (std::size_t i = 0; i < count / n; ++i)
        ASSERT_EQ(value(dt, shards[r], i), value(dt, want, r * (count / n) + i))
            << "reduce_scatter " << coll::name(a) << " rank " << r << " element " << i << " bytes " << bytes;
  }
}

INSTANTIATE_TEST_SUITE_P(Types, Repro, ::testing::Values(DataType::f32, DataType::bf16, DataType::f16),
                         [](const auto& i) { return std::string(name(i.param)); });

// The problem the mode solves: plain f32 adds in the switch give several results for the same
// inputs over random trees and arrival orders, and the host algorithms differ from each other.
TEST(ReproProblem, PlainF32GivesSeveralResults) {
  const std::uint16_t n = 6;
  const std::size_t count = 600;
  std::mt19937_64 rng(99);
  std::vector<std::vector<float>> in(n, std::vector<float>(count));
  for (auto& v : in) {
    const Bytes b = inputs(rng, DataType::f32, count, -15, 15);
    std::memcpy(v.data(), b.data(), b.size());
  }
  std::set<std::vector<float>> switch_results;
  for (int k = 0; k < 40; ++k) {
    Topo t = random_tree(rng, n, 500 + k, 0.05);
    std::vector<std::vector<float>> out(n, std::vector<float>(count));
    for (std::uint16_t r = 0; r < n; ++r)
      t.c->start(r, WorkerOp::allreduce(NumKind::f32, ReduceKind::sum, cbytes(in[r]), wbytes(out[r]), count, n));
    ASSERT_TRUE(t.c->run(100 * kSecond));
    switch_results.insert(out[0]);
  }
  EXPECT_GT(switch_results.size(), 1u);
  std::set<std::string> host_results;
  std::vector<Bytes> bin;
  for (auto& v : in) bin.emplace_back(reinterpret_cast<const std::byte*>(v.data()),
                                      reinterpret_cast<const std::byte*>(v.data() + count));
  for (coll::Algorithm a : kHostAlgos) {
    coll::CollectiveParams p;
    p.algo = a;
    p.nranks = n;
    p.count = count;
    p.dtype = DataType::f32;
    auto scheds = coll::build_schedules(p);
    std::vector<coll::LocalBuffers> bufs;
    for (auto& b : bin) bufs.push_back({b, Bytes(b.size())});
    coll::run_local(p, scheds, bufs);
    host_results.insert(key(bufs[0].output));
  }
  EXPECT_GT(host_results.size(), 1u);
}

// What the window cannot hold is counted, and still gives the same bits on every path.
TEST(ReproLimits, InexactAndNonFiniteBlocksAreCountedAndReproducible) {
  const std::uint16_t n = 4;
  const std::size_t count = 600;
  std::mt19937_64 rng(5);
  std::vector<Bytes> in;
  for (std::uint16_t r = 0; r < n; ++r) in.push_back(inputs(rng, DataType::f32, count, -4, 4));
  const float tiny = std::ldexp(1.0f, -100), nan = NAN;
  std::memcpy(in[1].data() + 4 * 3, &tiny, 4);   // block 0 spans 2^4 .. 2^-100: beyond the window
  std::memcpy(in[2].data() + 4 * 300, &nan, 4);  // block 1 holds a NaN
  std::set<std::string> distinct;
  for (int k = 0; k < 8; ++k) {
    Topo t = random_tree(rng, n, 40 + k, 0.05);
    std::vector<rp::BlockStats> stats;
    for (const Bytes& b : via_switch(t, DataType::f32, in, count, &stats)) distinct.insert(key(b));
    for (const auto& s : stats) {
      EXPECT_EQ(s.inexact, 1u);
      EXPECT_EQ(s.nonfinite, 1u);
    }
    for (const Bytes& b : via_hosts(rng, DataType::f32, Collective::allreduce, kHostAlgos[k % 4], in, count, k))
      distinct.insert(key(b));
  }
  ASSERT_EQ(distinct.size(), 1u);
  const Bytes out(reinterpret_cast<const std::byte*>(distinct.begin()->data()),
                  reinterpret_cast<const std::byte*>(distinct.begin()->data() + distinct.begin()->size()));
  for (std::size_t i = 256; i < 512; ++i) EXPECT_TRUE(std::isnan(value(DataType::f32, out, i))) << i;
  // Block 2 is untouched by either: exact.
  const Bytes want = reference(DataType::f32, in, count);
  EXPECT_TRUE(std::equal(out.begin() + 512 * 4, out.end(), want.begin() + 512 * 4));
}

// Encode/decode at the edges, against one rounding of the exact sum: ties to even, subnormals,
// overflow to infinity, zero blocks, the whole f16 range in one block (always exact).
TEST(ReproLimits, EdgeCasesRoundOnce) {
  // Element j of each rank's list goes to block j (the others are zeros), so that each case
  // has its own shared exponent.
  auto run = [](DataType dt, const std::vector<std::vector<double>>& lists, int nranks) {
    const std::size_t count = lists[0].size() * rp::kBlock;
    std::vector<std::vector<double>> vals;
    for (const auto& l : lists) {
      vals.emplace_back(count, 0.0);
      for (std::size_t j = 0; j < l.size(); ++j) vals.back()[j * rp::kBlock] = l[j];
    }
    std::vector<Bytes> in;
    for (const auto& v : vals) {
      Bytes b(count * size_of(dt));
      for (std::size_t i = 0; i < count; ++i) {
        if (dt == DataType::f32) {
          const float x = float(v[i]);
          EXPECT_EQ(double(x), v[i]);
          std::memcpy(b.data() + 4 * i, &x, 4);
        } else {
          const std::uint16_t h = h16::round_once(v[i], dt == DataType::f16 ? h16::kF16 : h16::kBF16);
          std::memcpy(b.data() + 2 * i, &h, 2);
        }
      }
      in.push_back(b);
    }
    std::vector<std::int32_t> exps(2 * rp::blocks(count), rp::kZero), part = exps;
    for (const auto& b : in) {
      std::fill(part.begin(), part.end(), rp::kZero);
      rp::scan(dt, b.data(), count, 0, part.data());
      for (std::size_t k = 0; k < exps.size(); ++k) exps[k] = std::max(exps[k], part[k]);
    }
    std::vector<std::int32_t> sum(2 * count, 0), limbs(2 * count);
    for (const auto& b : in) {
      rp::encode(dt, b.data(), count, 0, exps.data(), nranks, limbs.data());
      for (std::size_t k = 0; k < sum.size(); ++k)
        sum[k] = std::int32_t(std::uint32_t(sum[k]) + std::uint32_t(limbs[k]));
    }
    Bytes out(count * size_of(dt));
    rp::decode(dt, sum.data(), count, 0, exps.data(), nranks, out.data());
    return std::make_pair(out, reference(dt, in, count));
  };
  const double u = std::ldexp(1.0, -24);
  // f32, sums of two: ties to even down (1 + 2^-24) and up (1 + 3 x 2^-24), the subnormal
  // range, overflow to infinity, a zero block.
  {
    const double mx = std::ldexp(double((1 << 24) - 1), 104);  // FLT_MAX
    auto [got, want] = run(DataType::f32,
                           {{1.0, 1.0, std::ldexp(1.0, -149), std::ldexp(3.0, -149), mx, 0.0},
                            {u, 3 * u, std::ldexp(1.0, -149), -std::ldexp(1.0, -148), mx, 0.0}},
                           2);
    EXPECT_EQ(got, want);
    EXPECT_TRUE(std::isinf(value(DataType::f32, got, 4 * rp::kBlock)));
    EXPECT_EQ(value(DataType::f32, got, 0), 1.0);
    EXPECT_EQ(value(DataType::f32, got, rp::kBlock), 1.0 + std::ldexp(1.0, -22));
    EXPECT_FALSE(std::signbit(value(DataType::f32, got, 5 * rp::kBlock)));
  }
  // f16: the largest and the smallest subnormal in one block: always exact.
  {
    auto [got, want] = run(DataType::f16, {{65504.0, std::ldexp(1.0, -24)}, {std::ldexp(1.0, -24), -65504.0},
                                           {-std::ldexp(1.0, -24), std::ldexp(1.0, -23)}}, 3);
    EXPECT_EQ(got, want);
  }
  // bf16 ties: 1 + 2^-8 is halfway between 1 and 1 + 2^-7.
  {
    auto [got, want] = run(DataType::bf16, {{1.0, 1.0}, {std::ldexp(1.0, -8), std::ldexp(3.0, -8)}}, 2);
    EXPECT_EQ(got, want);
  }
}

}  // namespace
}  // namespace inc::sw::testing
