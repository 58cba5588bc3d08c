// Automatic selection from a tuning file (INC_TUNING=tests/api/tuning-n4.json, 4 ranks, with a
// switch): the path with the smallest predicted time is chosen per call, the report lists
// every candidate's prediction, cheapest first, and results stay exact.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "inc/inc.hpp"

namespace {

inc::Communicator& comm() {
  static inc::Communicator c = inc::Communicator::init();
  return c;
}

inc::Report allreduce_f32(std::size_t n) {
  std::vector<float> in(n), out(n);
  for (std::size_t i = 0; i < n; ++i) in[i] = static_cast<float>((i % 7) + comm().rank());
  comm().allreduce(in.data(), out.data(), n, inc::DataType::f32, inc::ReduceOp::sum);
  const float ranks = static_cast<float>(comm().size());
  for (std::size_t i = 0; i < n; ++i)
    EXPECT_EQ(out[i], ranks * static_cast<float>(i % 7) + ranks * (ranks - 1) / 2) << i;
  return comm().last_report();
}

void expect_sorted(const inc::Report& r) {
  ASSERT_FALSE(r.predicted_us.empty()) << r.reason;
  EXPECT_EQ(r.predicted_us.front().first, r.algorithm) << r.reason;
  for (std::size_t i = 1; i < r.predicted_us.size(); ++i)
    EXPECT_LE(r.predicted_us[i - 1].second, r.predicted_us[i].second);
}

TEST(Tuning, SmallAllreduceTakesTheSwitchLargeTheRing) {
  ASSERT_EQ(comm().size(), 4) << "run with 4 ranks";
  ASSERT_NE(std::getenv("INC_TUNING"), nullptr);
  auto small = allreduce_f32(16);
  EXPECT_EQ(small.algorithm, "inc") << small.reason;
  EXPECT_TRUE(small.in_network);
  EXPECT_NE(small.reason.find("INC_TUNING="), std::string::npos) << small.reason;
  expect_sorted(small);
  EXPECT_EQ(small.predicted_us.size(), 4u);  // inc, ring, recursive_doubling, rabenseifner
  auto large = allreduce_f32(1 << 20);      // 4 MiB: beyond the table, last slopes extended
  EXPECT_EQ(large.algorithm, "ring") << large.reason;
  EXPECT_FALSE(large.in_network);
  expect_sorted(large);
}

TEST(Tuning, TheSwitchIsNotACandidateWhereItCannotTakeTheCall) {
  // f64 runs on the hosts: the tuned choice is among host algorithms only.
  std::vector<double> in(64 * 4, 1.0), out(64);
  comm().reduce_scatter(in.data(), out.data(), 64, inc::DataType::f64, inc::ReduceOp::sum);
  auto r = comm().last_report();
  EXPECT_EQ(r.algorithm, "ring") << r.reason;
  ASSERT_EQ(r.predicted_us.size(), 1u) << r.reason;
  EXPECT_NE(r.reason.find("not the switch"), std::string::npos) << r.reason;
  for (auto v : out) EXPECT_EQ(v, 4.0);
}

TEST(Tuning, CollectivesTheTableLacksAreUntunedAndSaySo) {
  std::vector<float> buf(32, 1.0f);
  comm().broadcast(buf.data(), buf.size(), inc::DataType::f32, 0);
  auto r = comm().last_report();
  EXPECT_TRUE(r.predicted_us.empty());
  EXPECT_NE(r.reason.find("untuned"), std::string::npos) << r.reason;
  EXPECT_NE(r.reason.find("no broadcast measurements"), std::string::npos) << r.reason;
}

TEST(Tuning, ATableForAnotherSizeDoesNotApplyToASubCommunicator) {
  auto half = comm().split(comm().rank() % 2, comm().rank());
  std::vector<float> in(8, 1.0f), out(8);
  half.allreduce(in.data(), out.data(), in.size(), inc::DataType::f32, inc::ReduceOp::sum);
  auto r = half.last_report();
  EXPECT_TRUE(r.predicted_us.empty());
  EXPECT_NE(r.reason.find("measured on 4 ranks, this communicator has 2"), std::string::npos) << r.reason;
  for (float v : out) EXPECT_EQ(v, 2.0f);
}

TEST(Tuning, AnExplicitAlgorithmIsNotWeighed) {
  std::vector<float> in(16, 1.0f), out(16);
  inc::CallOptions o;
  o.algo = "recursive_doubling";
  comm().allreduce(in.data(), out.data(), in.size(), inc::DataType::f32, inc::ReduceOp::sum, o);
  auto r = comm().last_report();
  EXPECT_EQ(r.algorithm, "recursive_doubling");
  EXPECT_TRUE(r.predicted_us.empty());
}

}  // namespace
