// INC wire format, version 3: one 32-byte little-endian header followed by a payload, and for
// packets of a keyed job a 40-byte authentication trailer (src/proto/auth.hpp).
// See docs/PROTOCOL.md for the field table, the state machines and the versioning rule.
//
// Every byte from the network is untrusted: `decode` checks everything that can be checked
// without switch state (length, magic, version, type, flags, element type, operation,
// count vs length, per-type payload shape); `validate` checks a decoded header against a
// job (job id, epoch, member id, slot range, chunk-to-slot mapping, slot capacity).
// Both return a `Reason`; the switch counts drops by reason.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace inc::proto {

static_assert(std::endian::native == std::endian::little,
              "payload elements are copied as-is; a big-endian port must byte-swap them");

inline constexpr std::uint32_t kMagic = 0x21434E49;  // bytes 'I' 'N' 'C' '!'
inline constexpr std::uint8_t kVersion = 3;  // 2: JoinInfo carries lanes; 3: flag auth + trailer
inline constexpr std::size_t kHeaderBytes = 32;
// Largest UDP/IPv4 datagram payload is 65507 bytes; keep payloads a multiple of 4.
inline constexpr std::size_t kMaxPayloadBytes = 65432;  // room for the auth trailer
inline constexpr std::size_t kAuthTrailerBytes = 40;  // flag auth: src/proto/auth.hpp
inline constexpr std::size_t kMaxPacketBytes = kHeaderBytes + kMaxPayloadBytes + kAuthTrailerBytes;  // 65504
inline constexpr std::uint16_t kNoMember = 0xFFFF;
// Fan-in of one switch per job: the radix of a 102.4 Tb/s switch (1024 x 100G SerDes lanes).
// Member ids travel in the 16-bit `member` field; the switch keeps a job's member sets in 64
// bits per copy plus ceil(members / 64) - 1 words sized at admission (docs/SWITCH.md).
inline constexpr std::size_t kMaxMembers = 1024;

enum class PacketType : std::uint8_t {
  join = 1,         // member -> switch: attach to a job (aux = session)
  join_ack = 2,     // switch -> member: epoch + JoinInfo payload
  data = 3,         // member -> switch: one contribution to one chunk
  result = 4,       // switch -> member: the aggregate of one chunk
  nack = 5,         // switch -> member: refusal with a Reason (aux = offending type | detail<<8)
  pending = 6,      // switch -> member: answer to a retransmission of an incomplete chunk
  leave = 7,        // member -> switch: detach
  leave_ack = 8,    // switch -> member
  admit = 9,        // controller -> switch: reserve slots for a job (AdmitInfo payload)
  admit_ack = 10,   // switch -> controller
  release = 11,     // controller -> switch: free a job's slots (ReleaseInfo payload)
  release_ack = 12  // switch -> controller
};
inline constexpr std::uint8_t kMaxPacketType = 12;

