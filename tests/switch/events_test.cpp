// Numeric event counts through the switch (src/numerics/events.hpp, docs/NUMERICS.md "Overflow
// and saturation counts") on the seeded simulated network: each aggregating hop counts the
// elements whose add wrapped or overflowed, a parent adds its children's counts, and every
// member gets the whole tree's count with the result.
//
// Known counts whatever the order, tree and loss: on a marked element exactly two members
// hold a big value (the others 0), so exactly one add in the tree (where the two meet, or the
// root's narrowing under widen) overflows; on the other elements every partial sum fits.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "tests/switch/sim_util.hpp"

namespace inc::sw::testing {
namespace {

Topo make(const std::vector<std::uint16_t>& leaves, std::uint64_t seed, const SimFaults& f) {
  return one_or_two_levels(seed, f, leaves, 4, 16);
}

struct KindCase {
  const char* name;
  NumKind kind;
  std::size_t esz;       // bytes per element
  std::uint32_t big;     // bit pattern of the big value (two of them overflow)
  std::uint32_t small;   // a value small enough that members x it fits
};

const KindCase kKinds[] = {
    {"i8 narrow", NumKind::i8, 1, 100, 3},
    {"i8 widen", NumKind::i8_widen, 1, 100, 3},
    {"u8 narrow", NumKind::u8, 1, 200, 3},
    {"u8 widen", NumKind::u8_widen, 1, 200, 3},
    {"i32", NumKind::i32, 4, 0x60000000u, 7},
    {"f32", NumKind::f32, 4, 0x7f000000u /* 2^127 */, 0x3f800000u /* 1 */},
    {"f16 narrow", NumKind::f16, 2, 0x7800u /* 32768 */, 0x3c00u},
    {"f16 widen", NumKind::f16_widen, 2, 0x7800u, 0x3c00u},
    {"bf16 narrow", NumKind::bf16, 2, 0x7f7fu /* max */, 0x3f80u},
    {"bf16 widen", NumKind::bf16_widen, 2, 0x7f7fu, 0x3f80u},
};

const std::vector<std::vector<std::uint16_t>> kTrees = {{6}, {1, 5}, {3, 3}, {2, 1, 3}, {1, 1, 4}};

TEST(SwitchEvents, EachOverflowIsCountedOnceOnEveryTreeUnderLoss) {
  for (const KindCase& k : kKinds)
    for (const auto& tree : kTrees) {
      std::uint16_t n = 0;
      for (auto m : tree) n += m;
      const std::size_t count = 700;  // several chunks, the last one partial
      std::mt19937_64 rng(n * 13 + k.esz + tree.size());
      std::vector<std::vector<std::byte>> in(n, std::vector<std::byte>(count * k.esz));
      std::uint64_t marked = 0;
      auto put = [&](std::uint16_t m, std::size_t i, std::uint32_t v) {
        std::memcpy(in[m].data() + i * k.esz, &v, k.esz);  // little-endian low bytes
      };
      for (std::size_t i = 0; i < count; ++i) {
        if (rng() % 5 == 0) {
          const auto a = std::uint16_t(rng() % n);
          auto b = std::uint16_t(rng() % (n - 1));
          if (b >= a) ++b;
          put(a, i, k.big);
          put(b, i, k.big);
          ++marked;
        } else {
          for (std::uint16_t m = 0; m < n; ++m)
            if (rng() % 2) put(m, i, k.small);
        }
      }
      Topo t = make(tree, 5 + n + tree.size(), faults_for(0.05));
      std::vector<std::vector<std::byte>> out(n, std::vector<std::byte>(count * k.esz));
      for (std::uint16_t m = 0; m < n; ++m)
        t.c->start(m, WorkerOp::allreduce(k.kind, ReduceKind::sum, in[m], out[m], count, n));
      ASSERT_TRUE(t.c->run(100 * kSecond));
      ASSERT_GT(marked, 50u);
      for (std::uint16_t m = 0; m < n; ++m) {
        ASSERT_TRUE(t.c->worker(m).done()) << t.c->worker(m).error().message;
        EXPECT_EQ(t.c->worker(m).report().events, marked)
            << k.name << ", tree of " << tree.size() << " leaves, member " << m;
        EXPECT_EQ(out[m], out[0]);
      }
    }
}

// Min/max never overflow: no events, whatever the values.
TEST(SwitchEvents, MinMaxCountNothing) {
  const std::uint16_t n = 5;
  std::vector<std::vector<std::int32_t>> in(n, std::vector<std::int32_t>(300, 0x7fffffff));
  std::vector<std::vector<std::int32_t>> out(n, std::vector<std::int32_t>(300));
  Topo t = make({2, 3}, 3, faults_for(0.05));
  for (std::uint16_t m = 0; m < n; ++m)
    t.c->start(m, WorkerOp::allreduce(NumKind::i32, ReduceKind::max, cbytes(in[m]), wbytes(out[m]), 300, n));
  ASSERT_TRUE(t.c->run(100 * kSecond));
  for (std::uint16_t m = 0; m < n; ++m) EXPECT_EQ(t.c->worker(m).report().events, 0u);
}

}  // namespace
}  // namespace inc::sw::testing
