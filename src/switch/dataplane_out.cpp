// SwitchDataPlane's output: packets it emits (sealed for keyed jobs), nacks, join acks, pending
// answers, results to members or to the job's multicast group, contributions forwarded up the
// tree, and a job's failure. The input side and admission are in dataplane.cpp.
#include <algorithm>
#include <bit>
#include <cstring>

#include "src/switch/arith.hpp"
#include "src/switch/dataplane.hpp"

namespace inc::sw {

using proto::ElemType;
using proto::Header;
using proto::PacketType;
using proto::PacketView;
using proto::Reason;
using proto::WireOp;


std::size_t SwitchDataPlane::emit(Job* j, Endpoint to, std::size_t size) {
  // Every packet of a keyed job is sealed (written at the last reserve: room for the trailer).
  if (j && j->mac) size = proto::auth::seal(*j->mac, seq_++, out_.reserve(size + proto::kAuthTrailerBytes), size);
  ++c_.packets_out;
  c_.bytes_out += size;
  if (j) {
    ++j->c.packets_out;
    j->c.bytes_out += size;
  }
  return out_.commit(to, size);
}

// The header written at the last reserve(), followed by `payload` bytes of copy idx's cells,
// which the outbox references instead of copying: writable_cells(idx) keeps them unchanged
// until the driver sent them.
std::size_t SwitchDataPlane::emit_cells(Job* j, Endpoint to, std::uint32_t idx,
                                        std::size_t payload) {
  // A keyed job's packet is sealed over header + the slot's cells: the trailer follows the
  // referenced payload on the wire (written after the header, at the last reserve).
  const std::size_t tail = j && j->mac ? proto::kAuthTrailerBytes : 0;
  if (tail) {
    std::byte* head = out_.reserve(proto::kHeaderBytes + tail);
    proto::auth::seal_parts(*j->mac, seq_++, head, proto::kHeaderBytes, {cells(idx), payload},
                            head + proto::kHeaderBytes);
  }
  ++c_.packets_out;
  c_.bytes_out += proto::kHeaderBytes + payload + tail;
  if (j) {
    ++j->c.packets_out;
    j->c.bytes_out += proto::kHeaderBytes + payload + tail;
  }
  if (payload) ref_gen_[idx] = out_.generation();
  return out_.commit_ref(to, proto::kHeaderBytes, {cells(idx), payload}, idx, tail);
}

std::byte* SwitchDataPlane::writable_cells(std::uint32_t idx) {
  // Results or partials of this copy's previous use (or of this one, resent) that are still
  // queued go out as copies: the cells are about to change.
  if (ref_gen_[idx] == out_.generation()) {
    out_.materialize(idx);
    ref_gen_[idx] = 0;
  }
  return cells(idx);
}

void SwitchDataPlane::drop(Job* j, Reason r) {
  ++c_.drops;
  ++c_.drops_by_reason[static_cast<unsigned>(r)];
  if (j) ++j->c.drops;
}

Header SwitchDataPlane::reply_header(const Job* j, PacketType t, const Header& req) {
  Header h;
  h.type = t;
  h.member = req.member;
  h.job = req.job;
  h.epoch = j ? j->epoch : 0;
  h.chunk = req.chunk;
  h.slot = req.slot;
  return h;
}

void SwitchDataPlane::send_empty(Job* j, Endpoint to, PacketType t, const Header& req) {
  proto::encode_header(reply_header(j, t, req), out_.reserve(proto::kHeaderBytes));
  emit(j, to, proto::kHeaderBytes);
}

void SwitchDataPlane::nack(Job* j, Endpoint to, const Header& req, Reason r, std::uint32_t detail) {
  Header h = reply_header(j, PacketType::nack, req);
  h.reason = r;
  // The job's epoch when the switch knows the job, else the epoch the refused packet carried:
  // either way the receiver can tell a refusal of its current packets from a late one.
  h.epoch = j ? j->epoch : req.epoch;
  h.aux = std::uint32_t(req.type) | (detail << 8);
  proto::encode_header(h, out_.reserve(proto::kHeaderBytes));
  emit(j, to, proto::kHeaderBytes);
}

void SwitchDataPlane::send_join_ack(Job& j, const Member& m) {
  proto::JoinInfo info;
  info.slots = j.spec.slots;
  info.slot_elems = cfg_.slot_elems;
  info.members = j.spec.members;
  info.caps = cfg_.caps;
  info.lanes = cfg_.lanes;
  info.lane = cfg_.lane;
  info.group = j.spec.multicast.valid() ? j.spec.multicast.ipv4_addr() : 0;
  if (j.has_parent()) {
    info.slot_elems = std::min(info.slot_elems, j.parent_info.slot_elems);
    info.caps &= j.parent_info.caps;
    info.lanes = std::min(info.lanes, j.parent_info.lanes);  // the job uses the path's minimum
  }
  Header h;
  h.type = PacketType::join_ack;
  h.elem = ElemType::raw;
  h.job = j.spec.job;
  h.epoch = j.epoch;
  h.chunk = m.join_nonce;
  h.aux = j.stream_start;  // where this epoch's stream starts (a live resize's boundary, or 0)
  h.count = proto::kJoinInfoBytes;
  std::byte* p = out_.reserve(proto::kHeaderBytes + proto::kJoinInfoBytes);
  proto::encode_header(h, p);
  proto::write_join_info(info, p + proto::kHeaderBytes);
  emit(&j, m.ep, proto::kHeaderBytes + proto::kJoinInfoBytes);
}

void SwitchDataPlane::send_pending(Job& j, const Copy& cp, const Header& req, Endpoint to) {
  Header h;
  h.type = PacketType::pending;
  h.elem = ElemType::raw;
  h.flags = (cp.st & kAwaitParent) ? proto::flag::awaiting_parent : 0;
  h.member = req.member;
  h.job = j.spec.job;
  h.epoch = j.epoch;
  h.chunk = req.chunk;
  h.slot = req.slot;
  const std::size_t bytes = proto::pending_bytes(j.spec.members);
  h.count = std::uint16_t(bytes);
  h.aux = j.spec.members;
  std::byte* p = out_.reserve(proto::kHeaderBytes + bytes);
  proto::encode_header(h, p);
  proto::store_u64(p + proto::kHeaderBytes, cp.contrib);
  for (std::uint32_t w = 0; w < j.wide_words; ++w)
    proto::store_u64(p + proto::kHeaderBytes + 8 * (w + 1), wide_of(j, cp, kContrib)[w]);
  emit(&j, to, proto::kHeaderBytes + bytes);
}

namespace {
Header result_header(std::uint32_t job, std::uint32_t epoch, std::uint32_t chunk,
                     std::uint16_t slot) {
  Header h;
  h.type = PacketType::result;
  h.member = proto::kNoMember;
  h.job = job;
  h.epoch = epoch;
  h.chunk = chunk;
  h.slot = slot;
  return h;
}
}  // namespace

void SwitchDataPlane::send_result(Job& j, const Copy& cp, std::uint32_t idx, Endpoint to,
                                  bool want, bool resent) {
  Header h = result_header(j.spec.job, j.epoch, cp.seq, std::uint16_t(cp.seq % j.spec.slots));
  h.aux = proto::events_aux(cp.events) | (resent ? proto::kResultResent : 0);
  if (j.resizing && j.resize_known) {  // every result says where the mapping ends, until the members moved
    const std::int32_t d = proto::chunk_distance(j.resize_at, cp.seq);
    if (d > 0 && std::uint32_t(d) <= proto::kMaxResizeDistance) {
      h.flags |= proto::flag::resize;
      h.aux = proto::resize_aux(std::uint32_t(d), cp.events) | (resent ? proto::kResultResent : 0);
    }
  }
  h.elem = cp.elem;
  h.op = cp.op;
  if (cp.st & kOverflow) h.flags |= proto::flag::overflow;
  std::size_t payload = 0;
  if ((cp.st & kHasData) && want) {
    h.count = cp.count;
    payload = std::size_t(cp.count) * proto::elem_size(cp.elem);
  } else if (cp.elem != ElemType::none) {
    h.flags |= proto::flag::elided;
  }
  proto::encode_header(h, out_.reserve(proto::kHeaderBytes));
  emit_cells(&j, to, idx, payload);
}

void SwitchDataPlane::replicate(Job& j, const Copy& cp, std::uint32_t idx) {
  // A job with a group: if every member gets the same bytes (all or none want the payload; the
  // header and a keyed job's one seal carry nothing per member), one datagram to the group;
  // mixed wishes stay unicast (PROTOCOL.md, "Multicast results").
  if (j.spec.multicast.valid() && (full(j, cp, kWant) || empty(j, cp, kWant))) {
    send_result(j, cp, idx, j.spec.multicast, !empty(j, cp, kWant));
    ++c_.results_multicast;
    ++j.c.results_multicast;
    return;
  }
  // One encode per variant (with payload / elided), then the same bytes to every member.
  std::size_t with_data = SIZE_MAX, without = SIZE_MAX;
  for (std::uint16_t m = 0; m < j.spec.members; ++m) {
    bool want = has(j, cp, kWant, m);
    std::size_t& e = want ? with_data : without;
    const Endpoint to = j.members[m].ep;
    if (e == SIZE_MAX) {
      send_result(j, cp, idx, to, want);
      e = out_.entries().size() - 1;
    } else {
      out_.repeat(e, to);
      const auto& ent = out_.entries()[e];
      ++c_.packets_out;
      c_.bytes_out += ent.total();
      ++j.c.packets_out;
      j.c.bytes_out += ent.total();
    }
  }
}

void SwitchDataPlane::forward_up(Job& j, const Copy& cp, std::uint32_t idx, bool resend) {
  Header h;
  h.type = PacketType::data;
  h.member = j.spec.parent_member;
  h.job = j.spec.job;
  h.epoch = j.parent_epoch;
  h.chunk = cp.seq;
  h.slot = std::uint16_t(cp.seq % j.spec.slots);
  if (!empty(j, cp, kWant)) h.flags |= proto::flag::want_result;
  if (cp.st & kOverflow) h.flags |= proto::flag::overflow;
  h.aux = proto::events_aux(cp.events);  // this subtree's events, for the parent to add
  if (resend) h.flags |= proto::flag::retransmit;
  std::size_t payload = 0;
  if (cp.st & kHasData) {
    h.elem = cp.elem;
    h.op = cp.op;
    h.count = cp.count;
    payload = std::size_t(cp.count) * proto::elem_size(cp.elem);
  }
  proto::encode_header(h, out_.reserve(proto::kHeaderBytes));
  emit_cells(&j, cfg_.parent, idx, payload);
  if (resend) {
    ++c_.upstream_resent;
    ++j.c.upstream_resent;
  }
}

void SwitchDataPlane::complete_local(Job& j, Copy& cp, std::uint32_t idx) {
  ++c_.aggregations;
  ++j.c.aggregations;
  clear(j, cp, kSignalled);  // nobody misses anything here now; from here on it counts for the next use
  if (j.has_parent()) {
    // MX under `sum` (narrow): every aggregating hop re-quantises its partial sum to MX.
    if (cp.op == WireOp::sum && proto::is_mx(proto::narrow_of(cp.elem)) &&
        proto::narrow_of(cp.elem) != cp.elem) {
      std::uint32_t ev = 0;  // (MX re-quantisation saturates: it counts nothing)
      cp.elem = narrow_in_place(cp.elem, writable_cells(idx), cp.count, ev);
    }
    cp.st |= kAwaitParent;
    forward_up(j, cp, idx, false);
  } else {
    // The root of a sum_widen rounds (f16/bf16) or wraps (i8/u8, flagging a total that does
    // not fit) the accumulators once; results go down narrow.
    if (proto::narrow_of(cp.elem) != cp.elem) {
      std::uint32_t ev = 0;
      const bool flag = raises_overflow_flag(proto::narrow_of(cp.elem));
      cp.elem = narrow_in_place(cp.elem, writable_cells(idx), cp.count, ev);
      if (ev && flag) cp.st |= kOverflow;
      cp.events = proto::add_events(cp.events, ev);
    }
    cp.st |= kComplete;
    ++c_.results;
    ++j.c.results;
    replicate(j, cp, idx);
  }
}

void SwitchDataPlane::fail_job(Job& j, Reason r) {
  if (j.failed) return;
  j.failed = true;
  j.fail_reason = r;
  ++c_.jobs_failed;
  Header req;
  req.type = PacketType::data;
  req.job = j.spec.job;
  for (std::uint16_t m = 0; m < j.spec.members; ++m)
    if (j.members[m].joined) {
      req.member = m;
      nack(&j, j.members[m].ep, req, Reason::job_failed, std::uint32_t(r));
    }
}

}  // namespace inc::sw