// Element types the switch can see. `raw` is opaque bytes: replication only, never arithmetic.
// f16/bf16 are IEEE binary16 / bfloat16 (2 bytes). f16w/bf16w are partial sums of an f16/bf16
// reduction widened to an f32 accumulator (4 bytes each): they travel only between switches
// under `sum_widen` and are rounded to f16/bf16 once, at the root (docs/NUMERICS.md).
// i8/u8 (1 byte) sums wrap modulo 2^8 as on the hosts; i8w/u8w are their i32 accumulators
// under sum_widen (exact up to 2^23 members), narrowed (wrapping) at the root.
// e4m3/e5m2 (1 byte) are OCP fp8, added as the hosts add them (f32, one rounding per add, IEEE
// overflow); e4m3w/e5m2w their f32 accumulators under sum_widen. i4 is one byte holding two
// signed 4-bit elements (element 2k in the low nibble; `count` counts bytes), wrapping modulo
// 16; i4w its accumulator: two i16 per byte (4 bytes; the low element first).
// MX blocks (OCP Microscaling v1.0; `count` counts blocks, never split across datagrams): one
// E8M0 scale byte then 32 element codes, one per byte (mxe4m3, mxe5m2, mxint8: 33 bytes), or
// packed two per byte, element 2k in the low nibble (mxfp4: 17 bytes). A switch adding two or
// more inputs decodes them into 32 f32 accumulators (mx*w, 128 bytes), added in f32; `sum`
// re-quantises the partial sums at every aggregating hop, `sum_widen` once at the root.
// mxe2m3/mxe3m2 (MXFP6): the 32 six-bit codes packed four per three bytes, element k at bits
// 6k..6k+5 of the little-endian code bytes (25 bytes; numerics/mx_type.hpp's layout);
// mxe2m3w/mxe3m2w their f32 accumulators as for the other MX types.
enum class ElemType : std::uint8_t {
  none = 0, raw = 1, i32 = 2, f32 = 3, f16 = 4, bf16 = 5, f16w = 6, bf16w = 7,
  i8 = 8, u8 = 9, i8w = 10, u8w = 11,
  e4m3 = 12, e5m2 = 13, i4 = 14, e4m3w = 15, e5m2w = 16, i4w = 17,
  mxe4m3 = 18, mxe5m2 = 19, mxint8 = 20, mxfp4 = 21, mxe4m3w = 22, mxe5m2w = 23, mxint8w = 24,
  mxfp4w = 25, mxe2m3 = 26, mxe3m2 = 27, mxe2m3w = 28, mxe3m2w = 29
};
inline constexpr std::uint8_t kMaxElemType = 29;
inline constexpr std::size_t kMxBlockElems = 32;  // elements per MX block on the wire

// sum_widen: a sum whose first aggregating hop (a switch adding two or more inputs) widens the
// narrow inputs to their accumulator type (f16w/bf16w) and whose root rounds the result once.
// `sum` on f16/bf16 is the narrow policy: every switch keeps f16/bf16 cells and rounds each add.
enum class WireOp : std::uint8_t { none = 0, sum = 1, max = 2, min = 3, copy = 4, sum_widen = 5 };
inline constexpr std::uint8_t kMaxWireOp = 5;

// The narrow type a widened accumulator type stands for (f16w -> f16, bf16w -> bf16); any
// other type is its own.
constexpr ElemType narrow_of(ElemType t) noexcept {
  switch (t) {
    case ElemType::f16w: return ElemType::f16;
    case ElemType::bf16w: return ElemType::bf16;
    case ElemType::i8w: return ElemType::i8;
    case ElemType::u8w: return ElemType::u8;
    case ElemType::e4m3w: return ElemType::e4m3;
    case ElemType::e5m2w: return ElemType::e5m2;
    case ElemType::i4w: return ElemType::i4;
    case ElemType::mxe4m3w: return ElemType::mxe4m3;
    case ElemType::mxe5m2w: return ElemType::mxe5m2;
    case ElemType::mxint8w: return ElemType::mxint8;
    case ElemType::mxfp4w: return ElemType::mxfp4;
    case ElemType::mxe2m3w: return ElemType::mxe2m3;
    case ElemType::mxe3m2w: return ElemType::mxe3m2;
    default: return t;
  }
}
// The accumulator type of a narrow type under sum_widen (f16 -> f16w, bf16 -> bf16w, i8 -> i8w,
// u8 -> u8w; none else).
constexpr ElemType widened(ElemType t) noexcept {
  switch (t) {
    case ElemType::f16: return ElemType::f16w;
    case ElemType::bf16: return ElemType::bf16w;
    case ElemType::i8: return ElemType::i8w;
    case ElemType::u8: return ElemType::u8w;
    case ElemType::e4m3: return ElemType::e4m3w;
    case ElemType::e5m2: return ElemType::e5m2w;
    case ElemType::i4: return ElemType::i4w;
    case ElemType::mxe4m3: return ElemType::mxe4m3w;
    case ElemType::mxe5m2: return ElemType::mxe5m2w;
    case ElemType::mxint8: return ElemType::mxint8w;
    case ElemType::mxfp4: return ElemType::mxfp4w;
    case ElemType::mxe2m3: return ElemType::mxe2m3w;
    case ElemType::mxe3m2: return ElemType::mxe3m2w;
    default: return ElemType::none;
  }
}
// An MX block type (narrow: mxe4m3, mxe5m2, mxint8, mxfp4, mxe2m3, mxe3m2).
constexpr bool is_mx(ElemType t) noexcept {
  return t == ElemType::mxe4m3 || t == ElemType::mxe5m2 || t == ElemType::mxint8 ||
         t == ElemType::mxfp4 || t == ElemType::mxe2m3 || t == ElemType::mxe3m2;
}

