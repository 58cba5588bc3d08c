#include "src/proto/packet.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <tuple>
#include <vector>

namespace inc::proto {
namespace {

std::vector<std::byte> build(const Header& h, std::size_t payload_bytes, std::uint8_t fill = 7) {
  std::vector<std::byte> payload(payload_bytes, std::byte(fill));
  std::vector<std::byte> out(kHeaderBytes + payload_bytes);
  EXPECT_EQ(encode(h, payload, out), out.size());
  return out;
}

Header data_header() {
  Header h;
  h.type = PacketType::data;
  h.flags = flag::want_result | flag::retransmit;
  h.elem = ElemType::i32;
  h.op = WireOp::sum;
  h.member = 3;
  h.job = 0xA1B2C3D4;
  h.epoch = 0x11223344;
  h.chunk = 0x01020305;
  h.slot = 5;
  h.count = 4;
  h.aux = 0;
  return h;
}

TEST(Packet, HeaderIsExactly32BytesLittleEndian) {
  auto b = build(data_header(), 16);
  ASSERT_EQ(b.size(), 48u);
  const unsigned char expect[32] = {'I',  'N',  'C',  '!',  3,    3,    0x03, 2,
                                    1,    0,    3,    0,    0xD4, 0xC3, 0xB2, 0xA1,
                                    0x44, 0x33, 0x22, 0x11, 0x05, 0x03, 0x02, 0x01,
                                    5,    0,    4,    0,    0,    0,    0,    0};
  EXPECT_EQ(std::memcmp(b.data(), expect, 32), 0);
}

TEST(Packet, RoundTripEveryType) {
  struct Case {
    PacketType t;
    ElemType e;
    WireOp op;
    std::uint16_t count;
    std::uint8_t flags;
    Reason reason;
  };
  const Case cases[] = {
      {PacketType::join, ElemType::none, WireOp::none, 0, flag::retransmit, Reason::ok},
      {PacketType::join_ack, ElemType::raw, WireOp::none, kJoinInfoBytes, 0, Reason::ok},
      {PacketType::data, ElemType::i32, WireOp::sum, 7, flag::want_result, Reason::ok},
      {PacketType::data, ElemType::f32, WireOp::max, 1, flag::overflow, Reason::ok},
      {PacketType::data, ElemType::raw, WireOp::copy, 3, 0, Reason::ok},
      {PacketType::data, ElemType::none, WireOp::none, 0, flag::want_result, Reason::ok},
      {PacketType::data, ElemType::none, WireOp::none, 0, flag::probe | flag::retransmit, Reason::ok},
      {PacketType::data, ElemType::none, WireOp::none, 0,
       flag::probe | flag::retransmit | flag::want_result, Reason::ok},
      {PacketType::result, ElemType::f32, WireOp::sum, 9, flag::overflow, Reason::ok},
      {PacketType::result, ElemType::i32, WireOp::sum, 0, flag::elided, Reason::ok},
      {PacketType::nack, ElemType::none, WireOp::none, 0, 0, Reason::stale_epoch},
      {PacketType::pending, ElemType::raw, WireOp::none, kPendingBytes, flag::awaiting_parent,
       Reason::ok},
      {PacketType::leave, ElemType::none, WireOp::none, 0, 0, Reason::ok},
      {PacketType::leave_ack, ElemType::none, WireOp::none, 0, 0, Reason::ok},
      {PacketType::admit, ElemType::raw, WireOp::none, kAdmitInfoBytes, 0, Reason::ok},
      {PacketType::admit_ack, ElemType::none, WireOp::none, 0, 0, Reason::ok},
      {PacketType::release, ElemType::raw, WireOp::none, kReleaseInfoBytes, 0, Reason::ok},
      {PacketType::release_ack, ElemType::none, WireOp::none, 0, 0, Reason::ok},
  };
  for (const auto& c : cases) {
    Header h = data_header();
    h.type = c.t;
    h.elem = c.e;
    h.op = c.op;
    h.count = c.count;
    h.flags = c.flags;
    h.reason = c.reason;
    auto b = build(h, c.count * elem_size(c.e), 0x5A);
    if (c.t == PacketType::join_ack) {  // a JoinInfo must be well-formed (lanes, group)
      write_join_info(JoinInfo{1, 2, 3, 4, 5, 4, 0}, b.data() + kHeaderBytes);
    }
    PacketView v;
    ASSERT_EQ(decode(b, v), Reason::ok) << name(c.t);
    EXPECT_EQ(v.h.type, c.t);
    EXPECT_EQ(v.h.elem, c.e);
    EXPECT_EQ(v.h.op, c.op);
    EXPECT_EQ(v.h.flags, c.flags);
    EXPECT_EQ(v.h.reason, c.reason);
    EXPECT_EQ(v.h.member, h.member);
    EXPECT_EQ(v.h.job, h.job);
    EXPECT_EQ(v.h.epoch, h.epoch);
    EXPECT_EQ(v.h.chunk, h.chunk);
    EXPECT_EQ(v.h.slot, h.slot);
    EXPECT_EQ(v.h.count, c.count);
    ASSERT_EQ(v.payload.size(), c.count * elem_size(c.e));
    if (c.t != PacketType::join_ack) {
      for (auto x : v.payload) EXPECT_EQ(x, std::byte(0x5A));
    }
  }
}

TEST(Packet, ControlPayloadsRoundTrip) {
  JoinInfo j{64, 256, 9, cap::i32_sum | cap::raw_copy, 0x0302, 0x0201, 0xEF010203u};
  std::byte buf[kJoinInfoBytes];
  write_join_info(j, buf);
  auto j2 = read_join_info(buf);
  EXPECT_EQ(j2.slots, 64u);
  EXPECT_EQ(j2.slot_elems, 256u);
  EXPECT_EQ(j2.members, 9u);
  EXPECT_EQ(j2.caps, j.caps);
  EXPECT_EQ(j2.lanes, 0x0302);
  EXPECT_EQ(j2.lane, 0x0201);
  EXPECT_EQ(j2.group, 0xEF010203u);  // 239.1.2.3
  // Layout: {u32 slots, u32 slot_elems, u32 members, u32 caps, u16 lanes, u16 lane, u32 group}.
  const unsigned char expect[kJoinInfoBytes] = {64, 0, 0, 0, 0, 1, 0, 0, 9, 0, 0, 0,
                                                0x11, 0, 0, 0, 2, 3, 1, 2, 3, 2, 1, 0xEF};
  EXPECT_EQ(std::memcmp(buf, expect, kJoinInfoBytes), 0);
  AdmitInfo a{0x0102030405060708ull, 17, 5, 2, 0};
  std::byte abuf[kAdmitInfoBytes];
  write_admit_info(a, abuf);
  auto a2 = read_admit_info(abuf);
  EXPECT_EQ(a2.key, a.key);
  EXPECT_EQ(a2.slots, 17u);
  EXPECT_EQ(a2.members, 5);
  EXPECT_EQ(a2.parent_member, 2);
}

Reason decode_bytes(const std::vector<std::byte>& b) {
  PacketView v;
  return decode(b, v);
}

TEST(Packet, EveryDecodeReason) {
  auto good = build(data_header(), 16);
  ASSERT_EQ(decode_bytes(good), Reason::ok);

  EXPECT_EQ(decode_bytes(std::vector<std::byte>(good.begin(), good.begin() + 31)),
            Reason::too_short);
  EXPECT_EQ(decode_bytes({}), Reason::too_short);
  auto b = good;
  b[0] = std::byte('X');
  EXPECT_EQ(decode_bytes(b), Reason::bad_magic);
  b = good;
  b[4] = std::byte(1);  // version 1 (16-byte JoinInfo, no lanes) is refused
  EXPECT_EQ(decode_bytes(b), Reason::bad_version);
  b[4] = std::byte(2);  // version 2 (no authentication) is refused
  EXPECT_EQ(decode_bytes(b), Reason::bad_version);
  b[4] = std::byte(4);
  EXPECT_EQ(decode_bytes(b), Reason::bad_version);
  b = good;
  b[5] = std::byte(0);
  EXPECT_EQ(decode_bytes(b), Reason::bad_type);
  b[5] = std::byte(kMaxPacketType + 1);
  EXPECT_EQ(decode_bytes(b), Reason::bad_type);
  b = good;
  b[6] = std::byte(0x80);
  EXPECT_EQ(decode_bytes(b), Reason::bad_flags);
  b = good;
  b[6] = std::byte(flag::elided);  // known bit, not allowed on data
  EXPECT_EQ(decode_bytes(b), Reason::bad_flags);
  b = good;
  b[7] = std::byte(kMaxElemType + 1);
  EXPECT_EQ(decode_bytes(b), Reason::bad_elem_type);
  b = good;
  b[8] = std::byte(9);
  EXPECT_EQ(decode_bytes(b), Reason::bad_op);
  b = good;
  b[8] = std::byte(WireOp::copy);  // copy is only for raw
  EXPECT_EQ(decode_bytes(b), Reason::bad_op);
  b = good;
  b[9] = std::byte(Reason::mismatch);  // reason only on nack
  EXPECT_EQ(decode_bytes(b), Reason::bad_field);
  b[9] = std::byte(200);
  EXPECT_EQ(decode_bytes(b), Reason::bad_field);
  b = good;
  b.push_back(std::byte(0));  // count 4 x 4 != 17
  EXPECT_EQ(decode_bytes(b), Reason::length_mismatch);
  b = good;
  b[26] = std::byte(5);
  EXPECT_EQ(decode_bytes(b), Reason::length_mismatch);
  b = std::vector<std::byte>(kMaxPacketBytes + 4);
  std::copy(good.begin(), good.begin() + 32, b.begin());
  EXPECT_EQ(decode_bytes(b), Reason::too_large);

  // Per-type shapes.
  Header h = data_header();
  h.type = PacketType::join;
  h.flags = flag::retransmit;
  EXPECT_EQ(decode_bytes(build(h, 16)), Reason::bad_elem_type);  // join carries no payload
  h.elem = ElemType::none;
  h.op = WireOp::none;
  h.count = 3;  // none x 3 = 0 bytes, but a count without a type is malformed
  h.flags = 0;
  EXPECT_EQ(decode_bytes(build(h, 0)), Reason::length_mismatch);
  h = data_header();
  h.type = PacketType::nack;
  h.elem = ElemType::none;
  h.op = WireOp::none;
  h.count = 0;
  h.flags = 0;
  h.reason = Reason::ok;
  EXPECT_EQ(decode_bytes(build(h, 0)), Reason::bad_field);  // nack needs a reason
  h = data_header();
  h.type = PacketType::admit;
  h.elem = ElemType::raw;
  h.op = WireOp::none;
  h.flags = 0;
  h.count = 8;
  EXPECT_EQ(decode_bytes(build(h, 8)), Reason::length_mismatch);
  h = data_header();
  h.type = PacketType::result;
  h.flags = flag::elided;
  EXPECT_EQ(decode_bytes(build(h, 16)), Reason::length_mismatch);  // elided has no payload
  h = data_header();
  h.elem = ElemType::raw;
  h.op = WireOp::copy;
  h.count = 0;
  EXPECT_EQ(decode_bytes(build(h, 0)), Reason::length_mismatch);  // typed but empty
}

std::vector<std::byte> join_ack(const JoinInfo& j) {
  Header h;
  h.type = PacketType::join_ack;
  h.elem = ElemType::raw;
  h.count = kJoinInfoBytes;
  std::byte info[kJoinInfoBytes];
  write_join_info(j, info);
  std::vector<std::byte> out(kHeaderBytes + kJoinInfoBytes);
  EXPECT_EQ(encode(h, info, out), out.size());
  return out;
}

TEST(Packet, JoinAckLanesAreChecked) {
  EXPECT_EQ(decode_bytes(join_ack({4, 256, 3, cap::all, 1, 0, 0})), Reason::ok);
  EXPECT_EQ(decode_bytes(join_ack({4, 256, 3, cap::all, 8, 7, 0})), Reason::ok);
  EXPECT_EQ(decode_bytes(join_ack({4, 256, 3, cap::all, kMaxLanes, kMaxLanes - 1, 0})),
            Reason::ok);
  EXPECT_EQ(decode_bytes(join_ack({4, 256, 3, cap::all, 0, 0, 0})), Reason::bad_field);
  EXPECT_EQ(decode_bytes(join_ack({4, 256, 3, cap::all, 2, 2, 0})), Reason::bad_field);
  EXPECT_EQ(decode_bytes(join_ack({4, 256, 3, cap::all, kMaxLanes + 1, 0, 0})),
            Reason::bad_field);
  EXPECT_EQ(decode_bytes(join_ack({4, 256, 3, cap::all, 2, 1, 1})), Reason::bad_field);
  EXPECT_EQ(decode_bytes(join_ack({4, 256, 3, cap::all, 2, 1, 0x80000000u})), Reason::bad_field);
  // The group: none, or an address of 224.0.0.0/4 (239.1.2.3 and the range's ends).
  EXPECT_EQ(decode_bytes(join_ack({4, 256, 3, cap::all, 2, 1, 0xEF010203u})), Reason::ok);
  EXPECT_EQ(decode_bytes(join_ack({4, 256, 3, cap::all, 2, 1, 0xE0000000u})), Reason::ok);
  EXPECT_EQ(decode_bytes(join_ack({4, 256, 3, cap::all, 2, 1, 0xEFFFFFFFu})), Reason::ok);
  EXPECT_EQ(decode_bytes(join_ack({4, 256, 3, cap::all, 2, 1, 0xDFFFFFFFu})), Reason::bad_field);
  EXPECT_EQ(decode_bytes(join_ack({4, 256, 3, cap::all, 2, 1, 0xF0000000u})), Reason::bad_field);
  EXPECT_EQ(decode_bytes(join_ack({4, 256, 3, cap::all, 2, 1, 0x0A630001u})), Reason::bad_field);
  // A version-1 join_ack (16-byte JoinInfo) does not decode as version 2.
  auto b = join_ack({4, 256, 3, cap::all, 1, 0, 0});
  b.resize(kHeaderBytes + 16);
  b[26] = std::byte(16);
  EXPECT_EQ(decode_bytes(b), Reason::length_mismatch);
}

TEST(Packet, EveryValidateReason) {
  JobLimits job{0xA1B2C3D4, 0x11223344, 8, 4, 1024};
  Header h = data_header();  // chunk 0x01020305 % 8 == 5 == slot
  EXPECT_EQ(validate(h, job), Reason::ok);
  Header x = h;
  x.job = 1;
  EXPECT_EQ(validate(x, job), Reason::unknown_job);
  x = h;
  x.member = 4;
  EXPECT_EQ(validate(x, job), Reason::bad_member);
  x = h;
  x.epoch = 9;
  EXPECT_EQ(validate(x, job), Reason::stale_epoch);
  x = h;
  x.slot = 8;
  EXPECT_EQ(validate(x, job), Reason::bad_slot);
  x = h;
  x.slot = 4;  // chunk maps to slot 5
  EXPECT_EQ(validate(x, job), Reason::bad_slot);
  x = h;
  x.count = 257;
  EXPECT_EQ(validate(x, job), Reason::too_large);
  x = h;
  x.type = PacketType::join;
  x.epoch = 0;  // join carries no epoch
  EXPECT_EQ(validate(x, job), Reason::ok);
}

TEST(Packet, NamesAreDistinct) {
  for (int i = 0; i < kNumReasons; ++i) EXPECT_NE(name(Reason(i)), "?");
  EXPECT_EQ(name(Reason(kNumReasons)), "?");
  EXPECT_EQ(name(PacketType::release_ack), "release_ack");
}

TEST(Packet, ChunkDistanceWraps) {
  EXPECT_EQ(chunk_distance(5, 3), 2);
  EXPECT_EQ(chunk_distance(3, 5), -2);
  EXPECT_EQ(chunk_distance(1, 0xFFFFFFFFu), 2);
  EXPECT_EQ(chunk_distance(0xFFFFFFFFu, 1), -2);
}

TEST(Packet, RequiredCaps) {
  EXPECT_EQ(required_cap(ElemType::i32, WireOp::sum), cap::i32_sum);
  EXPECT_EQ(required_cap(ElemType::f32, WireOp::min), cap::f32_minmax);
  EXPECT_EQ(required_cap(ElemType::raw, WireOp::sum), 0u);
  EXPECT_EQ(required_cap(ElemType::none, WireOp::none), cap::raw_copy);
  EXPECT_EQ(required_cap(ElemType::e5m2, WireOp::max), cap::fp8_minmax);
  EXPECT_EQ(required_cap(ElemType::i4w, WireOp::sum_widen), cap::i4_sum);
  EXPECT_EQ(required_cap(ElemType::mxint8, WireOp::sum), cap::mx_sum);
  EXPECT_EQ(required_cap(ElemType::mxint8, WireOp::max), 0u);  // MX: sums only
  EXPECT_EQ(required_cap(ElemType::mxe2m3, WireOp::sum), cap::mx6_sum);  // MXFP6: a bit of its own
  EXPECT_EQ(required_cap(ElemType::mxe3m2w, WireOp::sum_widen), cap::mx6_sum);
  EXPECT_EQ(required_cap(ElemType::mxe3m2, WireOp::min), 0u);
}

// The 8/4-bit and MX element types: one byte per fp8/i4 unit, 33 (mxfp6 25, mxfp4 17) per MX block, so a
// payload must hold whole blocks; MX carries sums only; accumulator types only sum_widen.
TEST(Packet, LowPrecisionAndMxShapes) {
  PacketView v;
  for (auto [t, op, bytes] : {std::tuple{ElemType::e4m3, WireOp::max, 1}, std::tuple{ElemType::i4, WireOp::sum_widen, 1},
                              std::tuple{ElemType::e5m2w, WireOp::sum_widen, 4}, std::tuple{ElemType::i4w, WireOp::sum_widen, 4},
                              std::tuple{ElemType::mxe4m3, WireOp::sum, 33}, std::tuple{ElemType::mxfp4, WireOp::sum_widen, 17},
                              std::tuple{ElemType::mxint8w, WireOp::sum_widen, 128},
                              std::tuple{ElemType::mxe2m3, WireOp::sum, 25}, std::tuple{ElemType::mxe3m2, WireOp::sum_widen, 25},
                              std::tuple{ElemType::mxe2m3w, WireOp::sum_widen, 128}}) {
    Header h = data_header();
    h.elem = t;
    h.op = op;
    h.count = 3;
    EXPECT_EQ(decode(build(h, 3 * std::size_t(bytes)), v), Reason::ok) << name(t);
    EXPECT_EQ(decode(build(h, 3 * std::size_t(bytes) - 1), v), Reason::length_mismatch) << name(t);
  }
  Header h = data_header();
  h.elem = ElemType::mxint8;
  h.count = 1;
  h.op = WireOp::max;
  EXPECT_EQ(decode(build(h, 33), v), Reason::bad_op);
  h.elem = ElemType::mxint8w;
  h.op = WireOp::sum;  // a partial sum in f32 accumulators travels only under sum_widen
  EXPECT_EQ(decode(build(h, 128), v), Reason::bad_op);
  h.elem = ElemType::mxe3m2w;
  EXPECT_EQ(decode(build(h, 128), v), Reason::bad_op);
  h.elem = ElemType::mxe2m3;
  h.op = WireOp::min;
  EXPECT_EQ(decode(build(h, 25), v), Reason::bad_op);
  h.elem = ElemType::e4m3w;
  EXPECT_EQ(decode(build(h, 4), v), Reason::bad_op);
}

// A probe is a question about a chunk, never a contribution: only on data, only together with
// `retransmit`, and a bare header (no element type, operation, count or payload). Every other
// combination is refused before the switch looks at any state.
TEST(Packet, ProbeMustBeABareRetransmittedDataHeader) {
  Header h = data_header();
  h.elem = ElemType::none;
  h.op = WireOp::none;
  h.count = 0;
  h.flags = flag::probe | flag::retransmit | flag::want_result;
  ASSERT_EQ(decode_bytes(build(h, 0)), Reason::ok);
  h.flags = flag::probe;  // without retransmit
  EXPECT_EQ(decode_bytes(build(h, 0)), Reason::bad_flags);
  h.flags = flag::probe | flag::want_result;
  EXPECT_EQ(decode_bytes(build(h, 0)), Reason::bad_flags);
  h.flags = flag::probe | flag::retransmit | flag::overflow;  // it carries no partial sum
  EXPECT_EQ(decode_bytes(build(h, 0)), Reason::bad_flags);
  // With data: refused whatever the type.
  for (auto [e, op, count] : {std::tuple{ElemType::i32, WireOp::sum, 4}, std::tuple{ElemType::f32, WireOp::max, 1},
                              std::tuple{ElemType::raw, WireOp::copy, 3}}) {
    Header d = data_header();
    d.elem = e;
    d.op = op;
    d.count = std::uint16_t(count);
    d.flags = flag::probe | flag::retransmit;
    EXPECT_EQ(decode_bytes(build(d, std::size_t(count) * elem_size(e))), Reason::bad_elem_type) << name(e);
  }
  h.flags = flag::probe | flag::retransmit;
  h.op = WireOp::sum;  // an operation without elements
  EXPECT_EQ(decode_bytes(build(h, 0)), Reason::bad_op);
  h.op = WireOp::none;
  auto b = build(h, 0);
  b.push_back(std::byte(1));  // a payload behind a header that announces none
  EXPECT_EQ(decode_bytes(b), Reason::length_mismatch);
  h.count = 2;  // a count without a type
  EXPECT_EQ(decode_bytes(build(h, 0)), Reason::length_mismatch);
  h.count = 0;
  // Only data may carry it.
  for (PacketType t : {PacketType::join, PacketType::result, PacketType::leave, PacketType::leave_ack,
                       PacketType::admit_ack, PacketType::release_ack}) {
    Header x = h;
    x.type = t;
    x.flags = flag::probe | (t == PacketType::join ? flag::retransmit : 0);
    EXPECT_EQ(decode_bytes(build(x, 0)), Reason::bad_flags) << name(t);
  }
  Header nk = h;
  nk.type = PacketType::nack;
  nk.reason = Reason::missing;
  nk.flags = flag::probe;
  EXPECT_EQ(decode_bytes(build(nk, 0)), Reason::bad_flags);
  Header pd = h;
  pd.type = PacketType::pending;
  pd.elem = ElemType::raw;
  pd.count = kPendingBytes;
  pd.flags = flag::probe;
  EXPECT_EQ(decode_bytes(build(pd, kPendingBytes)), Reason::bad_flags);
}

// A result's aux says whether the switch sent it again to one member that asked (its answer
// to a retransmission or probe of a chunk completed earlier) and, in bits 8..31, the chunk's
// numeric events; data carries only events (bits 8..31); a probe nothing. Other bits are refused.
TEST(Packet, ResultAndDataAuxAreResentMarkAndEventsOnly) {
  Header h = data_header();
  h.type = PacketType::result;
  h.flags = 0;
  for (std::uint32_t aux : {0u, kResultResent, 0x100u, 0x80000001u, events_aux(kMaxEvents) | kResultResent}) {
    h.aux = aux;
    PacketView v;
    auto b = build(h, 16);
    ASSERT_EQ(decode(b, v), Reason::ok) << aux;
    EXPECT_EQ(v.h.aux, aux);
  }
  for (std::uint32_t aux : {2u, 0x80u, 0x180u, 0x800000FEu}) {
    h.aux = aux;
    EXPECT_EQ(decode_bytes(build(h, 16)), Reason::bad_field) << aux;
  }
  Header d = data_header();
  d.flags = 0;
  for (std::uint32_t aux : {0u, 0x100u, events_aux(77)}) {
    d.aux = aux;
    EXPECT_EQ(decode_bytes(build(d, 16)), Reason::ok) << aux;
  }
  for (std::uint32_t aux : {1u, 0x80u, 0x1FFu}) {
    d.aux = aux;
    EXPECT_EQ(decode_bytes(build(d, 16)), Reason::bad_field) << aux;
  }
  EXPECT_EQ(events_aux(kMaxEvents + 5), kMaxEvents << 8);  // saturates
  EXPECT_EQ(aux_events(events_aux(77) | kResultResent), 77u);
  EXPECT_EQ(add_events(kMaxEvents - 1, 5), kMaxEvents);
}

// `pending` of a job of more than 64 members at the switch (aux) carries one u64 word per 64
// of them; up to 64, and for senders that leave aux 0, the 8 bytes of version 3.
TEST(Packet, PendingBitmapHasOneWordPer64Members) {
  Header pd;
  pd.type = PacketType::pending;
  pd.elem = ElemType::raw;
  for (std::uint32_t members : {0u, 1u, 64u, 65u, 100u, 128u, 129u, 1024u}) {
    pd.aux = members;
    const std::size_t want = members <= 64 ? 8 : 8 * ((members + 63) / 64);
    for (std::size_t bytes : {std::size_t(8), std::size_t(16), std::size_t(24), std::size_t(128)}) {
      pd.count = std::uint16_t(bytes);
      EXPECT_EQ(decode_bytes(build(pd, bytes)), bytes == want ? Reason::ok : Reason::length_mismatch)
          << members << " members, " << bytes << " bytes";
    }
  }
  pd.aux = std::uint32_t(kMaxMembers + 1);  // more members than a switch takes
  pd.count = 136;
  EXPECT_EQ(decode_bytes(build(pd, 136)), Reason::bad_field);
}

}  // namespace
}  // namespace inc::proto
