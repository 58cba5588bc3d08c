// Jobs of more than 64 members on one switch (issue 8): the data plane keeps members 64.. of
// every copy's sets in words sized at admission (docs/SWITCH.md "Member sets"). The real
// switch and worker code on the seeded simulated network, exact results asserted.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tests/switch/sim_util.hpp"

namespace inc::sw {
namespace {

using namespace inc::sw::testing;

struct WideCase {
  std::vector<std::uint16_t> leaves;  // one entry: one switch
  double loss;
};

class Wide : public ::testing::TestWithParam<WideCase> {};

std::string name_of(const ::testing::TestParamInfo<WideCase>& i) {
  std::string s = "members";
  for (std::size_t k = 0; k < i.param.leaves.size(); ++k) {
    if (k) s.push_back('_');
    s.append(std::to_string(i.param.leaves[k]));
  }
  s.append("_loss").append(std::to_string(int(i.param.loss * 100)));
  return s;
}

// An i32 allreduce (every member wants the result), then a reduce_scatter (each chunk is
// wanted by one member only: results go out elided to the others) and an allgather; every
// member's output exact, on one switch with 100 or 256 members or a tree whose leaf has 100.
TEST_P(Wide, CollectivesAreExact) {
  const auto& p = GetParam();
  std::uint16_t n = 0;
  for (auto m : p.leaves) n = std::uint16_t(n + m);
  for (std::uint64_t seed = 1; seed <= 2; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Topo t = one_or_two_levels(seed, faults_for(p.loss), p.leaves, 4, 16);
    std::mt19937_64 rng(seed);
    auto run = [&](const char* what) {
      ASSERT_TRUE(t.c->run(1000 * kSecond)) << what;
      for (std::uint16_t r = 0; r < n; ++r)
        ASSERT_TRUE(t.c->worker(r).done()) << what << " rank " << r << ": " << t.c->worker(r).error().message;
    };
    const std::uint64_t count = 70;  // 5 chunks of 16
    {
      std::vector<std::vector<std::int32_t>> in(n, std::vector<std::int32_t>(count));
      std::vector<std::uint32_t> exp(count, 0);
      for (auto& v : in)
        for (std::uint64_t i = 0; i < count; ++i) {
          v[i] = std::int32_t(rng());
          exp[i] += std::uint32_t(v[i]);
        }
      std::vector<std::vector<std::int32_t>> out(n, std::vector<std::int32_t>(count, -1));
      for (std::uint16_t r = 0; r < n; ++r)
        t.c->start(r, WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(in[r]), wbytes(out[r]), count, n));
      run("allreduce");
      for (std::uint16_t r = 0; r < n; ++r)
        for (std::uint64_t i = 0; i < count; ++i) ASSERT_EQ(std::uint32_t(out[r][i]), exp[i]) << "rank " << r;
    }
    {
      const std::uint64_t shard = 3;
      std::vector<std::vector<std::int32_t>> in(n, std::vector<std::int32_t>(shard * n));
      std::vector<std::int64_t> exp(shard * n, 0);
      for (auto& v : in)
        for (std::uint64_t i = 0; i < v.size(); ++i) {
          v[i] = std::int32_t(rng() % 20001) - 10000;
          exp[i] += v[i];
        }
      std::vector<std::vector<std::int32_t>> out(n, std::vector<std::int32_t>(shard, -1));
      for (std::uint16_t r = 0; r < n; ++r)
        t.c->start(r, WorkerOp::reduce_scatter(NumKind::i32, ReduceKind::sum, cbytes(in[r]), wbytes(out[r]), shard, n, r));
      run("reduce_scatter");
      for (std::uint16_t r = 0; r < n; ++r)
        for (std::uint64_t i = 0; i < shard; ++i) ASSERT_EQ(out[r][i], exp[r * shard + i]) << "rank " << r;
    }
    {
      const std::uint64_t bytes = 5;
      std::vector<std::vector<std::uint8_t>> in(n, std::vector<std::uint8_t>(bytes));
      for (auto& v : in)
        for (auto& b : v) b = std::uint8_t(rng());
      std::vector<std::vector<std::uint8_t>> out(n, std::vector<std::uint8_t>(bytes * n));
      for (std::uint16_t r = 0; r < n; ++r)
        t.c->start(r, WorkerOp::allgather(cbytes(in[r]), wbytes(out[r]), bytes, n, r));
      run("allgather");
      for (std::uint16_t r = 0; r < n; ++r)
        for (std::uint16_t q = 0; q < n; ++q)
          ASSERT_EQ(std::vector<std::uint8_t>(out[r].begin() + q * bytes, out[r].begin() + (q + 1) * bytes), in[q])
              << "rank " << r << " block " << q;
    }
    const auto s = t.c->sw(0).snapshot();
    EXPECT_EQ(s.jobs.at(0).spec.members, p.leaves.size() == 1 ? n : p.leaves.size());
  }
}

INSTANTIATE_TEST_SUITE_P(Members, Wide,
                         ::testing::Values(WideCase{{100}, 0.0}, WideCase{{100}, 0.05}, WideCase{{256}, 0.0},
                                           WideCase{{256}, 0.05}, WideCase{{100, 3}, 0.05}),
                         name_of);

// The `pending` answer of a job of 100 members carries 2 words: a member that never sends is
// named by the others, above 64 as below.
TEST(WideFaults, DeadMemberAbove64IsNamedByTheOthers) {
  const std::uint16_t n = 100;
  auto t = flat(5, faults_for(0.05), n, 2, 8);
  const std::uint64_t count = 40;
  std::vector<std::vector<std::int32_t>> in(n, std::vector<std::int32_t>(count, 1));
  std::vector<std::vector<std::int32_t>> out(n, std::vector<std::int32_t>(count, 0));
  for (std::uint16_t r = 0; r < n; ++r)
    t.c->start(r, WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(in[r]), wbytes(out[r]), count, n));
  t.c->run_until([&] { return t.c->worker(70).report().chunks >= 2; }, 10 * kSecond);
  t.c->kill_worker(70);
  ASSERT_TRUE(t.c->run(100 * kSecond));
  for (std::uint16_t r : {0, 64, 99}) {
    auto& w = t.c->worker(r);
    ASSERT_TRUE(w.failed());
    EXPECT_EQ(w.error().kind, WorkerErrorKind::timeout);
    EXPECT_NE(w.error().message.find("missing {70}"), std::string::npos) << w.error().message;
    EXPECT_NE(w.error().message.find("members {0-69,71-99} of 100"), std::string::npos) << w.error().message;
  }
}

// Admission: up to proto::kMaxMembers members at one switch, not one more.
TEST(WideAdmission, UpToTheRadix) {
  SwitchConfig sc;
  sc.slots = 8;
  SwitchDataPlane sw(sc);
  EXPECT_EQ(sw.admit({1, std::uint16_t(proto::kMaxMembers), 4}, 0), proto::Reason::ok);
  EXPECT_EQ(sw.admit({2, std::uint16_t(proto::kMaxMembers + 1), 4}, 0), proto::Reason::bad_member);
  EXPECT_EQ(proto::kMaxMembers, 1024u);
  EXPECT_EQ(proto::pending_bytes(64), 8u);
  EXPECT_EQ(proto::pending_bytes(65), 16u);
  EXPECT_EQ(proto::pending_bytes(1024), 128u);
}

}  // namespace
}  // namespace inc::sw