namespace flag {
inline constexpr std::uint8_t want_result = 0x01;      // data: sender wants the result payload
inline constexpr std::uint8_t retransmit = 0x02;       // data/join: this is a retransmission
inline constexpr std::uint8_t overflow = 0x04;         // data/result: an integer sum wrapped (see arith.hpp)
inline constexpr std::uint8_t elided = 0x08;           // result: payload left out (not wanted)
inline constexpr std::uint8_t awaiting_parent = 0x10;  // pending: complete here, parent not yet
// data: a header-only question about a chunk (with `retransmit`, no element type, count 0):
// "do you hold my contribution / the result?". Never a contribution, never changes slot state.
inline constexpr std::uint8_t probe = 0x20;
// any type: a 40-byte authentication trailer follows the payload (src/proto/auth.hpp)
inline constexpr std::uint8_t auth = 0x40;
// result: the job is being resized (docs/PROTOCOL.md "Live resize"): its current slot mapping
// ends at lane chunk `chunk + (aux >> 8)`; the member drains up to there and joins again to
// learn the new one (aux >> 8 is 1..2^24-1; aux bit 0 keeps its meaning, bits 1-7 are 0).
// join: the sender drained its stream up to a live resize's boundary and asks for the new
// mapping (a leaf lane that saw no flagged result learns from it that a resize is under way;
// docs/PROTOCOL.md "Live resize of a tree of lanes").
inline constexpr std::uint8_t resize = 0x80;
inline constexpr std::uint8_t known = 0xFF;
}  // namespace flag

