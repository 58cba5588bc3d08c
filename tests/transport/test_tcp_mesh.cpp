// TcpMesh on a connected socket pair in one thread: framing, streaming reduce, parked
// payloads, and delivery when a peer's data arrives in reads larger than the read budget.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <vector>

#include "transport/tcp_mesh.hpp"

using namespace inc;
using namespace inc::transport;

namespace {

struct Recorder : MessageSink {
  std::vector<std::vector<std::byte>> got;  // one buffer per message, in arrival order
  std::vector<std::uint64_t> sent_tokens;
  RecvTarget on_header(int, const WireHeader& h) override {
    got.emplace_back(h.bytes);
    RecvTarget t;
    t.mode = RecvTarget::Mode::copy;
    t.dst = got.back().data();
    return t;
  }
  void on_message(int, const WireHeader&) override {
    ++complete;
    order += 'm';
  }
  void on_send_done(std::uint64_t token) override { sent_tokens.push_back(token); }
  void on_ready(int, const WireHeader& h) override {
    ready.push_back(h);
    order += 'r';
  }
  std::vector<WireHeader> ready;
  std::string order;  // 'm' message complete, 'r' ready notice, in arrival order
  void on_peer_failed(int, const std::string& why) override { failure = why; }
  void on_abort(int, const std::string& reason) override { abort = reason; }
  void on_error(int, const Error& e) override { failure = e.what(); }
  int complete = 0;
  std::string failure, abort;
};

struct Pair {
  std::unique_ptr<TcpMesh> a, b;
  Recorder ra, rb;
  Pair() {
    int sv[2];
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    a = std::make_unique<TcpMesh>(0, std::vector<int>{-1, sv[0]});
    b = std::make_unique<TcpMesh>(1, std::vector<int>{sv[1], -1});
    a->set_sink(&ra);
    b->set_sink(&rb);
  }
  // Pump both sides until `done` or a generous liveness bound (a hang, not a speed check).
  template <class F>
  bool pump(F done) {  // NOLINT
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!done()) {
      if (std::chrono::steady_clock::now() > until) return false;
      a->poll(1);
      b->poll(1);
    }
    return true;
  }
};

std::vector<std::byte> pattern(std::size_t n, unsigned seed) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 131 + seed * 7) & 0xff);
  return v;
}

}  // namespace

TEST(TcpMesh, MessagesArriveInOrderWithExactBytes) {
  Pair p;
  std::vector<std::vector<std::byte>> msgs;
  for (unsigned k = 0; k < 40; ++k) msgs.push_back(pattern(k % 5 == 0 ? 0 : (k * 7919) % 300000, k));
  for (unsigned k = 0; k < msgs.size(); ++k) {
    WireHeader h;
    h.seq = k;
    h.bytes = msgs[k].size();
    p.a->send(1, h, msgs[k].data(), k);
  }
  ASSERT_TRUE(p.pump([&] { return p.rb.complete == static_cast<int>(msgs.size()); })) << p.rb.complete;
  for (unsigned k = 0; k < msgs.size(); ++k) EXPECT_EQ(p.rb.got[k], msgs[k]) << k;
  ASSERT_TRUE(p.pump([&] { return p.ra.sent_tokens.size() == msgs.size(); }));
  EXPECT_EQ(p.b->stats().payload_received, p.a->stats().payload_sent);
}

// Regression: with a read budget smaller than one read, every event ends on the budget; the
// bytes of that last read must still be delivered although the socket is then empty.
TEST(TcpMesh, TinyReadBudgetStillDeliversEverything) {
  Pair p;
  p.b->set_read_budget(1);
  auto big = pattern(3 << 20, 1), small = pattern(10, 2);
  WireHeader h;
  h.bytes = big.size();
  p.a->send(1, h, big.data(), 1);
  h.bytes = small.size();
  p.a->send(1, h, small.data(), 2);
  ASSERT_TRUE(p.pump([&] { return p.rb.complete == 2; })) << "messages stuck in the buffer";
  EXPECT_EQ(p.rb.got[0], big);
  EXPECT_EQ(p.rb.got[1], small);
}

