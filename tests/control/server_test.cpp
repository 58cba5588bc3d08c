// The controller's server over real TCP on loopback, played by an attacker: connections with a
// wrong secret, frames replayed from another connection, altered frames and messages of the
// wrong role are refused (the connection closes) and change nothing; a legitimate client then
// still gets its answers.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "src/control/conn.hpp"
#include "src/control/server.hpp"

namespace inc::control {
namespace {

namespace ctl = proto::ctl;
using namespace std::chrono_literals;

proto::auth::Key key(std::uint8_t b) {
  proto::auth::Key k{};
  k.fill(b);
  return k;
}

// What switch s0 of the fabric below says of itself when it registers.
ctl::SwitchState s0_state() {
  ctl::SwitchState st;
  st.name = "s0";
  st.ip = 0x7F000001;
  st.port = 7100;
  st.slots_per_lane = 64;
  st.slot_elems = 256;
  return st;
}

class Served : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string err;
    auto t = sw::parse_topology("switch s0 127.0.0.1:7100 slots=64\n", err);
    ASSERT_TRUE(t) << err;
    opts_.core.fabric = *t;
    opts_.listen = "127.0.0.1:0";
    opts_.secret = key(1);
    log_ = std::tmpfile();
    thread_ = std::thread([this] {
      run_controller(opts_, stop_, log_, [this](int port, int) {
        std::lock_guard<std::mutex> g(mu_);
        port_ = port;
        cv_.notify_all();
      });
    });
    std::unique_lock<std::mutex> lk(mu_);
    ASSERT_TRUE(cv_.wait_for(lk, 10s, [&] { return port_ > 0; }));
    addr_ = "127.0.0.1:" + std::to_string(port_);
  }
  void TearDown() override {
    stop_.store(true);
    thread_.join();
    std::fclose(log_);
  }
  std::string log() {
    std::fflush(log_);
    std::rewind(log_);
    std::string s;
    char buf[4096];
    while (std::size_t n = std::fread(buf, 1, sizeof buf, log_)) s.append(buf, n);
    return s;
  }
  std::string status() {
    Client c(addr_, key(1), ctl::Role::admin, 5s);
    return std::get<ctl::StatusReply>(c.call(ctl::StatusRequest{}, 5s)).text;
  }
  // A raw TCP connection: what an attacker has.
  int raw() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(std::uint16_t(port_));
    sa.sin_addr.s_addr = htonl(0x7F000001);
    EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
    return fd;
  }
  // True if the server closed `fd` within 5 s (after reading what it sent).
  static bool closed_by_server(int fd) {
    for (int i = 0; i < 50; ++i) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, 100) > 0) {
        char b[4096];
        if (::recv(fd, b, sizeof b, 0) <= 0) return true;
      }
    }
    return false;
  }
  ServerOptions opts_;
  std::FILE* log_ = nullptr;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  int port_ = 0;
  std::string addr_;
};

TEST_F(Served, AWrongSecretGetsNothingAndTheConnectionCloses) {
  Client c(addr_, key(2), ctl::Role::job, 5s);  // the hello is in clear: it completes
  EXPECT_THROW(c.call(ctl::TreeRequest{8, "x", {"h0", "h1"}}, 5s), std::runtime_error);
  EXPECT_NE(log().find("failed authentication"), std::string::npos) << log();
  EXPECT_NE(status().find("\"granted\":0"), std::string::npos);
}

TEST_F(Served, ReplayedAndAlteredFramesAreRefused) {
  // A legitimate session whose bytes the attacker records: a tree release of a job.
  int fd = raw();
  Session s(key(1), true, ctl::Role::job);
  s.send(ctl::TreeRelease{5, 7});
  ASSERT_EQ(::send(fd, s.out().data(), s.out().size(), 0), ssize_t(s.out().size()));
  s.out().clear();
  std::byte b[4096];
  ssize_t n = ::recv(fd, b, sizeof b, 0);
  ASSERT_GE(n, ssize_t(ctl::kHelloBytes));
  ASSERT_TRUE(s.in(std::span(b, std::size_t(n))));
  const std::vector<std::byte> recorded = s.out();  // the hello + the sealed frame
  ASSERT_GT(recorded.size(), ctl::kHelloBytes);
  ASSERT_EQ(::send(fd, recorded.data(), recorded.size(), 0), ssize_t(recorded.size()));
  n = ::recv(fd, b, sizeof b, 0);  // the answer (a LeaseReply: unknown job)
  ASSERT_GT(n, 0);
  // The same frame again on the same connection: the counter moved on.
  ASSERT_EQ(::send(fd, recorded.data() + ctl::kHelloBytes, recorded.size() - ctl::kHelloBytes, 0),
            ssize_t(recorded.size() - ctl::kHelloBytes));
  EXPECT_TRUE(closed_by_server(fd));
  ::close(fd);
  // On a new connection (the server's nonce differs): refused.
  fd = raw();
  ASSERT_EQ(::send(fd, recorded.data(), recorded.size(), 0), ssize_t(recorded.size()));
  EXPECT_TRUE(closed_by_server(fd));
  ::close(fd);
  // Altered in one bit on a fresh session: refused.
  fd = raw();
  Session t(key(1), true, ctl::Role::job);
  ASSERT_EQ(::send(fd, t.out().data(), t.out().size(), 0), ssize_t(t.out().size()));
  t.out().clear();
  n = ::recv(fd, b, sizeof b, 0);
  ASSERT_TRUE(t.in(std::span(b, std::size_t(n))));
  t.send(ctl::StatusRequest{});
  auto f = t.out();
  f.back() ^= std::byte{1};
  ASSERT_EQ(::send(fd, f.data(), f.size(), 0), ssize_t(f.size()));
  EXPECT_TRUE(closed_by_server(fd));
  ::close(fd);
  EXPECT_NE(status().find("\"granted\":0"), std::string::npos);
}

