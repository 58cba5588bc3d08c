// `inc bench`'s check of collectives through a lossy Edge-INC wire handler (tools/bench_quant.*):
// the reference runs the schedules of every rank with the handler's rounding on each message.
// Without a handler it reproduces the exact expectation of the ordinary check; with a lossy
// one it differs from it (why the exact check said WRONG), and a result rounded at other points
// (another format, or the exact sum rounded once) is told apart from it (the check says WRONG).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "tools/bench_check.hpp"
#include "tools/bench_quant.hpp"

using namespace inc;
using namespace inc::tools;

namespace {

struct Case {
  coll::CollectiveParams p;
  std::vector<std::vector<std::byte>> inputs;
  BenchPattern pat;
};

Case make(Collective c, coll::Algorithm a, int n, std::uint64_t count) {
  coll::CollectiveParams p;
  p.coll = c;
  p.algo = a;
  p.nranks = n;
  p.count = count;
  p.dtype = DataType::f32;
  p.op = ReduceOp::sum;
  Case x{p, {}, BenchPattern(c, DataType::f32, ReduceOp::sum, n, 77)};
  for (int r = 0; r < n; ++r) {
    p.rank = r;
    x.inputs.emplace_back(coll::input_bytes(p));
    x.pat.fill(r, x.inputs.back().data(), 0, coll::input_bytes(p) / 4);
  }
  return x;
}

std::uint64_t differing(const std::vector<std::byte>& a, const std::vector<std::byte>& b) {
  std::uint64_t d = 0;
  for (std::size_t i = 0; i < a.size(); i += 4) d += std::memcmp(a.data() + i, b.data() + i, 4) != 0;
  return d;
}

}  // namespace

TEST(BenchQuant, WithoutAHandlerTheReferenceIsTheExactExpectation) {
  const std::pair<Collective, coll::Algorithm> cases[] = {
      {Collective::allreduce, coll::Algorithm::ring},     {Collective::allreduce, coll::Algorithm::recursive_doubling},
      {Collective::allreduce, coll::Algorithm::rabenseifner}, {Collective::reduce_scatter, coll::Algorithm::ring},
      {Collective::allgather, coll::Algorithm::ring},     {Collective::broadcast, coll::Algorithm::binomial_tree},
      {Collective::alltoall, coll::Algorithm::pairwise}};
  for (auto [c, a] : cases)
    for (int n : {2, 3, 4}) {
      Case x = make(c, a, n, 1000);
      for (int r = 0; r < n; ++r) {
        std::vector<std::byte> got;
        ASSERT_EQ(quantised_reference(x.p, "", x.inputs, r, got), "");
        EXPECT_EQ(x.pat.count_wrong(r, 1000, 0, got.data()), 0u) << name(c) << " " << coll::name(a) << " n=" << n << " rank " << r;
      }
    }
}

TEST(BenchQuant, ALossyHandlersRoundingIsToldApartFromOthers) {
  Case x = make(Collective::allreduce, coll::Algorithm::ring, 4, 4096);
  for (int r = 0; r < 4; ++r) {
    std::vector<std::byte> mxfp8, mxint8, e4m3;
    ASSERT_EQ(quantised_reference(x.p, "mxfp8", x.inputs, r, mxfp8), "");
    ASSERT_EQ(quantised_reference(x.p, "mxint8", x.inputs, r, mxint8), "");
    ASSERT_EQ(quantised_reference(x.p, "e4m3", x.inputs, r, e4m3), "");
    // The exact check would call a correct mxfp8 run WRONG: the rounding shows.
    EXPECT_GT(x.pat.count_wrong(r, 4096, 0, mxfp8.data()), 1000u) << r;
    // Another format's result, and the exact sum rounded once at the end, are not mxfp8's.
    EXPECT_GT(differing(mxfp8, mxint8), 1000u) << r;
    EXPECT_GT(differing(mxfp8, e4m3), 1000u) << r;
    std::vector<std::byte> once;
    ASSERT_EQ(quantised_reference(x.p, "", x.inputs, r, once), "");
    ASSERT_TRUE(quantise_message("mxfp8", DataType::f32, once.data(), once.size()));
    EXPECT_GT(differing(mxfp8, once), 100u) << r;
  }
  // The engine's rules: integers are never converted, bf16/f16 only f32.
  EXPECT_FALSE(handler_converts("mxfp8", DataType::i32));
  EXPECT_FALSE(handler_converts("bf16", DataType::f16));
  EXPECT_TRUE(handler_converts("int8", DataType::bf16));
  EXPECT_FALSE(quantise_message("nosuch", DataType::f32, nullptr, 0));
}
