// The switch data plane driven packet by packet (no network): a fixture shared by the
// data-plane unit tests (dataplane_test.cpp, probe_test.cpp).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "src/switch/dataplane.hpp"

namespace inc::sw::testing {

using proto::ElemType;
using proto::Header;
using proto::PacketType;
using proto::Reason;
using proto::WireOp;

struct Sent {
  Endpoint to;
  proto::Header h;
  std::vector<std::byte> payload;
};

class DataPlaneFixture : public ::testing::Test {
 protected:
  SwitchConfig cfg() {
    SwitchConfig c;
    c.slots = 8;
    c.slot_elems = 4;
    c.incarnation = 42;
    return c;
  }
  void make(SwitchConfig c = {}) {
    if (c.slots == 1024) c = cfg();
    sw = std::make_unique<SwitchDataPlane>(c);
  }
  std::vector<Sent> drain() {
    std::vector<Sent> v;
    for (const auto& e : sw->outbox().entries()) {
      proto::PacketView pv;
      EXPECT_EQ(proto::decode(sw->outbox().bytes(e), pv), Reason::ok);
      v.push_back({e.to, pv.h, std::vector<std::byte>(pv.payload.begin(), pv.payload.end())});
    }
    sw->outbox().clear();
    return v;
  }
  // The same without the `missing` nacks a member gets when it skips chunks (tests that begin
  // a member's stream past chunk 0, or skip chunks on purpose).
  std::vector<Sent> drain_no_gaps() {
    auto v = drain();
    std::erase_if(v, [](const Sent& x) {
      return x.h.type == PacketType::nack && x.h.reason == Reason::missing;
    });
    return v;
  }
  void send(Endpoint from, const Header& h, std::span<const std::byte> payload = {}) {
    std::vector<std::byte> b(proto::kHeaderBytes + payload.size());
    ASSERT_EQ(proto::encode(h, payload, b), b.size());
    sw->on_packet(b, from, now);
  }
  Header join(std::uint32_t job, std::uint16_t m, std::uint32_t session = 0) {
    Header h;
    h.type = PacketType::join;
    h.job = job;
    h.member = m;
    h.aux = session;
    return h;
  }
  Header leave(std::uint32_t job, std::uint16_t m) {  // under the job's current epoch
    Header h;
    h.type = PacketType::leave;
    h.job = job;
    h.member = m;
    h.epoch = sw->job_epoch(job);
    return h;
  }
  Header data(std::uint32_t job, std::uint16_t m, std::uint32_t chunk, std::uint32_t slots,
              std::uint16_t count, ElemType e = ElemType::i32, WireOp op = WireOp::sum,
              std::uint8_t flags = proto::flag::want_result) {
    Header h;
    h.type = PacketType::data;
    h.job = job;
    h.member = m;
    h.epoch = sw->job_epoch(job);
    h.chunk = chunk;
    h.slot = std::uint16_t(chunk % slots);
    h.elem = count ? e : ElemType::none;
    h.op = count ? op : WireOp::none;
    h.count = count;
    h.flags = flags;
    return h;
  }
  static std::vector<std::byte> i32s(std::initializer_list<std::int32_t> v) {
    std::vector<std::byte> b(v.size() * 4);
    std::memcpy(b.data(), v.begin(), b.size());
    return b;
  }
  static std::vector<std::int32_t> as_i32(const std::vector<std::byte>& b) {
    std::vector<std::int32_t> v(b.size() / 4);
    std::memcpy(v.data(), b.data(), b.size());
    return v;
  }
  // Admit job 7 with n members and S slots, join them all from node(1..n).
  void setup(std::uint16_t n, std::uint32_t S) {
    auto c = cfg();
    c.slots = std::max(c.slots, S);
    make(c);
    ASSERT_EQ(sw->admit({7, n, S}, now), Reason::ok);
    for (std::uint16_t m = 0; m < n; ++m) send(Endpoint::node(m + 1), join(7, m));
    auto acks = drain();
    ASSERT_EQ(acks.size(), n);
    for (auto& a : acks) {
      EXPECT_EQ(a.h.type, PacketType::join_ack);
      EXPECT_EQ(a.h.epoch, sw->job_epoch(7));
      auto info = proto::read_join_info(a.payload);
      EXPECT_EQ(info.slots, S);
      EXPECT_EQ(info.slot_elems, 4u);
      EXPECT_EQ(info.members, n);
      EXPECT_EQ(info.lanes, 1);  // a single data plane is one lane
      EXPECT_EQ(info.lane, 0);
      EXPECT_EQ(info.group, 0u);  // no multicast unless the job has a group
    }
  }
  std::unique_ptr<SwitchDataPlane> sw;
  Nanos now = 0;
};

}  // namespace inc::sw::testing