// Why a packet was refused. Values are on the wire (NACK) and in metrics: append only.
enum class Reason : std::uint8_t {
  ok = 0,
  too_short,        // fewer bytes than a header
  bad_magic,        // not an INC packet
  bad_version,      // another protocol version
  bad_type,         // unknown packet type
  bad_flags,        // unknown flag bits, or flags not allowed for this type
  bad_elem_type,    // unknown element type, or not allowed for this type
  bad_op,           // unknown operation, or not valid for the element type
  length_mismatch,  // count x element size != payload bytes, or payload shape wrong
  too_large,        // payload larger than the protocol or the slot allows
  bad_field,        // reserved/type-specific field invalid
  unknown_job,      // job not admitted at this switch
  stale_epoch,      // packet names another epoch of the job (switch restarted / job reset)
  bad_member,       // member id out of range for the job
  bad_slot,         // slot out of the job's range, or chunk not mapped to this slot
  unsupported,      // element type / operation not in the switch's capabilities
  not_joined,       // member has not joined, or sends from another address
  stale_chunk,      // chunk older than the slot's current use (late duplicate)
  out_of_window,    // chunk beyond the slot's next use
  mismatch,         // members disagree on element type, operation or count for a chunk
  job_failed,       // job failed upstream (parent lost its state)
  wrong_source,     // parent-only packet from a non-parent, or member packet from the parent
  control_refused,  // control message with control disabled or a wrong key
  no_slots,         // admission: not enough free slots
  job_exists,       // admission: job already admitted with another shape
  unexpected,       // valid packet that this side never expects (e.g. a result at a root)
  missing,          // nack: a later chunk of this member arrived while this one is still missing
  unauthenticated,  // keyed job: no trailer or a wrong tag (never answered)
  replayed,         // keyed job: sequence number seen before or older than the window
};
inline constexpr int kNumReasons = 29;
// Detail (aux >> 8, 24 bits) of a `missing` nack: bit 0 is set when the nack answers a probe
// (else it is the gap signal sent when a later chunk of the member arrived); bit i, 1 <= i <=
// kMissingSpan, says that chunk - i of the same lane lacks the member's contribution as well
// (one header for a burst of losses).
inline constexpr std::uint32_t kMissingAnswersProbe = 1;
inline constexpr std::uint32_t kMissingSpan = 23;
// Aux of a result: set when the switch sends a stored result again to one member (it answers
// that member's retransmission or probe of a chunk completed earlier): the result sent at
// completion did not reach the member (or has not yet). Other aux bits of a result are refused.
inline constexpr std::uint32_t kResultResent = 1;
// Numeric events (src/numerics/events.hpp: elements of this chunk whose sum wrapped or
// overflowed to infinity) in aux bits 8..31 of data and result: a data packet carries its
// sender's subtree's count (0 from a host), a result the whole tree's. Saturating at
// kMaxEvents; announced by cap::events. Aux bits 1..7 of a result and 0..7 of data are refused.
inline constexpr std::uint32_t kMaxEvents = 0xFFFFFF;
constexpr std::uint32_t events_aux(std::uint32_t events) noexcept {
  return (events > kMaxEvents ? kMaxEvents : events) << 8;
}
constexpr std::uint32_t aux_events(std::uint32_t aux) noexcept { return aux >> 8; }
constexpr std::uint32_t add_events(std::uint32_t a, std::uint64_t b) noexcept {
  return a + b > kMaxEvents ? kMaxEvents : static_cast<std::uint32_t>(a + b);
}
// A result with flag `resize` shares aux bits 8..31 between the distance from its chunk to the
// chunk where the job's mapping changes (bits 8..19: 1..kMaxResizeDistance, so only jobs of at
// most that many slots resize) and its events (bits 20..31, saturating at kMaxResizeEvents).
inline constexpr std::uint32_t kResizeShift = 8;
inline constexpr std::uint32_t kMaxResizeDistance = 0xFFF;
inline constexpr std::uint32_t kResizeEventsShift = 20;
inline constexpr std::uint32_t kMaxResizeEvents = 0xFFF;
constexpr std::uint32_t resize_aux(std::uint32_t distance, std::uint32_t events) noexcept {
  return (distance & kMaxResizeDistance) << kResizeShift |
         (events > kMaxResizeEvents ? kMaxResizeEvents : events) << kResizeEventsShift;
}
constexpr std::uint32_t resize_distance(std::uint32_t aux) noexcept {
  return (aux >> kResizeShift) & kMaxResizeDistance;
}

std::string_view name(PacketType t) noexcept;
std::string_view name(ElemType t) noexcept;
std::string_view name(WireOp op) noexcept;
std::string_view name(Reason r) noexcept;

constexpr std::size_t elem_size(ElemType t) noexcept {
  switch (t) {
    case ElemType::none: return 0;
    case ElemType::raw:
    case ElemType::i8:
    case ElemType::u8:
    case ElemType::e4m3:
    case ElemType::e5m2:
    case ElemType::i4: return 1;
    case ElemType::mxe4m3:
    case ElemType::mxe5m2:
    case ElemType::mxint8: return 1 + kMxBlockElems;
    case ElemType::mxfp4: return 1 + kMxBlockElems / 2;
    case ElemType::mxe2m3:
    case ElemType::mxe3m2: return 1 + kMxBlockElems * 3 / 4;
    case ElemType::mxe2m3w:
    case ElemType::mxe3m2w:
    case ElemType::mxe4m3w:
    case ElemType::mxe5m2w:
    case ElemType::mxint8w:
    case ElemType::mxfp4w: return 4 * kMxBlockElems;
    case ElemType::f16:
    case ElemType::bf16: return 2;
    case ElemType::i32:
    case ElemType::f32:
    case ElemType::f16w:
    case ElemType::bf16w:
    case ElemType::i8w:
    case ElemType::u8w:
    case ElemType::e4m3w:
    case ElemType::e5m2w:
    case ElemType::i4w: return 4;
  }
  return 0;
}

