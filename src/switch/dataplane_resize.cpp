// Live resizes of a running job (docs/PROTOCOL.md "Live resize", "Live resize of a tree",
// "Live resize of lanes"): the boundary, the slot table's new size, moving the members, a leaf
// following its parent, and the three steps of a resize on a switch with several lanes.
#include <algorithm>

#include "src/switch/dataplane.hpp"

namespace inc::sw {

using proto::Header;
using proto::PacketType;
using proto::Reason;

Reason SwitchDataPlane::resize_refusal(const Job* j, std::uint32_t slots) const {
  if (!j) return Reason::unknown_job;
  if (slots == 0 || slots > 0xFFFF) return Reason::bad_slot;
  // Results announce the boundary at most kMaxResizeDistance chunks ahead (it lies S ahead).
  if (j->spec.slots > proto::kMaxResizeDistance) return Reason::unsupported;
  if (j->failed) return Reason::job_failed;
  return Reason::ok;
}

Reason SwitchDataPlane::resize(std::uint32_t job, std::uint32_t slots) {
  Job* j = find(job);
  if (Reason r = resize_refusal(j, slots); r != Reason::ok) return r;
  // Several lanes need one boundary for all of them: resize_lanes (lanes_resize.hpp). A leaf's
  // lane follows its parent's lane (boundary and size) alone, as a one-lane leaf does.
  if (cfg_.lanes != 1 && !j->has_parent()) return Reason::unsupported;
  const bool someone_moved = std::any_of(j->members.begin(), j->members.end(), [](const Member& m) { return m.moved; });
  if (j->resizing) {
    // A leaf still waiting for its parent's boundary, asked to stay as it is: nothing to do
    // (the controller takes back a resize another switch of the tree refused).
    if (j->has_parent() && !j->resize_known && !j->rejoining && !someone_moved && slots == j->spec.slots) {
      j->resizing = false;
      j->resize_to = 0;
      free_reserved(*j);
      return Reason::ok;
    }
    j->resize_to = slots;  // the boundary stands; the target changes
    return Reason::ok;
  }
  if (slots == j->spec.slots) return Reason::ok;
  j->resize_to = slots;
  j->resizing = true;
  if (j->has_parent() && cfg_.lanes > 1 && slots > j->spec.slots) {
    // A leaf's lanes take the parent's size each when its lane moves: the room for a grow is
    // kept for the job meanwhile, so that another job's admission cannot take it from one
    // lane only (a grow that does not fit fails the job at the move, as on a one-lane leaf).
    if (auto more = allocate(slots - j->spec.slots, job)) j->reserved = std::move(*more);
  }
  const bool anyone = std::any_of(j->members.begin(), j->members.end(), [](const Member& m) { return m.joined; });
  if (!anyone) {  // nothing in flight, nobody to tell: the join_acks will carry the new size
    j->resize_at = 0;
    finish_resize(*j);
    return Reason::ok;
  }
  for (auto& m : j->members) m.moved = false;
  if (j->has_parent()) {
    // A leaf: the boundary is the root's, announced in the results coming down (handle_from_parent).
    j->resize_known = false;
    return Reason::ok;
  }
  pick_resize_at(*j);
  return Reason::ok;
}

std::uint32_t SwitchDataPlane::pick_resize_at(Job& j) {
  // The boundary: no member can have sent a chunk at or beyond it. A member sends chunk c only
  // once it holds the result of chunk c - S; every chunk that completed had a contribution of
  // every member, so lies below the newest chunk seen from any member (H); results of chunks
  // from H on are sent from now on, each with the boundary H + S.
  std::uint32_t h = j.members[0].next_chunk;
  for (const auto& m : j.members)
    if (proto::chunk_distance(m.next_chunk, h) > 0) h = m.next_chunk;
  j.resize_at = h + j.spec.slots;
  j.resize_known = true;
  return j.resize_at;
}

bool SwitchDataPlane::take_slots(Job& j, std::uint32_t n) {
  if (n < j.spec.slots) {
    for (std::uint32_t i = n; i < j.spec.slots; ++i) owner_[j.slot_of[i]] = 0;
    j.slot_of.resize(n);
  } else if (n > j.spec.slots) {
    // Slots reserved for this grow first (several lanes), then any free ones.
    const std::uint32_t from_reserve = std::min<std::uint32_t>(n - j.spec.slots, std::uint32_t(j.reserved.size()));
    std::vector<std::uint32_t> more(j.reserved.begin(), j.reserved.begin() + from_reserve);
    if (more.size() < n - j.spec.slots) {
      auto rest = allocate(n - j.spec.slots - std::uint32_t(more.size()), j.spec.job);
      if (!rest) return false;
      more.insert(more.end(), rest->begin(), rest->end());
    }
    j.reserved.erase(j.reserved.begin(), j.reserved.begin() + from_reserve);
    j.slot_of.insert(j.slot_of.end(), more.begin(), more.end());
  }
  free_reserved(j);
  j.spec.slots = n;
  return true;
}

void SwitchDataPlane::finish_resize(Job& j) {
  // Every member holds every result of the old mapping (it drained before joining again):
  // nothing in the old slots is needed any more. A shrink keeps the first slots and frees the
  // rest; a grow keeps them all and adds free slots (any: the job's slot table maps them), or
  // keeps the old size when too few are free.
  take_slots(j, j.resize_to);
  move_members(j);
}

void SwitchDataPlane::move_members(Job& j) {
  j.prev_epoch = j.epoch;
  j.epoch = new_epoch();
  j.resizing = j.resize_known = j.rejoining = j.resize_lazy = false;
  j.resize_to = 0;
  init_copies(j, j.resize_at);
  ++c_.job_resizes;
  for (auto& m : j.members) {
    m.moved = false;
    m.next_chunk = j.resize_at;
    if (m.joined && !m.left) send_join_ack(j, m);
  }
}

void SwitchDataPlane::rejoin_parent(Job& j) {
  // Every member of this leaf holds every result of the old mapping, so this leaf needs
  // nothing more from its parent under it: it is drained, as a member of the parent. (Sent
  // again at each join a member retransmits meanwhile: a leaf has no timers.)
  if (!j.rejoining) {
    j.rejoining = true;
    j.parent_join_nonce = new_epoch();  // fresh: an answer to an older join is ignored
  }
  join_parent(j, 0);
}

void SwitchDataPlane::join_parent(Job& j, std::uint8_t flags) {
  Header up;
  up.type = PacketType::join;
  up.flags = flags;
  up.member = j.spec.parent_member;
  up.job = j.spec.job;
  up.aux = j.session;
  up.chunk = j.parent_join_nonce;
  proto::encode_header(up, out_.reserve(proto::kHeaderBytes));
  emit(&j, cfg_.parent, proto::kHeaderBytes);
}

void SwitchDataPlane::start_following(Job& j) {
  j.resizing = true;
  j.resize_known = false;
  j.resize_to = 0;  // the parent's size, whatever it is (its answer to our join again)
  for (auto& m : j.members) m.moved = false;
}

void SwitchDataPlane::follow_parent(Job& j, const proto::JoinInfo& info, std::uint32_t parent_epoch,
                                    std::uint32_t at) {
  // The parent moved (every leaf drained): the tree's slot count is the parent's, as at a
  // first join (a leaf and its parent map chunk c to slot c mod S alike). A shrink always
  // fits; a grow that does not fit here fails the job (its members retry and start afresh).
  // Its stream starts at `at`, the boundary: the one its results announced, if we saw one
  // (a lane of a leaf may have seen none: its members drained on the other lanes' word). A
  // parent that answers under the epoch we had did not move: it was not resizing.
  if (parent_epoch == j.parent_epoch || (j.resize_known && at != j.resize_at)) {
    j.rejoining = false;
    return fail_job(j, Reason::mismatch);
  }
  if (info.slots == 0 || !take_slots(j, info.slots)) {
    j.rejoining = false;
    return fail_job(j, Reason::no_slots);
  }
  j.resize_at = at;
  j.parent_epoch = parent_epoch;
  j.parent_info = info;
  move_members(j);
}

// ---- several lanes --------------------------------------------------------------------------

SwitchDataPlane::LanePrepare SwitchDataPlane::prepare_lane_resize(std::uint32_t job, std::uint32_t slots) {
  Job* j = find(job);
  if (Reason r = resize_refusal(j, slots); r != Reason::ok) return {r};
  // A leaf's lane follows its parent's lane: the boundary from the parent's results or, if
  // none came, from the parent's answer to its join again (docs/PROTOCOL.md "Live resize of a
  // tree of lanes"); nothing to pick or take here.
  if (j->has_parent()) {
    LanePrepare p{resize(job, slots)};
    p.leaf = true;
    return p;
  }
  // One at a time: a lane that moved and one that has not cannot take a new target together
  // (the switch's agent holds a Resize that comes meanwhile until this one is done).
  if (j->resizing) return {Reason::unexpected};
  if (slots == j->spec.slots) return {Reason::ok, true};
  if (slots > j->spec.slots) {
    auto more = allocate(slots - j->spec.slots, job);
    if (!more) return {Reason::no_slots};
    j->reserved = std::move(*more);
  }
  j->resizing = true;
  j->resize_known = j->resize_lazy = false;
  j->resize_to = slots;
  j->resize_at = 0;
  LanePrepare p;
  for (auto& m : j->members) {
    m.moved = false;
    p.anyone = p.anyone || m.joined;
  }
  return p;
}

void SwitchDataPlane::free_reserved(Job& j) {
  for (std::uint32_t s : j.reserved) owner_[s] = 0;
  j.reserved.clear();
}

void SwitchDataPlane::cancel_lane_resize(std::uint32_t job) {
  Job* j = find(job);
  if (!j || !j->resizing) return;
  free_reserved(*j);
  j->resizing = j->resize_known = j->resize_lazy = false;
  j->resize_to = 0;
  for (auto& m : j->members) m.moved = false;
}

std::optional<std::uint32_t> SwitchDataPlane::pick_boundary(std::uint32_t job) {
  Job* j = find(job);
  if (!j || !j->resizing || j->resize_known) return std::nullopt;
  if (!std::any_of(j->members.begin(), j->members.end(), [](const Member& m) { return m.joined; })) {
    // Nobody to tell: the lanes move at their next join, so that every member finds the new
    // size on every lane (moving now, a member joining meanwhile could see two sizes).
    j->resize_lazy = true;
    return std::nullopt;
  }
  // As resize(): members send lane chunk c of lane 0 (global chunk c L) only once they hold the
  // result of lane chunk c - S here, so no member has sent lane chunk H + S, and every one
  // learns it from a result here before it sends global chunk (H + S) L, where the old mapping
  // ends on every lane (lane chunk H + S of each).
  return pick_resize_at(*j);
}

void SwitchDataPlane::take_boundary(std::uint32_t job, std::optional<std::uint32_t> at) {
  Job* j = find(job);
  if (!j || !j->resizing || j->resize_known || j->resize_lazy) return;
  if (!at) {
    j->resize_lazy = true;
    return;
  }
  j->resize_at = *at;
  j->resize_known = true;
  // Members that drained and joined again before the boundary came (they learnt it from lane
  // 0's results): waiting for it only.
  if (std::all_of(j->members.begin(), j->members.end(), [](const Member& m) { return m.moved; }))
    finish_resize(*j);
}

}  // namespace inc::sw