// A streaming reduce whose payload follows a message of odd length in the same read sits at an
// odd offset of the receive buffer: the kernels read typed elements, so the mesh must hand them
// an aligned operand (under UBSan: "load of misaligned address ... for type 'const double'",
// found by env_segment_bytes in the multi-process tests under ASan+UBSan).
TEST(TcpMesh, ReduceAfterAnOddLengthMessageReadsAlignedElements) {
  struct Reducer : Recorder {
    std::vector<double> operand64, out64;
    std::vector<float> operand32, out32;
    RecvTarget on_header(int peer, const WireHeader& h) override {
      if (h.seq == 0) return Recorder::on_header(peer, h);
      got.emplace_back();
      RecvTarget t;
      t.mode = RecvTarget::Mode::reduce;
      t.op = ReduceOp::sum;
      if (h.seq == 1) {
        t.dtype = DataType::f64;
        t.dst = reinterpret_cast<std::byte*>(out64.data());
        t.operand = reinterpret_cast<const std::byte*>(operand64.data());
      } else {
        t.dtype = DataType::f32;
        t.dst = reinterpret_cast<std::byte*>(out32.data());
        t.operand = reinterpret_cast<const std::byte*>(operand32.data());
      }
      return t;
    }
  };
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  TcpMesh a(0, std::vector<int>{-1, sv[0]}), b(1, std::vector<int>{sv[1], -1});
  Recorder ra;
  Reducer rb;
  a.set_sink(&ra);
  b.set_sink(&rb);
  const std::size_t n64 = 1001, n32 = 333;
  std::vector<double> x64(n64);
  std::vector<float> x32(n32);
  rb.operand64.resize(n64);
  rb.out64.assign(n64, -1);
  rb.operand32.resize(n32);
  rb.out32.assign(n32, -1);
  for (std::size_t i = 0; i < n64; ++i) x64[i] = 2.0 * i + 1, rb.operand64[i] = 0.5 * i;
  for (std::size_t i = 0; i < n32; ++i) x32[i] = static_cast<float>(i), rb.operand32[i] = 3.0f;
  auto odd = pattern(3, 1), odd2 = pattern(5, 2);
  WireHeader h;
  h.bytes = odd.size();
  a.send(1, h, odd.data(), 0);  // payload at offset 64, the next at 64 + 3 + 64 = 131
  h.seq = 1;
  h.bytes = n64 * sizeof(double);
  a.send(1, h, x64.data(), 1);
  h.seq = 0;
  h.bytes = odd2.size();
  a.send(1, h, odd2.data(), 2);
  h.seq = 2;
  h.bytes = n32 * sizeof(float);
  a.send(1, h, x32.data(), 3);
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);  // bounds a hang
  while (rb.complete < 4 && std::chrono::steady_clock::now() < until) {
    a.poll(0);
    b.poll(1);
  }
  ASSERT_EQ(rb.complete, 4) << rb.failure;
  EXPECT_EQ(rb.got[0], odd);
  EXPECT_EQ(rb.got[2], odd2);
  for (std::size_t i = 0; i < n64; ++i) ASSERT_EQ(rb.out64[i], 2.5 * i + 1) << i;
  for (std::size_t i = 0; i < n32; ++i) ASSERT_EQ(rb.out32[i], static_cast<float>(i) + 3.0f) << i;
}

TEST(TcpMesh, ClosedPeerIsReportedWithItsRank) {
  Pair p;
  p.a->set_sink(nullptr);
  p.a.reset();  // closes rank 0's end
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (p.rb.failure.empty() && std::chrono::steady_clock::now() < until) p.b->poll(10);
  EXPECT_NE(p.rb.failure.find("rank 0 closed"), std::string::npos) << p.rb.failure;
  EXPECT_FALSE(p.b->peer_alive(0));
  WireHeader h;
  EXPECT_THROW(p.b->send(0, h, nullptr, 0), Error);
}