struct Header {
  std::uint8_t version = kVersion;
  PacketType type = PacketType::data;
  std::uint8_t flags = 0;
  ElemType elem = ElemType::none;
  WireOp op = WireOp::none;
  Reason reason = Reason::ok;  // nack only
  std::uint16_t member = 0;    // sender's member id at the switch (member -> switch)
  std::uint32_t job = 0;
  std::uint32_t epoch = 0;     // the job's epoch at the switch (0 in join/admit/release)
  std::uint32_t chunk = 0;     // position in the job's chunk stream (serial number)
  std::uint16_t slot = 0;      // slot index within the job's slot range (= chunk mod slots)
  std::uint16_t count = 0;     // elements in the payload
  std::uint32_t aux = 0;       // type-specific (see PROTOCOL.md)
};

// The events a data packet or result carries, whichever form its aux takes.
constexpr std::uint32_t header_events(const Header& h) noexcept {
  return (h.flags & flag::resize) ? h.aux >> kResizeEventsShift : aux_events(h.aux);
}

struct PacketView {
  Header h;
  std::span<const std::byte> payload;
  bool sealed = false;  // flag auth: the datagram ends with a kAuthTrailerBytes trailer
};

// Payloads of the control/handshake types (all little-endian, carried as ElemType::raw).
struct JoinInfo {  // join_ack, 24 bytes
  std::uint32_t slots = 0;       // slots of the job PER LANE (lane chunk k uses slot k mod slots)
  std::uint32_t slot_elems = 0;  // 4-byte cells per slot along the whole path to the root
  std::uint32_t members = 0;     // members at this switch
  std::uint32_t caps = 0;        // capability bits (cap:: below), AND of the path to the root
  std::uint16_t lanes = 1;       // lanes the job uses: minimum over the path to the root (>= 1)
  std::uint16_t lane = 0;        // the lane that answers (< lanes); lane l listens on port + l
  // IPv4 multicast group (host order) the switch sends this job's results to, 0 = unicast
  // only (docs/PROTOCOL.md, "Multicast results"); anything but 0 or 224.0.0.0/4 is refused.
  std::uint32_t group = 0;
};
// 224.0.0.0/4: the IPv4 multicast range.
constexpr bool is_multicast_group(std::uint32_t addr) { return (addr >> 28) == 0xE; }
inline constexpr std::size_t kJoinInfoBytes = 24;
inline constexpr std::uint16_t kMaxLanes = 1024;  // ports PORT..PORT+lanes-1 must exist
namespace cap {
inline constexpr std::uint32_t i32_sum = 0x01;  // wrap-around with overflow flag
inline constexpr std::uint32_t i32_minmax = 0x02;
inline constexpr std::uint32_t f32_sum = 0x04;  // IEEE f32 adds (arrival-order dependent)
inline constexpr std::uint32_t f32_minmax = 0x08;
inline constexpr std::uint32_t raw_copy = 0x10;  // replication
inline constexpr std::uint32_t h16_sum = 0x20;     // f16/bf16 narrow sums (every add rounds)
inline constexpr std::uint32_t h16_minmax = 0x40;  // f16/bf16 min/max (exact)
inline constexpr std::uint32_t h16_widen = 0x80;   // f16/bf16 sum_widen (f32 accumulators)
inline constexpr std::uint32_t i8_sum = 0x100;     // i8/u8 sum and sum_widen (wrap, overflow flag)
inline constexpr std::uint32_t i8_minmax = 0x200;  // i8/u8 min/max
inline constexpr std::uint32_t fp8_sum = 0x400;    // e4m3/e5m2 sum and sum_widen
inline constexpr std::uint32_t fp8_minmax = 0x800;  // e4m3/e5m2 min/max
inline constexpr std::uint32_t i4_sum = 0x1000;    // i4 sum and sum_widen (wrap, overflow flag)
inline constexpr std::uint32_t i4_minmax = 0x2000;  // i4 min/max
inline constexpr std::uint32_t mx_sum = 0x4000;    // MX blocks: sum and sum_widen
inline constexpr std::uint32_t mx6_sum = 0x8000;   // MXFP6 blocks (mxe2m3, mxe3m2): sum and sum_widen
// Counts numeric events per chunk in aux (kMaxEvents above); the top bit, clear of the
// element-type bits that grow from the bottom.
inline constexpr std::uint32_t events = 0x80000000u;
inline constexpr std::uint32_t all = 0xFFFF | events;
}  // namespace cap
// The capability needed to aggregate `elem` with `op` (0 if the pair is invalid).
std::uint32_t required_cap(ElemType elem, WireOp op) noexcept;

