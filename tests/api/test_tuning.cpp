// The tuning table behind automatic selection: prediction between and beyond measured sizes,
// the choice among candidates, the file format and its errors.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "api/tuning.hpp"

namespace {

using inc::Collective;
using inc::api::CostTable;
using inc::coll::Algorithm;

CostTable sample() {
  CostTable t;
  t.nranks = 8;
  t.switch_path = "switch 10.0.0.9:7710";
  t.add(Collective::allreduce, Algorithm::ring, 1024, 100);
  t.add(Collective::allreduce, Algorithm::ring, 1 << 20, 1100);
  t.add(Collective::allreduce, Algorithm::inc, 1024, 50);
  t.add(Collective::allreduce, Algorithm::inc, 1 << 20, 1600);
  return t;
}

TEST(Tuning, PredictsPiecewiseLinearInBytes) {
  CostTable t = sample();
  EXPECT_DOUBLE_EQ(*t.predict(Collective::allreduce, Algorithm::ring, 1024), 100);
  EXPECT_DOUBLE_EQ(*t.predict(Collective::allreduce, Algorithm::ring, 1 << 20), 1100);
  // Halfway in bytes is halfway in time.
  const std::uint64_t mid = (1024 + (1u << 20)) / 2;
  EXPECT_NEAR(*t.predict(Collective::allreduce, Algorithm::ring, mid), 600, 1e-9);
  // Below the smallest size: its latency; beyond the largest: the last slope extended.
  EXPECT_DOUBLE_EQ(*t.predict(Collective::allreduce, Algorithm::ring, 8), 100);
  const double slope = 1000.0 / ((1u << 20) - 1024);
  EXPECT_NEAR(*t.predict(Collective::allreduce, Algorithm::ring, 2u << 20), 1100 + slope * (1u << 20), 1e-6);
  EXPECT_FALSE(t.predict(Collective::allgather, Algorithm::ring, 1024).has_value());
  EXPECT_FALSE(t.predict(Collective::allreduce, Algorithm::rabenseifner, 1024).has_value());
}

TEST(Tuning, ChoosesTheCheapestCandidateAndListsAll) {
  CostTable t = sample();
  std::vector<inc::api::PathCost> costs;
  auto small = inc::api::choose(t, Collective::allreduce, 4096, {Algorithm::ring, Algorithm::inc}, costs);
  ASSERT_TRUE(small);
  EXPECT_EQ(*small, Algorithm::inc);
  ASSERT_EQ(costs.size(), 2u);
  EXPECT_EQ(costs[0].algo, Algorithm::inc);
  auto large = inc::api::choose(t, Collective::allreduce, 1 << 20, {Algorithm::ring, Algorithm::inc}, costs);
  EXPECT_EQ(*large, Algorithm::ring);
  // A candidate the table never measured is not chosen; none measured: no choice.
  auto only_ring = inc::api::choose(t, Collective::allreduce, 4096, {Algorithm::ring, Algorithm::rabenseifner}, costs);
  EXPECT_EQ(*only_ring, Algorithm::ring);
  EXPECT_EQ(costs.size(), 1u);
  EXPECT_NE(inc::api::describe(costs).find("ring"), std::string::npos);
  EXPECT_FALSE(inc::api::choose(t, Collective::allgather, 4096, {Algorithm::ring}, costs));
  EXPECT_TRUE(costs.empty());
}

TEST(Tuning, FileRoundTrip) {
  CostTable t = sample();
  CostTable u = CostTable::from_json(t.to_json(), "mem");
  EXPECT_EQ(u.nranks, 8);
  EXPECT_EQ(u.switch_path, t.switch_path);
  for (std::uint64_t b : {8ull, 1024ull, 300000ull, 1ull << 20, 4ull << 20})
    for (Algorithm a : {Algorithm::ring, Algorithm::inc})
      EXPECT_NEAR(*u.predict(Collective::allreduce, a, b), *t.predict(Collective::allreduce, a, b), 1e-3);
  const std::string path = testing::TempDir() + "/inc_tuning_roundtrip.json";
  t.save(path);
  CostTable v = CostTable::load(path);
  EXPECT_EQ(v.algorithms(Collective::allreduce).size(), 2u);
  std::remove(path.c_str());
}

void expect_config_error(const std::string& text, const std::string& needle) {
  try {
    CostTable::from_json(text, "f.json");
    ADD_FAILURE() << "accepted: " << text;
  } catch (const inc::Error& e) {
    EXPECT_EQ(e.kind(), inc::Error::Kind::config);
    EXPECT_NE(std::string(e.what()).find("f.json"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Tuning, BadFilesNameTheKey) {
  expect_config_error("not json", "not a tuning file");
  // A number too large for a double is nlohmann's out_of_range, not parse_error (found by
  // fuzz/tuning_json_fuzz: it escaped as a json exception).
  expect_config_error(R"({"inc_tuning": 1, "nranks": 2, "table": {"allreduce": {"ring": [[1048e576, 9]]}}})",
                      "number overflow");
  expect_config_error("{}", "inc_tuning");
  expect_config_error(R"({"inc_tuning": 9, "nranks": 2, "table": {}})", "format 9");
  expect_config_error(R"({"inc_tuning": 1, "nranks": 0, "table": {}})", "nranks");
  expect_config_error(R"({"inc_tuning": 1, "nranks": 2})", "table");
  expect_config_error(R"({"inc_tuning": 1, "nranks": 2, "table": {"allsum": {}}})", "table.allsum");
  expect_config_error(R"({"inc_tuning": 1, "nranks": 2, "table": {"allreduce": {"fast": []}}})", "table.allreduce.fast");
  expect_config_error(R"({"inc_tuning": 1, "nranks": 2, "table": {"alltoall": {"ring": []}}})", "does not implement");
  expect_config_error(R"({"inc_tuning": 1, "nranks": 2, "table": {"allreduce": {"ring": [[8, -1]]}}})", "table.allreduce.ring[0]");
  expect_config_error(R"({"inc_tuning": 1, "nranks": 2, "table": {"allreduce": {"ring": [[8]]}}})", "table.allreduce.ring[0]");
  try {
    CostTable::load("/nonexistent/inc-tuning.json");
    ADD_FAILURE();
  } catch (const inc::Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot read"), std::string::npos);
  }
}

}  // namespace