TEST_F(Served, MessagesOfTheWrongRoleCloseTheConnection) {
  // A job pretending to be a switch (registering a switch of the fabric).
  Client c(addr_, key(1), ctl::Role::job, 5s);
  ctl::SwitchState st = s0_state();
  c.send(st, 5s);
  EXPECT_THROW(c.recv(5s), std::runtime_error);
  EXPECT_NE(status().find("\"registered\":false"), std::string::npos);
  // Garbage instead of a hello.
  int fd = raw();
  const char junk[] = "GET /metrics HTTP/1.1\r\n\r\n";
  ::send(fd, junk, sizeof junk, 0);
  EXPECT_TRUE(closed_by_server(fd));
  ::close(fd);
  EXPECT_NE(log().find("bad magic"), std::string::npos) << log();
}

TEST_F(Served, AJobWithoutARegisteredSwitchGetsAReasonNotAHang) {
  Client c(addr_, key(1), ctl::Role::job, 5s);
  auto m = c.call(ctl::TreeRequest{8, "x", {"h0", "h1"}}, 5s);
  auto& r = std::get<ctl::TreeReply>(m);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.why.find("has not registered"), std::string::npos) << r.why;
}

// A newcomer whose share a running job still holds waits for it as long as its request says
// (TreeRequest::wait_ms, from the job's INC_TIMEOUT), not the controller's admission deadline:
// here the switch never completes the running job's shrink (an idle job), so the newcomer is
// answered, with the reason, only once its own wait of 1.5 s is over, though switches must
// answer admissions within 0.3 s.
class ServedShortAdmit : public Served {
 protected:
  void SetUp() override {
    opts_.admit_timeout = 300 * sw::kMillisecond;
    Served::SetUp();
  }
};

TEST_F(ServedShortAdmit, ANewcomerWaitsForItsSlotsAsLongAsItsRequestSays) {
  Client agent(addr_, key(1), ctl::Role::switch_agent, 5s);
  ctl::SwitchState st = s0_state();
  st.incarnation = 1;
  agent.send(st, 5s);
  std::atomic<bool> stop{false};
  std::atomic<int> resizes{0};
  std::thread sw([&] {  // admits whatever it is asked; never finishes a resize (an idle job)
    while (!stop.load()) {
      auto m = agent.recv(100ms);
      if (!m) continue;
      if (auto* a = std::get_if<ctl::Admit>(&*m)) agent.send(ctl::Outcome{a->req, a->spec.job, 0}, 5s);
      if (std::holds_alternative<ctl::Resize>(*m)) ++resizes;
    }
  });
  Client a(addr_, key(1), ctl::Role::job, 5s);
  auto ra = std::get<ctl::TreeReply>(a.call(ctl::TreeRequest{64, "a", {"h0", "h1"}, 10000}, 5s));
  EXPECT_TRUE(ra.ok) << ra.why;
  EXPECT_EQ(ra.slots, 64u);
  Client b(addr_, key(1), ctl::Role::job, 5s);
  const auto t0 = std::chrono::steady_clock::now();
  auto rb = std::get<ctl::TreeReply>(b.call(ctl::TreeRequest{64, "b", {"h0", "h1"}, 1500}, 10s));
  const auto waited = std::chrono::steady_clock::now() - t0;
  stop.store(true);
  sw.join();
  EXPECT_FALSE(rb.ok);
  EXPECT_NE(rb.why.find("within its wait of 1500 ms"), std::string::npos) << rb.why;
  EXPECT_GE(waited, 1500ms);  // (a lower bound: it cannot have been answered sooner)
  EXPECT_GE(resizes.load(), 1);
}

}  // namespace
}  // namespace inc::control
