// A live resize of a job on a switch with several lanes (docs/PROTOCOL.md "Live resize of
// lanes"): the steps every lane takes, in an order that gives all of them one boundary and one
// new size. SwitchLanes runs it on the lanes' threads; tests/switch/resize_lanes_test.cpp runs
// it on simulated lanes, with packets delivered between the steps.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "src/switch/dataplane.hpp"

namespace inc::sw {

// `each(f)` runs f(SwitchDataPlane&) on every lane (in any order, lane index in
// dp.config().lane) and returns the results in lane order, or nullopt if the lanes are gone.
//   1. Every lane prepares (checks, reserves a grow's slots). A refusal takes the others back:
//      nothing was announced yet. A grow that does not fit on some lane keeps the old size on
//      every lane (as on one lane: ok, nothing changes).
//   2. Lane 0 picks the boundary K (lane chunk; global chunk K L on the workers' side).
//   3. Every other lane takes K (or, when nobody had joined lane 0, moves at its next join).
// Each lane moves once its members drained up to K and joined it again; until then it keeps
// its slots, so the slots a shrink frees are free on every lane only once every lane moved.
// On a leaf of a tree (docs/PROTOCOL.md "Live resize of a tree of lanes") step 1 is all: each
// lane follows its parent's lane, which has the root's boundary; nothing is picked here. (Lanes
// beyond the parent's, which the job does not use, keep their size.)
template <class Each>
proto::Reason resize_lanes(Each&& each, std::uint32_t job, std::uint32_t slots) {
  using Prep = SwitchDataPlane::LanePrepare;
  auto prep = each([job, slots](SwitchDataPlane& dp) { return dp.prepare_lane_resize(job, slots); });
  if (!prep || prep->empty()) return proto::Reason::unexpected;  // stopping
  if (prep->front().leaf) {
    std::vector<bool> unused;
    proto::Reason r = proto::Reason::ok;
    for (const Prep& p : *prep) {
      if (p.leaf && p.r != proto::Reason::ok && r == proto::Reason::ok) r = p.r;
      unused.push_back(!p.leaf && p.r == proto::Reason::ok && !p.noop);
    }
    each([job, unused](SwitchDataPlane& dp) {
      if (unused[dp.config().lane]) dp.cancel_lane_resize(job);
      return true;
    });
    return r;
  }
  proto::Reason refused = proto::Reason::ok;
  bool all_noop = true;
  for (const Prep& p : *prep) {
    if (p.r != proto::Reason::ok && refused == proto::Reason::ok) refused = p.r;
    all_noop = all_noop && p.r == proto::Reason::ok && p.noop;
  }
  if (all_noop) return proto::Reason::ok;
  // Lanes that disagree on the job's size (some noop, some not) cannot share a boundary.
  bool some_noop = false;
  for (const Prep& p : *prep) some_noop = some_noop || (p.r == proto::Reason::ok && p.noop);
  if (refused == proto::Reason::ok && some_noop) refused = proto::Reason::unexpected;
  if (refused != proto::Reason::ok) {
    std::vector<bool> undo;
    for (const Prep& p : *prep) undo.push_back(p.r == proto::Reason::ok && !p.noop);
    each([job, undo](SwitchDataPlane& dp) {
      if (undo[dp.config().lane]) dp.cancel_lane_resize(job);
      return true;
    });
    // A grow that does not fit keeps the size it has, on every lane.
    return refused == proto::Reason::no_slots ? proto::Reason::ok : refused;
  }
  auto picked = each([job](SwitchDataPlane& dp) {
    return dp.config().lane == 0 ? dp.pick_boundary(job) : std::optional<std::uint32_t>{};
  });
  if (!picked || picked->empty()) return proto::Reason::unexpected;
  const std::optional<std::uint32_t> at = picked->front();
  each([job, at](SwitchDataPlane& dp) {
    if (dp.config().lane != 0) dp.take_boundary(job, at);
    return true;
  });
  return proto::Reason::ok;
}

}  // namespace inc::sw
