#include "src/proto/packet.hpp"

#include <cstring>

namespace inc::proto {

std::string_view name(PacketType t) noexcept {
  constexpr std::string_view names[] = {"?",        "join",      "join_ack",  "data",   "result",
                                        "nack",     "pending",   "leave",     "leave_ack",
                                        "admit",    "admit_ack", "release",   "release_ack"};
  auto i = static_cast<unsigned>(t);
  return i <= kMaxPacketType ? names[i] : std::string_view("?");
}

std::string_view name(ElemType t) noexcept {
  constexpr std::string_view names[] = {"none", "raw", "i32", "f32", "f16", "bf16",
                                        "f16w", "bf16w", "i8", "u8", "i8w", "u8w",
                                        "e4m3", "e5m2", "i4", "e4m3w", "e5m2w", "i4w",
                                        "mxe4m3", "mxe5m2", "mxint8", "mxfp4", "mxe4m3w",
                                        "mxe5m2w", "mxint8w", "mxfp4w", "mxe2m3", "mxe3m2",
                                        "mxe2m3w", "mxe3m2w"};
  static_assert(sizeof(names) / sizeof(names[0]) == kMaxElemType + 1);
  auto i = static_cast<unsigned>(t);
  return i <= kMaxElemType ? names[i] : std::string_view("?");
}

std::string_view name(WireOp op) noexcept {
  constexpr std::string_view names[] = {"none", "sum", "max", "min", "copy", "sum_widen"};
  auto i = static_cast<unsigned>(op);
  return i <= kMaxWireOp ? names[i] : std::string_view("?");
}

std::string_view name(Reason r) noexcept {
  constexpr std::string_view names[] = {
      "ok",          "too_short",     "bad_magic",       "bad_version", "bad_type",
      "bad_flags",   "bad_elem_type", "bad_op",          "length_mismatch",
      "too_large",   "bad_field",     "unknown_job",     "stale_epoch", "bad_member",
      "bad_slot",    "unsupported",   "not_joined",      "stale_chunk", "out_of_window",
      "mismatch",    "job_failed",    "wrong_source",    "control_refused",
      "no_slots",    "job_exists",    "unexpected",  "missing",
      "unauthenticated", "replayed"};
  static_assert(sizeof(names) / sizeof(names[0]) == kNumReasons);
  auto i = static_cast<unsigned>(r);
  return i < kNumReasons ? names[i] : std::string_view("?");
}

std::uint32_t required_cap(ElemType elem, WireOp op) noexcept {
  switch (elem) {
    case ElemType::none: return op == WireOp::none ? cap::raw_copy : 0;
    case ElemType::raw: return op == WireOp::copy ? cap::raw_copy : 0;
    case ElemType::i32:
      if (op == WireOp::sum) return cap::i32_sum;
      if (op == WireOp::max || op == WireOp::min) return cap::i32_minmax;
      return 0;
    case ElemType::f32:
      if (op == WireOp::sum) return cap::f32_sum;
      if (op == WireOp::max || op == WireOp::min) return cap::f32_minmax;
      return 0;
    case ElemType::f16:
    case ElemType::bf16:
      if (op == WireOp::sum) return cap::h16_sum;
      if (op == WireOp::sum_widen) return cap::h16_widen;
      if (op == WireOp::max || op == WireOp::min) return cap::h16_minmax;
      return 0;
    case ElemType::f16w:
    case ElemType::bf16w: return op == WireOp::sum_widen ? cap::h16_widen : 0;
    case ElemType::i8:
    case ElemType::u8:
      if (op == WireOp::sum || op == WireOp::sum_widen) return cap::i8_sum;
      if (op == WireOp::max || op == WireOp::min) return cap::i8_minmax;
      return 0;
    case ElemType::i8w:
    case ElemType::u8w: return op == WireOp::sum_widen ? cap::i8_sum : 0;
    case ElemType::e4m3:
    case ElemType::e5m2:
      if (op == WireOp::sum || op == WireOp::sum_widen) return cap::fp8_sum;
      if (op == WireOp::max || op == WireOp::min) return cap::fp8_minmax;
      return 0;
    case ElemType::e4m3w:
    case ElemType::e5m2w: return op == WireOp::sum_widen ? cap::fp8_sum : 0;
    case ElemType::i4:
      if (op == WireOp::sum || op == WireOp::sum_widen) return cap::i4_sum;
      if (op == WireOp::max || op == WireOp::min) return cap::i4_minmax;
      return 0;
    case ElemType::i4w: return op == WireOp::sum_widen ? cap::i4_sum : 0;
    case ElemType::mxe4m3:
    case ElemType::mxe5m2:
    case ElemType::mxint8:
    case ElemType::mxfp4:
    case ElemType::mxe4m3w:
    case ElemType::mxe5m2w:
    case ElemType::mxint8w:
    case ElemType::mxfp4w: return op == WireOp::sum || op == WireOp::sum_widen ? cap::mx_sum : 0;
    case ElemType::mxe2m3:
    case ElemType::mxe3m2:
    case ElemType::mxe2m3w:
    case ElemType::mxe3m2w: return op == WireOp::sum || op == WireOp::sum_widen ? cap::mx6_sum : 0;
  }
  return 0;
}

void encode_header(const Header& h, std::byte* p) noexcept {
  store_u32(p + 0, kMagic);
  p[4] = std::byte(h.version);
  p[5] = std::byte(h.type);
  p[6] = std::byte(h.flags);
  p[7] = std::byte(h.elem);
  p[8] = std::byte(h.op);
  p[9] = std::byte(h.reason);
  store_u16(p + 10, h.member);
  store_u32(p + 12, h.job);
  store_u32(p + 16, h.epoch);
  store_u32(p + 20, h.chunk);
  store_u16(p + 24, h.slot);
  store_u16(p + 26, h.count);
  store_u32(p + 28, h.aux);
}

std::size_t encode(const Header& h, std::span<const std::byte> payload,
                   std::span<std::byte> out) noexcept {
  if (payload.size() > kMaxPayloadBytes || out.size() < kHeaderBytes + payload.size()) return 0;
  encode_header(h, out.data());
  if (!payload.empty()) std::memcpy(out.data() + kHeaderBytes, payload.data(), payload.size());
  return kHeaderBytes + payload.size();
}

namespace {

// Element type / operation pairing shared by data and result.
Reason check_elem_op(ElemType e, WireOp op) noexcept {
  switch (e) {
    case ElemType::none: return op == WireOp::none ? Reason::ok : Reason::bad_op;
    case ElemType::raw: return op == WireOp::copy ? Reason::ok : Reason::bad_op;
    case ElemType::i32:
    case ElemType::f32:
      return (op == WireOp::sum || op == WireOp::max || op == WireOp::min) ? Reason::ok
                                                                         : Reason::bad_op;
    case ElemType::f16:
    case ElemType::bf16:
    case ElemType::i8:
    case ElemType::u8:
    case ElemType::e4m3:
    case ElemType::e5m2:
    case ElemType::i4:
      return (op == WireOp::sum || op == WireOp::max || op == WireOp::min ||
              op == WireOp::sum_widen)
                 ? Reason::ok
                 : Reason::bad_op;
    case ElemType::f16w:
    case ElemType::bf16w:
    case ElemType::i8w:
    case ElemType::u8w:
    case ElemType::e4m3w:
    case ElemType::e5m2w:
    case ElemType::i4w: return op == WireOp::sum_widen ? Reason::ok : Reason::bad_op;
    // MX: sums only. A partial sum travels as mx*w under sum_widen, and re-quantised (narrow
    // type) under sum; a one-member switch passes its member's narrow blocks on under either.
    case ElemType::mxe4m3:
    case ElemType::mxe5m2:
    case ElemType::mxint8:
    case ElemType::mxfp4:
    case ElemType::mxe2m3:
    case ElemType::mxe3m2: return op == WireOp::sum || op == WireOp::sum_widen ? Reason::ok : Reason::bad_op;
    case ElemType::mxe2m3w:
    case ElemType::mxe3m2w:
    case ElemType::mxe4m3w:
    case ElemType::mxe5m2w:
    case ElemType::mxint8w:
    case ElemType::mxfp4w: return op == WireOp::sum_widen ? Reason::ok : Reason::bad_op;
  }
  return Reason::bad_elem_type;
}

// A header-only packet: no element type, no payload.
Reason check_empty(const Header& h) noexcept {
  if (h.elem != ElemType::none) return Reason::bad_elem_type;
  if (h.op != WireOp::none) return Reason::bad_op;
  if (h.count != 0) return Reason::length_mismatch;
  return Reason::ok;
}

// A control payload of exactly `bytes` raw bytes.
Reason check_raw(const Header& h, std::size_t bytes) noexcept {
  if (h.elem != ElemType::raw) return Reason::bad_elem_type;
  if (h.op != WireOp::none) return Reason::bad_op;
  if (h.count != bytes) return Reason::length_mismatch;
  return Reason::ok;
}

}  // namespace

Reason decode(std::span<const std::byte> b, PacketView& out) noexcept {
  if (b.size() < kHeaderBytes) return Reason::too_short;
  const std::byte* p = b.data();
  if (load_u32(p) != kMagic) return Reason::bad_magic;
  Header& h = out.h;
  h.version = std::uint8_t(p[4]);
  if (h.version != kVersion) return Reason::bad_version;
  auto type = std::uint8_t(p[5]);
  if (type == 0 || type > kMaxPacketType) return Reason::bad_type;
  h.type = PacketType(type);
  h.flags = std::uint8_t(p[6]);
  if (h.flags & ~flag::known) return Reason::bad_flags;
  auto elem = std::uint8_t(p[7]);
  if (elem > kMaxElemType) return Reason::bad_elem_type;
  h.elem = ElemType(elem);
  auto op = std::uint8_t(p[8]);
  if (op > kMaxWireOp) return Reason::bad_op;
  h.op = WireOp(op);
  auto reason = std::uint8_t(p[9]);
  if (reason >= kNumReasons) return Reason::bad_field;
  h.reason = Reason(reason);
  h.member = load_u16(p + 10);
  h.job = load_u32(p + 12);
  h.epoch = load_u32(p + 16);
  h.chunk = load_u32(p + 20);
  h.slot = load_u16(p + 24);
  h.count = load_u16(p + 26);
  h.aux = load_u32(p + 28);
  out.sealed = (h.flags & flag::auth) != 0;
  const std::size_t trailer = out.sealed ? kAuthTrailerBytes : 0;
  if (b.size() < kHeaderBytes + trailer) return Reason::too_short;
  std::size_t payload = b.size() - kHeaderBytes - trailer;
  if (payload > kMaxPayloadBytes) return Reason::too_large;
  // Element type `none` has size 0; for control payloads it is raw (1 byte per count).
  if (std::size_t(h.count) * elem_size(h.elem) != payload) return Reason::length_mismatch;
  if (h.elem == ElemType::none && h.count != 0) return Reason::length_mismatch;
  out.payload = b.subspan(kHeaderBytes, payload);
  if (h.type != PacketType::nack && h.reason != Reason::ok) return Reason::bad_field;

  auto allow_flags = [&](std::uint8_t allowed) {  // auth goes with every type
    return (h.flags & ~(allowed | flag::auth)) ? Reason::bad_flags : Reason::ok;
  };
  Reason r = Reason::ok;
  switch (h.type) {
    case PacketType::join:  // resize: a join again after draining to a live resize's boundary
      if ((r = allow_flags(flag::retransmit | flag::resize)) != Reason::ok) return r;
      return check_empty(h);
    case PacketType::join_ack: {
      if ((r = allow_flags(0)) != Reason::ok) return r;
      if ((r = check_raw(h, kJoinInfoBytes)) != Reason::ok) return r;
      // Lanes: at least one, the answering lane among them; a group is none or multicast.
      const JoinInfo j = read_join_info(out.payload);
      if (j.lanes == 0 || j.lanes > kMaxLanes || j.lane >= j.lanes ||
          (j.group != 0 && !is_multicast_group(j.group)))
        return Reason::bad_field;
      return Reason::ok;
    }
    case PacketType::data:
      if ((r = allow_flags(flag::want_result | flag::retransmit | flag::overflow | flag::probe)) !=
          Reason::ok)
        return r;
      if (h.flags & flag::probe) {  // a question, never a contribution: a bare header
        if (!(h.flags & flag::retransmit) || (h.flags & flag::overflow)) return Reason::bad_flags;
        if (h.aux != 0) return Reason::bad_field;
        return check_empty(h);
      }
      if (h.aux & 0xFF) return Reason::bad_field;  // aux: events << 8 only
      if ((r = check_elem_op(h.elem, h.op)) != Reason::ok) return r;
      if (h.elem != ElemType::none && h.count == 0) return Reason::length_mismatch;
      return Reason::ok;
    case PacketType::result:
      if ((r = allow_flags(flag::overflow | flag::elided | flag::resize)) != Reason::ok) return r;
      if ((r = check_elem_op(h.elem, h.op)) != Reason::ok) return r;
      if ((h.flags & flag::elided) && h.count != 0) return Reason::length_mismatch;
      if (h.aux & 0xFE) return Reason::bad_field;  // aux: resent | events << 8 (| distance, resize)
      if ((h.flags & flag::resize) && resize_distance(h.aux) == 0) return Reason::bad_field;
      return Reason::ok;
    case PacketType::nack:
      if ((r = allow_flags(0)) != Reason::ok) return r;
      if (h.reason == Reason::ok) return Reason::bad_field;
      return check_empty(h);
    case PacketType::pending:
      if ((r = allow_flags(flag::awaiting_parent)) != Reason::ok) return r;
      // aux: the members at the switch; the bitmap has one u64 word per 64 of them.
      if (h.aux > kMaxMembers) return Reason::bad_field;
      return check_raw(h, pending_bytes(h.aux));
    case PacketType::admit:
      if ((r = allow_flags(0)) != Reason::ok) return r;
      return check_raw(h, kAdmitInfoBytes);
    case PacketType::release:
      if ((r = allow_flags(0)) != Reason::ok) return r;
      return check_raw(h, kReleaseInfoBytes);
    case PacketType::leave:
    case PacketType::leave_ack:
    case PacketType::admit_ack:
    case PacketType::release_ack:
      if ((r = allow_flags(0)) != Reason::ok) return r;
      return check_empty(h);
  }
  return Reason::bad_type;
}

Reason validate(const Header& h, const JobLimits& job) noexcept {
  if (h.job != job.job) return Reason::unknown_job;
  if (h.member >= job.members) return Reason::bad_member;
  if (h.type == PacketType::join) return Reason::ok;
  if (h.epoch != job.epoch) return Reason::stale_epoch;
  if (h.type != PacketType::data) return Reason::ok;
  if (job.slots == 0 || h.slot >= job.slots || h.chunk % job.slots != h.slot)
    return Reason::bad_slot;
  if (std::size_t(h.count) * elem_size(h.elem) > job.slot_bytes) return Reason::too_large;
  return Reason::ok;
}

void write_join_info(const JoinInfo& j, std::byte* p) noexcept {
  store_u32(p, j.slots);
  store_u32(p + 4, j.slot_elems);
  store_u32(p + 8, j.members);
  store_u32(p + 12, j.caps);
  store_u16(p + 16, j.lanes);
  store_u16(p + 18, j.lane);
  store_u32(p + 20, j.group);
}
JoinInfo read_join_info(std::span<const std::byte> p) noexcept {
  JoinInfo j;
  if (p.size() < kJoinInfoBytes) return j;
  j.slots = load_u32(p.data());
  j.slot_elems = load_u32(p.data() + 4);
  j.members = load_u32(p.data() + 8);
  j.caps = load_u32(p.data() + 12);
  j.lanes = load_u16(p.data() + 16);
  j.lane = load_u16(p.data() + 18);
  j.group = load_u32(p.data() + 20);
  return j;
}
void write_admit_info(const AdmitInfo& a, std::byte* p) noexcept {
  store_u64(p, a.key);
  store_u32(p + 8, a.slots);
  store_u16(p + 12, a.members);
  store_u16(p + 14, a.parent_member);
  store_u64(p + 16, a.reserved);
}
AdmitInfo read_admit_info(std::span<const std::byte> p) noexcept {
  AdmitInfo a;
  if (p.size() < kAdmitInfoBytes) return a;
  a.key = load_u64(p.data());
  a.slots = load_u32(p.data() + 8);
  a.members = load_u16(p.data() + 12);
  a.parent_member = load_u16(p.data() + 14);
  a.reserved = load_u64(p.data() + 16);
  return a;
}

}  // namespace inc::proto