// A watched fd (another protocol's socket) wakes a blocking poll() and its callback runs from
// it; after unwatch_fd it no longer does. The poll timeout is a liveness bound, not a check.
TEST(TcpMesh, WatchedFdWakesPollAndRunsItsCallback) {
  Pair p;
  int ev[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_DGRAM, 0, ev), 0);
  int calls = 0;
  p.a->watch_fd(ev[0], [&] {
    char c;
    while (::recv(ev[0], &c, 1, MSG_DONTWAIT) == 1) ++calls;
  });
  ASSERT_EQ(::send(ev[1], "x", 1, 0), 1);
  ASSERT_EQ(::send(ev[1], "y", 1, 0), 1);
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (calls < 2 && std::chrono::steady_clock::now() < until) p.a->poll(10000);
  EXPECT_EQ(calls, 2);
  // Data messages still flow beside the watched fd.
  auto msg = pattern(1000, 3);
  WireHeader h;
  h.bytes = msg.size();
  p.b->send(0, h, msg.data(), 1);
  ASSERT_TRUE(p.pump([&] { return p.ra.complete == 1; }));
  EXPECT_EQ(p.ra.got[0], msg);
  p.a->unwatch_fd(ev[0]);
  ASSERT_EQ(::send(ev[1], "z", 1, 0), 1);
  p.a->poll(0);
  EXPECT_EQ(calls, 2);
  ::close(ev[0]);
  ::close(ev[1]);
}

TEST(TcpMesh, ReadyNoticeOvertakesQueuedPayloadsAndReportsNoSendDone) {
  Pair p;
  // A message larger than the socket buffers stays partly queued; a second one waits behind it.
  auto big = pattern(8u << 20, 1), second = pattern(1000, 2);
  WireHeader h;
  h.seq = 1;
  h.bytes = big.size();
  p.a->send(1, h, big.data(), 11);
  h.seq = 2;
  h.bytes = second.size();
  p.a->send(1, h, second.data(), 12);
  WireHeader r;
  r.comm_id = 7;
  r.seq = 42;
  r.msg_index = 3;
  r.bytes = 99;  // ignored: a notice has no payload
  p.a->send_ready(1, r);
  ASSERT_TRUE(p.pump([&] { return p.rb.complete == 2 && !p.rb.ready.empty(); }));
  ASSERT_EQ(p.rb.ready.size(), 1u);
  EXPECT_EQ(p.rb.order, "mrm");  // after the message already leaving, before the queued one
  EXPECT_EQ(p.rb.ready[0].comm_id, 7u);
  EXPECT_EQ(p.rb.ready[0].seq, 42u);
  EXPECT_EQ(p.rb.ready[0].msg_index, 3u);
  EXPECT_EQ(p.rb.ready[0].bytes, 0u);
  EXPECT_EQ(p.rb.got[1], second);
  EXPECT_EQ(p.ra.sent_tokens, (std::vector<std::uint64_t>{11, 12}));  // none for the notice
  EXPECT_TRUE(p.rb.failure.empty()) << p.rb.failure;
}

TEST(TcpMesh, ReadyNoticeWithAPayloadFailsThePeer) {
  Pair p;
  WireHeader h;
  h.kind = static_cast<std::uint16_t>(MsgKind::ready);
  h.bytes = 8;
  const std::uint64_t junk = 0;
  p.a->send(1, h, &junk, 1);
  ASSERT_TRUE(p.pump([&] { return !p.rb.failure.empty(); }));
  EXPECT_NE(p.rb.failure.find("ready notice with a 8-byte payload"), std::string::npos) << p.rb.failure;
  EXPECT_TRUE(p.rb.ready.empty());
  EXPECT_FALSE(p.b->peer_alive(0));
}