struct AdmitInfo {  // admit, 24 bytes
  // Reserved (0). It carried the control key in clear before control packets were sealed
  // (docs/PROTOCOL.md "Control plane"); a switch refuses a non-zero value.
  std::uint64_t key = 0;
  std::uint32_t slots = 0;
  std::uint16_t members = 0;
  std::uint16_t parent_member = kNoMember;  // member id at the parent switch; none = root
  std::uint64_t reserved = 0;
};
inline constexpr std::size_t kAdmitInfoBytes = 24;
inline constexpr std::size_t kReleaseInfoBytes = 8;  // u64 reserved (0; once the key in clear)
inline constexpr std::size_t kPendingBytes = 8;      // u64 bitmap of members that contributed
// A job of more than 64 members at the switch: the bitmap has ceil(members / 64) u64 words
// (member m is bit m % 64 of word m / 64), so a job of up to 64 members keeps 8 bytes.
inline constexpr std::size_t pending_bytes(std::size_t members) noexcept {
  return members <= 64 ? kPendingBytes : 8 * ((members + 63) / 64);
}

// Writes header + payload into `out` (which must hold kHeaderBytes + payload.size()).
// Returns the bytes written, or 0 if `out` is too small or the payload too large.
std::size_t encode(const Header& h, std::span<const std::byte> payload,
                   std::span<std::byte> out) noexcept;
void encode_header(const Header& h, std::byte* out) noexcept;  // exactly kHeaderBytes

Reason decode(std::span<const std::byte> bytes, PacketView& out) noexcept;

// What a switch knows about a job, to validate a member's packet against it.
struct JobLimits {
  std::uint32_t job = 0;
  std::uint32_t epoch = 0;
  std::uint32_t slots = 0;
  std::uint16_t members = 0;
  std::uint32_t slot_bytes = 0;
};
// For data/leave from a member (join carries no epoch, so only job and member are checked).
Reason validate(const Header& h, const JobLimits& job) noexcept;

void write_join_info(const JoinInfo& j, std::byte* out) noexcept;  // kJoinInfoBytes
JoinInfo read_join_info(std::span<const std::byte> p) noexcept;
void write_admit_info(const AdmitInfo& a, std::byte* out) noexcept;  // kAdmitInfoBytes
AdmitInfo read_admit_info(std::span<const std::byte> p) noexcept;

// Little-endian helpers (also used by payload builders).
inline void store_u16(std::byte* p, std::uint16_t v) noexcept {
  p[0] = std::byte(v);
  p[1] = std::byte(v >> 8);
}
inline void store_u32(std::byte* p, std::uint32_t v) noexcept {
  for (int i = 0; i < 4; ++i) p[i] = std::byte(v >> (8 * i));
}
inline void store_u64(std::byte* p, std::uint64_t v) noexcept {
  for (int i = 0; i < 8; ++i) p[i] = std::byte(v >> (8 * i));
}
inline std::uint16_t load_u16(const std::byte* p) noexcept {
  return std::uint16_t(std::uint16_t(p[0]) | std::uint16_t(p[1]) << 8);
}
inline std::uint32_t load_u32(const std::byte* p) noexcept {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= std::uint32_t(p[i]) << (8 * i);
  return v;
}
inline std::uint64_t load_u64(const std::byte* p) noexcept {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= std::uint64_t(p[i]) << (8 * i);
  return v;
}

// Serial-number comparison of chunk ids (RFC 1982 style): a - b as a signed 32-bit distance.
constexpr std::int32_t chunk_distance(std::uint32_t a, std::uint32_t b) noexcept {
  return static_cast<std::int32_t>(a - b);
}

}  // namespace inc::proto
