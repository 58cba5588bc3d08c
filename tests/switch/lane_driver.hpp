// Drives resize_lanes (src/switch/lanes_resize.hpp) over the simulated lanes of one switch
// daemon, for the live-resize tests of lanes (resize_lanes_test.cpp) and of trees of lanes
// (resize_tree_lanes_test.cpp).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <numeric>
#include <optional>
#include <vector>

#include "src/switch/lanes_resize.hpp"
#include "tests/switch/sim_util.hpp"

namespace inc::sw::testing {

// Runs resize_lanes over the simulated lanes: each step visits the lanes in an order drawn
// from the seed, delivering packets for `gap` between two lanes; with `late_boundary`, the
// boundary reaches lanes 1.. only once lane 0 moved (its members drained, joined lane 0 again
// and went on to join the other lanes). `check` runs between the lanes.
struct LaneDriver {
  Topo& t;
  std::uint16_t lanes;
  std::uint64_t seed;
  Nanos gap = 0;  // ns
  bool late_boundary = false;
  std::function<void()> check = [] {};
  int step = 0;
  std::size_t first = 0;  // the switch index of lane 0

  template <class F>
  auto operator()(F f) -> std::optional<std::vector<decltype(f(std::declval<SwitchDataPlane&>()))>> {
    using R = decltype(f(std::declval<SwitchDataPlane&>()));
    ++step;
    if (step == 3 && late_boundary) {
      const auto moved = t.c->sw(first).counters().job_resizes + 1;
      EXPECT_TRUE(t.c->run_until([&] { return t.c->sw(first).counters().job_resizes == moved; }, 50 * kSecond))
          << "seed " << seed << ": lane 0 of switch " << first << " never moved";
      // The members' joins of the other lanes arrive before the boundary does.
      t.c->run_until([] { return false; }, t.c->now() + 3 * kMillisecond);
    }
    std::vector<std::uint16_t> order(lanes);
    std::iota(order.begin(), order.end(), std::uint16_t(0));
    std::rotate(order.begin(), order.begin() + (seed + std::uint64_t(step)) % lanes, order.end());
    if ((seed / 2) % 2) std::reverse(order.begin(), order.end());
    std::vector<R> out(lanes);
    for (std::uint16_t l : order) {
      out[l] = f(t.c->sw(first + l));
      check();
      if (gap > 0) t.c->run_until([] { return false; }, t.c->now() + gap);  // (limits are absolute)
    }
    return out;
  }
};

}  // namespace inc::sw::testing
