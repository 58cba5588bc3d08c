// The tuning table behind automatic selection: prediction between and beyond measured sizes,
// the choice among candidates, the file format and its errors.
#include <gtest/gtest.h>

#include <unistd.h>

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

TEST(Tuning, ASlowReadingAtASmallSizeCountsAsTheLargerSizesTime) {
  CostTable t;
  t.nranks = 8;
  // 64 B read 3548 us (a descheduled rank), 128 B 331 us: 64 B costs at most what 128 B did.
  t.add(Collective::allreduce, Algorithm::inc, 64, 3548);
  t.add(Collective::allreduce, Algorithm::inc, 128, 331);
  t.add(Collective::allreduce, Algorithm::inc, 1024, 400);
  t.add(Collective::allreduce, Algorithm::recursive_doubling, 64, 573);
  t.add(Collective::allreduce, Algorithm::recursive_doubling, 1024, 600);
  EXPECT_DOUBLE_EQ(*t.predict(Collective::allreduce, Algorithm::inc, 64), 331);
  EXPECT_DOUBLE_EQ(*t.predict(Collective::allreduce, Algorithm::inc, 8), 331);
  EXPECT_NEAR(*t.predict(Collective::allreduce, Algorithm::inc, 96), 331, 1e-9);
  EXPECT_NEAR(*t.predict(Collective::allreduce, Algorithm::inc, 576), 365.5, 1e-9);  // 128..1024 B
  std::vector<inc::api::PathCost> costs;
  EXPECT_EQ(*inc::api::choose(t, Collective::allreduce, 64, inc::api::candidates(Collective::allreduce, true), costs),
            Algorithm::inc);
  // The file keeps what was measured.
  EXPECT_NE(t.to_json().find("[64, 3548.000]"), std::string::npos) << t.to_json();
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
  const std::string path = testing::TempDir() + "/inc_tuning_roundtrip." + std::to_string(::getpid()) + ".json";
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

TEST(Tuning, CandidatesAreTheSwitchThenEveryHostAlgorithmOfTheCollective) {
  using V = std::vector<Algorithm>;
  EXPECT_EQ(inc::api::candidates(Collective::allreduce, true),
            (V{Algorithm::inc, Algorithm::ring, Algorithm::recursive_doubling, Algorithm::rabenseifner}));
  EXPECT_EQ(inc::api::candidates(Collective::allreduce, false),
            (V{Algorithm::ring, Algorithm::recursive_doubling, Algorithm::rabenseifner}));
  EXPECT_EQ(inc::api::candidates(Collective::reduce_scatter, true), (V{Algorithm::inc, Algorithm::ring}));
  EXPECT_EQ(inc::api::candidates(Collective::allgather, true),
            (V{Algorithm::inc, Algorithm::ring, Algorithm::recursive_doubling}));
  EXPECT_EQ(inc::api::candidates(Collective::broadcast, true),
            (V{Algorithm::inc, Algorithm::binomial_tree, Algorithm::pipelined_chain}));
  EXPECT_EQ(inc::api::candidates(Collective::alltoall, false), (V{Algorithm::pairwise}));
}

// A table as `inc tune` writes it for 8 ranks with a switch: the chosen path per collective
// and size, at measured sizes and between them.
TEST(Tuning, ChoosesThePathPerCollectiveAndSize) {
  const std::string text = R"({"inc_tuning": 1, "nranks": 8, "table": {
    "allreduce": {"inc": [[64, 300], [65536, 700], [1048576, 4800]],
                  "ring": [[64, 350], [65536, 900], [1048576, 3000]],
                  "recursive_doubling": [[64, 200], [65536, 600], [1048576, 9000]],
                  "rabenseifner": [[64, 250], [65536, 800], [1048576, 2500]]},
    "reduce_scatter": {"inc": [[64, 620], [1048576, 2000]], "ring": [[64, 240], [1048576, 2600]]},
    "allgather": {"inc": [[64, 720], [1048576, 3000]], "ring": [[64, 300], [1048576, 2500]],
                  "recursive_doubling": [[64, 100], [1048576, 2700]]},
    "broadcast": {"inc": [[64, 500], [65536, 900], [1048576, 5000]],
                  "binomial_tree": [[64, 100], [65536, 300], [1048576, 4000]],
                  "pipelined_chain": [[64, 200], [65536, 400], [1048576, 2000]]}}})";
  const CostTable t = CostTable::from_json(text, "t.json");
  auto pick = [&](Collective c, std::uint64_t bytes, bool with_switch = true) {
    std::vector<inc::api::PathCost> costs;
    auto a = inc::api::choose(t, c, bytes, inc::api::candidates(c, with_switch), costs);
    EXPECT_TRUE(a.has_value());
    // Every candidate has a prediction, cheapest (the choice) first.
    EXPECT_EQ(costs.size(), inc::api::candidates(c, with_switch).size());
    for (std::size_t i = 1; i < costs.size(); ++i) EXPECT_LE(costs[i - 1].us, costs[i].us);
    return a ? std::string(inc::coll::name(*a)) : std::string("none");
  };
  EXPECT_EQ(pick(Collective::allreduce, 64), "recursive_doubling");
  EXPECT_EQ(pick(Collective::allreduce, 8), "recursive_doubling");  // below the table: its first size
  EXPECT_EQ(pick(Collective::allreduce, 65536), "recursive_doubling");
  EXPECT_EQ(pick(Collective::allreduce, 1 << 20), "rabenseifner");
  EXPECT_EQ(pick(Collective::allreduce, 16u << 20), "rabenseifner");  // beyond: last slopes
  // Between 64 KiB and 1 MiB, linear in bytes: at 256 KiB rd 2700, rab 1230, ring 1420, inc 1724.
  EXPECT_EQ(pick(Collective::allreduce, 256u << 10), "rabenseifner");
  EXPECT_EQ(pick(Collective::reduce_scatter, 4096), "ring");
  EXPECT_EQ(pick(Collective::reduce_scatter, 1 << 20), "inc");
  EXPECT_EQ(pick(Collective::reduce_scatter, 1 << 20, false), "ring");  // the switch cannot take it
  EXPECT_EQ(pick(Collective::allgather, 64), "recursive_doubling");
  EXPECT_EQ(pick(Collective::allgather, 1 << 20), "ring");
  EXPECT_EQ(pick(Collective::broadcast, 64), "binomial_tree");
  // 512 KiB: binomial tree 300 + 0.479 x 3700 = 2071 us, chain 400 + 0.479 x 1600 = 1166 us.
  EXPECT_EQ(pick(Collective::broadcast, 512u << 10), "pipelined_chain");
  EXPECT_EQ(pick(Collective::broadcast, 1 << 20), "pipelined_chain");
}

