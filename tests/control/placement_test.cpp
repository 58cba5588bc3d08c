// Root placement (src/control/placement.*): hosts on several leaves, uplink rates and the jobs
// already on an uplink decide through which leaf each rank attaches, and so the tree's root.
#include "src/control/placement.hpp"

#include <gtest/gtest.h>

#include "src/control/controller.hpp"

namespace inc::control {
namespace {

namespace ctl = proto::ctl;

sw::Topology fabric(const std::string& text) {
  std::string err;
  auto t = sw::parse_topology(text, err);
  EXPECT_TRUE(t) << err;
  return t ? *t : sw::Topology{};
}

// A spine over leaves A (10 Gb/s uplink), B and C (100 Gb/s each), D (no rate given).
const char* kRates =
    "switch spine 127.0.0.1:7100 slots=256\n"
    "switch A 127.0.0.1:7101 parent=spine slots=256 rate=10\n"
    "switch B 127.0.0.1:7102 parent=spine slots=256 rate=100\n"
    "switch C 127.0.0.1:7103 parent=spine slots=256 rate=100\n"
    "switch D 127.0.0.1:7104 parent=spine slots=256\n";

Controller make(const std::string& text) {
  ControllerConfig c;
  c.fabric = fabric(text);
  Controller ctl(c);
  for (const auto& s : c.fabric.switches) {
    ctl::SwitchState st;
    st.name = s.name;
    st.ip = s.addr.ipv4_addr();
    st.port = s.addr.port();
    st.lanes = s.lanes;
    st.slots_per_lane = s.slots / s.lanes;
    st.slot_elems = s.slot_elems;
    st.incarnation = 1;
    if (!s.parent.empty()) {
      st.parent_ip = c.fabric.find(s.parent)->addr.ipv4_addr();
      st.parent_port = c.fabric.find(s.parent)->addr.port();
    }
    EXPECT_EQ(ctl.switch_state(st, 0), "");
  }
  return ctl;
}

ctl::TreeRequest req(std::vector<std::string> hosts) {
  ctl::TreeRequest r;
  r.hosts = std::move(hosts);
  r.slots_wanted = 8;
  return r;
}

TEST(Placement, HostLinesNameSeveralLeaves) {
  auto t = fabric(std::string(kRates) + "host x leaf=A,B\nhost y leaf=C\n");
  ASSERT_EQ(t.find_host("x")->leaves, (std::vector<std::string>{"A", "B"}));
  EXPECT_EQ(t.find_host("x")->leaf, "A");
  EXPECT_EQ(t.find_host("y")->leaves, (std::vector<std::string>{"C"}));
  std::string err;
  EXPECT_FALSE(sw::parse_topology(std::string(kRates) + "host x leaf=A,Z\n", err));
  EXPECT_NE(err.find("unknown switch 'Z'"), std::string::npos) << err;
  EXPECT_FALSE(sw::parse_topology(std::string(kRates) + "host x leaf=A,A\n", err));
  EXPECT_NE(err.find("given twice"), std::string::npos) << err;
  EXPECT_FALSE(sw::parse_topology(std::string(kRates) + "host x leaf=A,\n", err));
}

TEST(Placement, UplinkWeightsFollowTheRateAndTheJobsOnTheLink) {
  auto t = fabric(kRates);
  EXPECT_EQ(uplink_weight(*t.find("spine"), 3), 0.0);  // a root has no uplink
  EXPECT_EQ(uplink_weight(*t.find("A"), 0), 10.0);
  EXPECT_EQ(uplink_weight(*t.find("B"), 0), 1.0);
  EXPECT_EQ(uplink_weight(*t.find("B"), 2), 3.0);
  EXPECT_EQ(uplink_weight(*t.find("D"), 0), 1.0);  // no rate: one hop
}

TEST(Placement, FewestHopsFirst) {
  // x can reach A or B, y only B: both on B, no spine (rather than A + B under the spine).
  Controller c = make(std::string(kRates) + "host x leaf=A,B\nhost y leaf=B\n");
  auto g = c.request_tree(req({"x", "y"}), 0);
  ASSERT_TRUE(g.ok) << g.why;
  EXPECT_EQ(g.root, "B");
  EXPECT_EQ(g.tree.size(), 1u);
  EXPECT_EQ(g.ranks[0].sw, "B");
}

TEST(Placement, TheSpineIsReachedThroughTheFasterUplink) {
  // x hangs off A (10 Gb/s uplink) and B (100 Gb/s), y off C only: the tree must cross the
  // spine; through B it costs 1 + 1, through A 10 + 1.
  Controller c = make(std::string(kRates) + "host x leaf=A,B\nhost y leaf=C\n");
  auto g = c.request_tree(req({"x", "y"}), 0);
  ASSERT_TRUE(g.ok) << g.why;
  EXPECT_EQ(g.root, "spine");
  EXPECT_EQ(g.ranks[0].sw, "B");
  EXPECT_EQ(g.ranks[1].sw, "C");
}

TEST(Placement, BusyUplinksAreAvoided) {
  // x and z hang off B and D (equal weight when idle), y off C. The first job takes B (the
  // line's order); the second, with B's uplink in use, goes through D; once the first job is
  // released, B is idle again and chosen again.
  Controller c = make(std::string(kRates) + "host x leaf=B,D\nhost z leaf=B,D\nhost y leaf=C\nhost w leaf=C\n");
  auto g1 = c.request_tree(req({"x", "y"}), 0);
  ASSERT_TRUE(g1.ok) << g1.why;
  EXPECT_EQ(g1.ranks[0].sw, "B");
  auto g2 = c.request_tree(req({"z", "w"}), 0);
  ASSERT_TRUE(g2.ok) << g2.why;
  EXPECT_EQ(g2.ranks[0].sw, "D");
  ASSERT_TRUE(c.release(g1.job, g1.lease));
  auto g3 = c.request_tree(req({"x", "y"}), 0);
  ASSERT_TRUE(g3.ok) << g3.why;
  EXPECT_EQ(g3.ranks[0].sw, "B");
}

TEST(Placement, RanksShareALeafWhenTheirChoicesTie) {
  // x lists B then D, v lists D then B (equal weights), y is on C: once rank 0 took B, rank 1
  // joins it there (one uplink) rather than taking D by its line's order (two uplinks).
  Controller c = make(std::string(kRates) + "host x leaf=B,D\nhost v leaf=D,B\nhost y leaf=C\n");
  auto g = c.request_tree(req({"x", "v", "y"}), 0);
  ASSERT_TRUE(g.ok) << g.why;
  EXPECT_EQ(g.ranks[0].sw, "B");
  EXPECT_EQ(g.ranks[1].sw, "B");
  EXPECT_EQ(g.tree.size(), 3u);  // spine, B, C
}

}  // namespace
}  // namespace inc::control
