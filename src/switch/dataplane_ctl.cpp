// The switch data plane's packets from above and around the members' data path: leaving, the
// parent's answers (hierarchy), control packets (admit/release), slot allocation, idle expiry
// and snapshots. Live resizes are in dataplane_resize.cpp.
// The per-packet aggregation path is in dataplane.cpp.
#include <algorithm>
#include <cstring>

#include "src/switch/dataplane.hpp"

namespace inc::sw {

using proto::ElemType;
using proto::Header;
using proto::PacketType;
using proto::PacketView;
using proto::Reason;

void SwitchDataPlane::handle_leave(const PacketView& v, Endpoint from) {
  const Header& h = v.h;
  Job* j = find(h.job);
  if (!j) return send_empty(nullptr, from, PacketType::leave_ack, h);  // nothing to leave
  ++j->c.packets_in;
  j->c.bytes_in += proto::kHeaderBytes;
  Reason r = proto::validate(
      h, {j->spec.job, j->epoch, j->spec.slots, j->spec.members, slot_bytes()});
  if (r != Reason::ok) return drop(j, r);
  Member& m = j->members[h.member];
  if (!m.joined || m.ep != from) return drop(j, Reason::not_joined);
  m.left = true;
  send_empty(j, from, PacketType::leave_ack, h);
  // Every member joined and left (a member that has not joined yet may still come: releasing
  // the job then would refuse it as unknown).
  if (!departed(h.job)) return;
  if (j->has_parent() && j->parent_joined) {
    Header up;
    up.type = PacketType::leave;
    up.member = j->spec.parent_member;
    up.job = j->spec.job;
    up.epoch = j->parent_epoch;
    proto::encode_header(up, out_.reserve(proto::kHeaderBytes));
    emit(j, cfg_.parent, proto::kHeaderBytes);
  }
  if (!j->dynamic) return;
  if (cfg_.external_control) {
    control_.push_back({ControlEvent::Kind::all_left, {h.job, 0, 0, proto::kNoMember, std::nullopt}, {}, {}});
    return;
  }
  release(h.job);
}

void SwitchDataPlane::handle_from_parent(const PacketView& v, Endpoint from) {
  const Header& h = v.h;
  if (!cfg_.parent.valid() || from != cfg_.parent) return drop(nullptr, Reason::wrong_source);
  Job* j = find(h.job);
  if (!j) return drop(nullptr, Reason::unknown_job);
  Job& J = *j;
  ++J.c.packets_in;
  J.c.bytes_in += proto::kHeaderBytes + v.payload.size();
  if (!J.has_parent()) return drop(j, Reason::unexpected);
  switch (h.type) {
    case PacketType::join_ack: {
      auto info = proto::read_join_info(v.payload);
      // Our lane l joins the parent's lane l: a parent answering from another lane, or with
      // fewer lanes than ours while we are beyond them, is misconfigured.
      const bool fits = info.slot_elems != 0 && info.lane == cfg_.lane;
      // A live resize: the answer to the join we sent once our members drained.
      if (J.rejoining && h.chunk == J.parent_join_nonce) {
        if (!fits) return fail_job(J, Reason::mismatch);
        if (info.group != 0) return fail_job(J, Reason::unsupported);
        return follow_parent(J, info, h.epoch, h.aux);
      }
      // Only the answer to our current join attempt counts (a late one is ignored).
      if (J.parent_joined || h.chunk != J.parent_join_nonce) return;
      // After a live resize here the parent's size is the tree's: a leaf that moved while
      // nobody streamed through it (at once) takes the parent's at its first join (nobody
      // streams yet: its members wait for this answer).
      if (info.slots != J.spec.slots && info.slots != 0 && (J.prev_epoch != 0 || J.resizing) &&
          take_slots(J, info.slots)) {
        init_copies(J);
        J.resizing = J.resize_known = false;
        J.resize_to = 0;
      }
      if (info.slots != J.spec.slots || !fits) return fail_job(J, Reason::mismatch);
      // A leaf switch does not join groups: a parent that would send it results by multicast
      // only is misconfigured (between switches everything is unicast; PROTOCOL.md).
      if (info.group != 0) return fail_job(J, Reason::unsupported);
      J.parent_joined = true;
      J.parent_epoch = h.epoch;
      J.parent_info = info;
      for (auto& m : J.members)
        if (m.joined && !m.left) send_join_ack(J, m);
      return;
    }
    case PacketType::result: {
      if (!J.parent_joined || h.epoch != J.parent_epoch) return drop(j, Reason::stale_epoch);
      if (h.slot >= J.spec.slots || h.chunk % J.spec.slots != h.slot)
        return drop(j, Reason::bad_slot);
      if (std::size_t(h.count) * proto::elem_size(h.elem) > slot_bytes())
        return drop(j, Reason::too_large);
      const std::uint32_t idx = J.slot_of[h.slot] * 2 + ((h.chunk / J.spec.slots) & 1);
      Copy& cp = copies_[idx];
      if (cp.seq != h.chunk) return drop(j, Reason::stale_chunk);
      if (cp.st & kComplete) {
        ++c_.duplicates;
        ++J.c.duplicates;
        return;
      }
      if (!(cp.st & kAwaitParent)) return drop(j, Reason::unexpected);
      if (h.flags & proto::flag::elided) {
        cp.st &= std::uint8_t(~kHasData);
      } else if (h.elem != ElemType::none) {
        std::memcpy(writable_cells(idx), v.payload.data(), v.payload.size());
        cp.elem = h.elem;
        cp.op = h.op;
        cp.count = h.count;
        cp.st |= kHasData;
      }
      if (h.flags & proto::flag::overflow) cp.st |= kOverflow;
      cp.events = proto::header_events(h);  // the whole tree's (ours included)
      if ((h.flags & proto::flag::resize) && !J.resize_known) {
        // The root resizes the tree: its boundary, passed on in our results to our members
        // (send_result). We follow even before our own Resize came (the size is the root's).
        if (!J.resizing) start_following(J);
        J.resize_known = true;
        J.resize_at = h.chunk + proto::resize_distance(h.aux);
      }
      cp.st = std::uint8_t((cp.st & ~kAwaitParent) | kComplete);
      ++c_.results;
      ++J.c.results;
      return replicate(J, cp, idx);
    }
    case PacketType::nack: {
      const auto about = PacketType(h.aux & 0xFF);
      if (about == PacketType::leave) return;
      if (about == PacketType::join) {
        // Before the parent admitted the job: not fatal, the members' joins retry.
        if (J.parent_joined || h.reason == Reason::unknown_job) return;
        return fail_job(J, h.reason);
      }
      // Refusals of packets sent under an older join of the parent are late: ignore them.
      if (!J.parent_joined) return;
      if (h.reason == Reason::stale_epoch ? h.epoch == J.parent_epoch : h.epoch != J.parent_epoch)
        return;
      if (h.reason == Reason::missing) {  // our upward packet was lost: send it again
        const std::uint32_t S = J.spec.slots;
        if (h.slot >= S || h.chunk % S != h.slot) return drop(j, Reason::bad_slot);
        const std::uint32_t idx = J.slot_of[h.slot] * 2 + ((h.chunk / S) & 1);
        Copy& cp = copies_[idx];
        if (cp.seq == h.chunk && (cp.st & kAwaitParent)) forward_up(J, cp, idx, true);
        return;
      }
      return fail_job(J, h.reason);
    }
    case PacketType::pending:
    case PacketType::leave_ack:
      return;
    default:
      return drop(j, Reason::unexpected);
  }
}

void SwitchDataPlane::handle_control(const PacketView& v, std::span<const std::byte> bytes,
                                     Endpoint from, Nanos now) {
  const Header& h = v.h;
  if (!cfg_.control_key) return drop(nullptr, Reason::control_refused);
  // Sealed under the control key, fresh and never seen (docs/PROTOCOL.md "Control plane"):
  // checked before anything else; a packet that fails is dropped, counted and never answered.
  if (!v.sealed) return drop(nullptr, Reason::unauthenticated);
  const auto wall = std::uint64_t(now + wall_offset_);
  switch (control_replay_.open(*cfg_.control_key, bytes, wall)) {
    case proto::auth::Verdict::ok: break;
    case proto::auth::Verdict::bad_tag: return drop(nullptr, Reason::unauthenticated);
    case proto::auth::Verdict::replayed:
    case proto::auth::Verdict::stale: return drop(nullptr, Reason::replayed);
    case proto::auth::Verdict::busy: return drop(nullptr, Reason::control_refused);
  }
  // The fields that carried the key in clear before packets were sealed are reserved: zero.
  const bool is_release = h.type == PacketType::release;
  const auto a = proto::read_admit_info(v.payload);
  if (is_release ? proto::load_u64(v.payload.data()) != 0 : (a.key != 0 || a.reserved != 0)) {
    drop(nullptr, Reason::bad_field);
    return control_answer(from, h, PacketType::nack, Reason::bad_field);
  }
  if (cfg_.external_control) {  // the daemon applies it on every lane, then answers
    ControlEvent e;
    e.req = h;
    e.from = from;
    if (is_release) {
      e.kind = ControlEvent::Kind::release;
      e.spec.job = h.job;
    } else {
      e.kind = ControlEvent::Kind::admit;
      e.spec = JobSpec{h.job, a.members, a.slots, a.parent_member, std::nullopt};
    }
    control_.push_back(e);
    return;
  }
  if (is_release) {
    release(h.job);
    return control_answer(from, h, PacketType::release_ack, Reason::ok);
  }
  JobSpec spec{h.job, a.members, a.slots, a.parent_member, std::nullopt};
  Reason r = admit(spec, now, true);
  if (r != Reason::ok) drop(nullptr, r);
  control_answer(from, h, r == Reason::ok ? PacketType::admit_ack : PacketType::nack, r);
}

void SwitchDataPlane::control_answer(Endpoint to, const Header& req, PacketType t, Reason r) {
  if (!control_mac_) return;
  Header h = reply_header(find(req.job), t, req);
  if (t == PacketType::nack) {
    h.reason = r;
    h.aux = std::uint32_t(req.type);
  }
  std::byte* p = out_.reserve(proto::kHeaderBytes + proto::kAuthTrailerBytes);
  proto::encode_header(h, p);
  const std::size_t size = proto::auth::seal(*control_mac_, seq_++, p, proto::kHeaderBytes);
  ++c_.packets_out;
  c_.bytes_out += size;
  out_.commit(to, size);
}

void SwitchDataPlane::answer_control(const ControlEvent& e, Reason r) {
  if (e.kind == ControlEvent::Kind::all_left) return;
  if (r != Reason::ok) drop(nullptr, r);
  control_answer(e.from, e.req,
                 r != Reason::ok ? PacketType::nack
                 : e.kind == ControlEvent::Kind::admit ? PacketType::admit_ack
                                                       : PacketType::release_ack,
                 r);
}

void SwitchDataPlane::on_tick(Nanos now) {
  now_ = now;
  if (cfg_.idle_timeout <= 0 || cfg_.external_control) return;
  std::vector<std::uint32_t> expired;
  for (auto& [id, j] : jobs_)
    if (j.dynamic && now - j.last_active > cfg_.idle_timeout) expired.push_back(id);
  for (auto id : expired) expire(id);
}

std::optional<std::vector<std::uint32_t>> SwitchDataPlane::allocate(std::uint32_t n, std::uint32_t job) {
  // First fit of a contiguous run; else any free slots (a pool fragmented by live resizes:
  // the free slots, not the longest run, bound what can be admitted).
  std::vector<std::uint32_t> got;
  std::uint32_t run = 0, base = 0;
  for (std::uint32_t s = 0; s < cfg_.slots && run < n; ++s) {
    if (owner_[s] != 0) {
      run = 0;
      continue;
    }
    if (run == 0) base = s;
    ++run;
  }
  if (run == n) {
    for (std::uint32_t s = base; s < base + n; ++s) got.push_back(s);
  } else {
    for (std::uint32_t s = 0; s < cfg_.slots && got.size() < n; ++s)
      if (owner_[s] == 0) got.push_back(s);
    if (got.size() < n) return std::nullopt;
  }
  for (std::uint32_t s : got) owner_[s] = job + 1;
  return got;
}

SwitchSnapshot SwitchDataPlane::snapshot() const {
  SwitchSnapshot s;
  s.counters = c_;
  s.slots_total = cfg_.slots;
  s.slot_elems = cfg_.slot_elems;
  s.incarnation = cfg_.incarnation;
  for (const auto& [id, j] : jobs_) {
    JobSnapshot js;
    js.spec = j.spec;
    js.dynamic = j.dynamic;
    js.last_active = j.last_active;
    js.epoch = j.epoch;
    js.slot_base = j.slot_of.empty() ? 0 : j.slot_of.front();
    js.resize_to = j.resizing ? j.resize_to : 0;
    for (std::uint32_t slot : j.slot_of)
      for (std::uint32_t i = slot * 2; i < slot * 2 + 2; ++i)
        if (!(copies_[i].st & kComplete)) ++js.busy_copies;
    js.joined = std::uint16_t(std::count_if(j.members.begin(), j.members.end(),
                                            [](const Member& m) { return m.joined && !m.left; }));
    js.parent_joined = j.parent_joined;
    js.failed = j.failed;
    js.fail_reason = j.fail_reason;
    js.counters = j.c;
    s.slots_allocated += j.spec.slots;
    s.jobs.push_back(js);
  }
  std::sort(s.jobs.begin(), s.jobs.end(),
            [](const JobSnapshot& a, const JobSnapshot& b) { return a.spec.job < b.spec.job; });
  return s;
}

std::string Endpoint::str() const {
  if (!valid()) return "none";
  if (!is_ipv4()) return "node" + std::to_string(id - 1);
  std::uint32_t a = ipv4_addr();
  return std::to_string(a >> 24) + "." + std::to_string((a >> 16) & 255) + "." +
         std::to_string((a >> 8) & 255) + "." + std::to_string(a & 255) + ":" +
         std::to_string(port());
}

}  // namespace inc::sw
