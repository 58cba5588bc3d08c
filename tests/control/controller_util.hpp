// Helpers of the controller's sans-IO tests (controller_test.cpp, rebalance_test.cpp): fabrics
// from text, the switch states the controller sees, tree requests, and the invariants.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "src/control/controller.hpp"

namespace inc::control {
namespace {

namespace ctl = proto::ctl;
constexpr Nanos S = sw::kSecond;

inline sw::Topology fabric(const std::string& text) {
  std::string err;
  auto t = sw::parse_topology(text, err);
  EXPECT_TRUE(t) << err;
  return *t;
}

constexpr const char* kOne = "switch s0 127.0.0.1:7100 slots=64\n";
constexpr const char* kTwoLevel =
    "switch spine 127.0.0.1:7100 slots=64\n"
    "switch leaf0 127.0.0.1:7101 parent=spine slots=64 rate=100\n"
    "switch leaf1 127.0.0.1:7102 parent=spine slots=64 rate=100\n";

inline ctl::SwitchState state_of(const sw::Topology& t, const std::string& name, std::uint64_t inc = 1) {
  const sw::TopoSwitch* s = t.find(name);
  ctl::SwitchState st;
  st.name = name;
  st.ip = s->addr.ipv4_addr();
  st.port = s->addr.port();
  st.lanes = s->lanes;
  st.slots_per_lane = s->slots / s->lanes;
  st.slot_elems = s->slot_elems;
  st.incarnation = inc;
  if (!s->parent.empty()) {
    st.parent_ip = t.find(s->parent)->addr.ipv4_addr();
    st.parent_port = t.find(s->parent)->addr.port();
  }
  return st;
}

// (Shares at admission only: live re-balancing has its own tests, rebalance_test.cpp.)
inline Controller make(const std::string& text, Policy p, Nanos now = 0, std::uint64_t seed = 1) {
  ControllerConfig c;
  c.fabric = fabric(text);
  c.policy = p;
  c.seed = seed;
  c.rebalance = false;
  Controller ctl(c);
  for (const auto& s : c.fabric.switches) EXPECT_EQ(ctl.switch_state(state_of(c.fabric, s.name), now), "");
  return ctl;
}

inline ctl::TreeRequest req(std::vector<std::string> hosts, std::uint32_t slots = 32) {
  ctl::TreeRequest r;
  r.hosts = std::move(hosts);
  r.slots_wanted = slots;
  return r;
}

// (append, not operator+: GCC 12's -Wrestrict misfires on chains of string additions)
inline void add_host(std::string& text, const std::string& prefix, int i, const char* leaf) {
  text.append("host ").append(prefix).append(std::to_string(i)).append(" leaf=").append(leaf).append("\n");
}

inline std::vector<std::string> hosts(int n, const std::string& prefix = "h", int from = 0) {
  std::vector<std::string> v;
  for (int i = 0; i < n; ++i) v.push_back(std::string(prefix).append(std::to_string(from + i)));
  return v;
}

// Every switch's reservations fit its pool and match the jobs' trees.
inline void check_invariants(const Controller& c) {
  for (const auto& [n, s] : c.switches()) {
    std::uint64_t used = 0;
    for (const auto& [job, slots] : s.reserved) {
      used += slots;
      ASSERT_TRUE(c.jobs().count(job)) << "switch " << n << " reserves for unknown job " << job;
    }
    ASSERT_LE(used, c.pool(s)) << "switch " << n;
  }
  for (const auto& [id, j] : c.jobs())
    for (const auto& [sw, spec] : j.tree) ASSERT_TRUE(c.switches().at(sw).reserved.count(id)) << sw;
}
}  // namespace
}  // namespace inc::control