TEST(Tuning, ASizeIsSettledWhenNoRivalsBestRoundBeatsTheLeaderBeyondTheMargin) {
  using inc::api::settled;
  EXPECT_DOUBLE_EQ(inc::api::median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(inc::api::median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(inc::api::median({}), 0);
  // Leader 100 (median), rival 200 with a best round of 150: clear.
  EXPECT_TRUE(settled({{100, 90, 110}, {200, 150, 210}}, 1.05));
  // Rival's best round 92 is more than 5% below the leader's median 100: not yet clear.
  EXPECT_FALSE(settled({{100, 90, 110}, {120, 92, 130}}, 1.05));
  EXPECT_TRUE(settled({{100, 90, 110}, {120, 92, 130}}, 1.1));
  // The leader is the one with the smaller median, wherever it stands in the list.
  EXPECT_FALSE(settled({{120, 92, 130}, {100, 90, 110}}, 1.05));
  // Unmeasured candidates (empty) and single candidates do not hold a size open.
  EXPECT_TRUE(settled({{100}, {}}, 1.05));
  EXPECT_TRUE(settled({}, 1.05));
}

TEST(Tuning, BadFilesNameFileAndLine) {
  auto error_of = [](const std::string& text) {
    try {
      CostTable::from_json(text, "f.json");
    } catch (const inc::Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string head = "{\n \"inc_tuning\": 1,\n \"nranks\": 8,\n \"table\": {\n  \"allreduce\": {\n";
  // Line 7: an algorithm that does not exist.
  EXPECT_NE(error_of(head + "   \"ring\": [[8, 1]],\n   \"fast\": [[8, 1]]\n  }\n }\n}").find("f.json:7: table.allreduce.fast"),
            std::string::npos)
      << error_of(head + "   \"ring\": [[8, 1]],\n   \"fast\": [[8, 1]]\n  }\n }\n}");
  // The third point of ring, on line 9.
  const std::string pts = head + "   \"ring\": [\n    [8, 1],\n    [16, 2],\n    [32, -3]\n   ]\n  }\n }\n}";
  EXPECT_NE(error_of(pts).find("f.json:9: table.allreduce.ring[2]"), std::string::npos) << error_of(pts);
  // A JSON syntax error on line 3.
  EXPECT_NE(error_of("{\n \"inc_tuning\": 1,\n \"nranks\": 8,,\n}").find("f.json:3:"), std::string::npos)
      << error_of("{\n \"inc_tuning\": 1,\n \"nranks\": 8,,\n}");
  // Object members: the line of the key.
  EXPECT_NE(error_of("{\n \"inc_tuning\": 1,\n\n \"nranks\": -2,\n \"table\": {}\n}").find("f.json:4: \"nranks\""),
            std::string::npos);
  EXPECT_NE(error_of("{\"inc_tuning\": 1, \"nranks\": 2,\n\"table\": {\"allsum\":\n {}}}").find("f.json:2: table.allsum"),
            std::string::npos);
  // A key with an escape in a string before it does not shift the count.
  EXPECT_NE(error_of("{\"created\": \"a \\\" b\\n\",\n \"inc_tuning\": 1, \"nranks\": 2,\n \"table\": {\"allreduce\": {\"x\": []}}}")
                .find("f.json:3: table.allreduce.x"),
            std::string::npos);
}

}  // namespace
