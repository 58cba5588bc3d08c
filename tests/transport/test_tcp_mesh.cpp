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
  void on_message(int, const WireHeader&) override { ++complete; }
  void on_send_done(std::uint64_t token) override { sent_tokens.push_back(token); }
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
