// Rendezvous store: semantics across threads and processes, timeouts, and resilience of the
// server to malformed clients.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/transport/test_util.hpp"
#include "transport/store.hpp"

using namespace inc::transport;
using inc::Error;
using inc::testing::expect_error;
using std::chrono::milliseconds;

namespace {

constexpr milliseconds kLong{30000};  // generous deadline for things that must happen

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Raw little-endian request building for the malformed-input tests.
void put_u32(std::string& b, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<char>(v >> (8 * i)));
}
std::string frame(const std::string& body) {
  std::string f;
  put_u32(f, static_cast<std::uint32_t>(body.size()));
  return f + body;
}
std::string hello() {
  std::string b(1, '\x01');
  put_u32(b, kStoreMagic);
  b.push_back(static_cast<char>(kStoreVersion & 0xff));
  b.push_back(static_cast<char>(kStoreVersion >> 8));
  return frame(b);
}

// Sends raw bytes on a fresh connection and reports whether the server closed it (EOF) after
// answering at most `replies_expected` bytes of replies.
bool server_closes_after(int port, const std::string& bytes) {
  Fd fd = connect_tcp("127.0.0.1", port, deadline_after(kLong));
  try {
    send_all(fd.get(), bytes, deadline_after(kLong), "raw");
  } catch (const Error&) {
    return true;  // reset while sending: closed
  }
  // Drain whatever replies come (e.g. the hello reply) until EOF or the deadline.
  auto deadline = deadline_after(kLong);
  std::byte buf[256];
  for (;;) {
    try {
      recv_all(fd.get(), std::span(buf, 1), deadline, "raw reply");
    } catch (const Error& e) {
      return e.kind() == Error::Kind::peer_failure;
    }
  }
}

}  // namespace

TEST(Store, SetGetAddCheckWaitErase) {
  StoreServer server("127.0.0.1", 0);
  ASSERT_GT(server.port(), 0);
  StoreClient c("127.0.0.1", server.port());
  c.set("a", "1");
  EXPECT_EQ(c.get("a", kLong), "1");
  c.set("a", "overwritten");
  EXPECT_EQ(c.get("a", kLong), "overwritten");
  EXPECT_EQ(c.try_get("missing"), std::nullopt);
  EXPECT_EQ(c.add("n", 5), 5);
  EXPECT_EQ(c.add("n", -7), -2);
  EXPECT_EQ(c.get("n", kLong), "-2");
  std::vector<std::string> keys{"a", "n"};
  EXPECT_TRUE(c.check(keys));
  keys.push_back("nope");
  EXPECT_FALSE(c.check(keys));
  c.wait(std::span(keys.data(), 2), kLong);
  EXPECT_EQ(c.wait_any(std::vector<std::string>{"nope", "n"}, kLong), 1u);
  EXPECT_TRUE(c.erase("a"));
  EXPECT_FALSE(c.erase("a"));
  EXPECT_EQ(c.try_get("a"), std::nullopt);
  EXPECT_TRUE(c.set_if_absent("first", "x"));
  EXPECT_FALSE(c.set_if_absent("first", "y"));
  EXPECT_EQ(c.get("first", kLong), "x");
  EXPECT_EQ(server.peek("first"), "x");
  EXPECT_EQ(server.peek("a"), std::nullopt);
}

TEST(Store, BinaryAndLargeValuesRoundTrip) {
  StoreServer server;
  StoreClient c("127.0.0.1", server.port());
  std::string bin("\0\x01\xff\0zz", 6);
  c.set(std::string("k\0ey", 4), bin);
  EXPECT_EQ(c.get(std::string("k\0ey", 4), kLong), bin);
  std::string big(5 << 20, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i % 251);
  c.set("big", big);
  EXPECT_TRUE(c.get("big", kLong) == big);
  c.set("empty", "");
  EXPECT_EQ(c.get("empty", kLong), "");
}

TEST(Store, ClientSideLimitsAreInvalidArgument) {
  StoreServer server;
  StoreClient c("127.0.0.1", server.port());
  expect_error([&] { c.set(std::string(kMaxStoreKeyBytes + 1, 'k'), "v"); },
               Error::Kind::invalid_argument);
  expect_error([&] { c.get("k", milliseconds(-1)); }, Error::Kind::invalid_argument);
  expect_error([&] { c.wait(std::vector<std::string>{}, kLong); }, Error::Kind::invalid_argument);
  c.set("still", "usable");
  EXPECT_EQ(c.get("still", kLong), "usable");
}

TEST(Store, AddOnNonIntegerIsAnErrorAndTheConnectionSurvives) {
  StoreServer server;
  StoreClient c("127.0.0.1", server.port());
  c.set("text", "hello");
  auto e = expect_error([&] { c.add("text", 1); }, Error::Kind::invalid_argument);
  EXPECT_TRUE(contains(e.what(), "'text'")) << e.what();
  c.set("max", std::to_string(INT64_MAX));
  expect_error([&] { c.add("max", 1); }, Error::Kind::invalid_argument);
  EXPECT_EQ(c.add("fine", 2), 2);
}

TEST(Store, GetBlocksUntilAnotherThreadSets) {
  StoreServer server;
  StoreClient waiter("127.0.0.1", server.port());
  std::string got;
  std::thread t([&] { got = waiter.get("late", kLong); });
  StoreClient setter("127.0.0.1", server.port());
  setter.set("late", "value");
  t.join();
  EXPECT_EQ(got, "value");
}

TEST(Store, GetTimeoutNamesKeyStoreAndTimeWaited) {
  StoreServer server;
  StoreClient c("127.0.0.1", server.port());
  auto e = expect_error([&] { c.get("rank/3/addr", milliseconds(50)); }, Error::Kind::timeout);
  std::string msg = e.what();
  EXPECT_TRUE(contains(msg, "'rank/3/addr'")) << msg;
  EXPECT_TRUE(contains(msg, "50 ms")) << msg;
  EXPECT_TRUE(contains(msg, "waited")) << msg;
  EXPECT_TRUE(contains(msg, "127.0.0.1:" + std::to_string(server.port()))) << msg;
  // The connection is still in step after a server-side timeout.
  c.set("rank/3/addr", "x");
  EXPECT_EQ(c.get("rank/3/addr", kLong), "x");
}

TEST(Store, WaitTimeoutListsOnlyMissingKeys) {
  StoreServer server;
  StoreClient c("127.0.0.1", server.port());
  c.set("present", "1");
  auto e = expect_error(
      [&] {
        c.wait(std::vector<std::string>{"present", "absent1", "absent2"}, milliseconds(30));
      },
      Error::Kind::timeout);
  std::string msg = e.what();
  EXPECT_TRUE(contains(msg, "2 of 3")) << msg;
  EXPECT_TRUE(contains(msg, "'absent1'")) << msg;
  EXPECT_TRUE(contains(msg, "'absent2'")) << msg;
  EXPECT_FALSE(contains(msg, "'present'")) << msg;
  expect_error([&] { c.wait_any(std::vector<std::string>{"absent1"}, milliseconds(10)); },
               Error::Kind::timeout);
}

TEST(Store, ConcurrentAddsAreAtomic) {
  StoreServer server;
  constexpr int kThreads = 8, kAdds = 200;
  std::vector<std::vector<std::int64_t>> seen(kThreads);
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([&, t] {
      StoreClient c("127.0.0.1", server.port());
      for (int i = 0; i < kAdds; ++i) seen[t].push_back(c.add("counter", 1));
    });
  for (auto& t : ts) t.join();
  std::set<std::int64_t> all;
  for (auto& v : seen) all.insert(v.begin(), v.end());
  EXPECT_EQ(all.size(), static_cast<std::size_t>(kThreads * kAdds));
  EXPECT_EQ(*all.begin(), 1);
  EXPECT_EQ(*all.rbegin(), kThreads * kAdds);
}

TEST(Store, ManyWaitersReleasedBySingleSet) {
  StoreServer server;
  constexpr int kWaiters = 16;
  std::atomic<int> ok{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < kWaiters; ++i)
    ts.emplace_back([&] {
      StoreClient c("127.0.0.1", server.port());
      c.wait(std::vector<std::string>{"go", "go2"}, kLong);
      if (c.get("go", kLong) == "now") ++ok;
    });
  StoreClient c("127.0.0.1", server.port());
  c.set("go", "now");
  c.set("go2", "too");
  for (auto& t : ts) t.join();
  EXPECT_EQ(ok.load(), kWaiters);
}

// Children are forked before the server thread exists (fork in a single-threaded process);
// they learn the port through a pipe.
TEST(Store, WorksAcrossForkedProcesses) {
  constexpr int kProcs = 4;
  std::vector<pid_t> pids;
  std::vector<int> port_pipes;
  for (int r = 0; r < kProcs; ++r) {
    int p[2];
    ASSERT_EQ(::pipe(p), 0);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(p[1]);
      int port = 0;
      if (::read(p[0], &port, sizeof port) != sizeof port) ::_exit(10);
      try {
        StoreClient c("127.0.0.1", port);
        c.set("proc/" + std::to_string(r), std::to_string(getpid()));
        auto n = c.add("arrived", 1);
        if (n < 1 || n > kProcs) ::_exit(11);
        barrier(c, "forked", kProcs, r, kLong);
        // After the barrier every process's key exists.
        for (int o = 0; o < kProcs; ++o)
          if (!c.try_get("proc/" + std::to_string(o))) ::_exit(12);
        if (c.get("arrived", kLong) != std::to_string(kProcs)) ::_exit(13);
        barrier(c, "done", kProcs, r, kLong);
      } catch (const Error& e) {
        std::fprintf(stderr, "child %d: %s\n", r, e.what());
        ::_exit(14);
      }
      ::_exit(0);
    }
    ::close(p[0]);
    pids.push_back(pid);
    port_pipes.push_back(p[1]);
  }
  {
    StoreServer server;
    int port = server.port();
    for (int fd : port_pipes) {
      ASSERT_EQ(::write(fd, &port, sizeof port), static_cast<ssize_t>(sizeof port));
      ::close(fd);
    }
    for (pid_t pid : pids) {
      int status = 0;
      ASSERT_EQ(::waitpid(pid, &status, 0), pid);  // children bound their own waits
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
    }
    for (int r = 0; r < kProcs; ++r)
      EXPECT_EQ(server.peek("proc/" + std::to_string(r)), std::to_string(pids[r]));
  }
}

TEST(Store, MalformedRequestsCloseOnlyThatConnection) {
  StoreServer server;
  StoreClient good("127.0.0.1", server.port());
  good.set("k", "v");
  // A client already waiting must survive everything below.
  StoreClient waiter("127.0.0.1", server.port());
  std::string waited;
  std::thread t([&] { waited = waiter.get("released", kLong); });

  std::vector<std::string> bad = {
      "GET / HTTP/1.1\r\nHost: x\r\n\r\n",                       // not our protocol at all
      frame(std::string("\x02\x01\0\0\0k\x01\0\0\0v", 11)),      // set before hello
      hello() + frame(std::string("\x63", 1)),                   // unknown op
      hello() + std::string("\0\0\0\0", 4),                      // zero-length frame
      hello() + frame(std::string("\x02\xff\xff\xff\x7f", 5)),   // key length huge
      hello() + frame(std::string("\x02\x01\0\0\0k", 6)),        // set without value
      hello() + frame(std::string("\x08\x01\0\0\0kEXTRA", 11)),  // trailing bytes
      hello() + frame(std::string("\x06\0\0\0\0", 5)),           // check with 0 keys
      hello() + frame(std::string("\x07\x01\0\0\0\x01\0\0\0k\x02\0\0\0\0", 15)),  // bad mode
      hello() + frame(std::string("\x04\x01\0\0\0k\xff\xff\xff\xff", 10)),        // timeout too big
      hello() + hello(),                                                          // second hello
  };
  {
    std::string b = frame(std::string("\x01\x49\x4e\x43\x58\x01\x00", 7));  // wrong magic
    bad.push_back(b);
    std::string oversized;
    put_u32(oversized, static_cast<std::uint32_t>(kMaxStoreFrameBytes + 1));
    bad.push_back(hello() + oversized);
  }
  for (std::size_t i = 0; i < bad.size(); ++i)
    EXPECT_TRUE(server_closes_after(server.port(), bad[i])) << "case " << i;

  // Truncated frame then close: the server just drops the connection.
  {
    Fd fd = connect_tcp("127.0.0.1", server.port(), deadline_after(kLong));
    send_all(fd.get(), hello() + std::string("\x10\0\0\0\x02", 5), deadline_after(kLong), "raw");
  }
  auto st = server.stats();
  EXPECT_EQ(st.bad_requests, bad.size());
  EXPECT_FALSE(st.last_bad_request.empty());

  EXPECT_EQ(good.get("k", kLong), "v");
  StoreClient fresh("127.0.0.1", server.port());
  fresh.set("released", "yes");
  t.join();
  EXPECT_EQ(waited, "yes");
}

TEST(Store, VersionMismatchIsReportedToTheClient) {
  StoreServer server;
  Fd fd = connect_tcp("127.0.0.1", server.port(), deadline_after(kLong));
  std::string b(1, '\x01');
  put_u32(b, kStoreMagic);
  b += std::string("\x63\x00", 2);  // version 99
  send_all(fd.get(), frame(b), deadline_after(kLong), "raw");
  std::byte hdr[4];
  recv_all(fd.get(), hdr, deadline_after(kLong), "reply");
  std::uint32_t len = 0;
  for (int i = 3; i >= 0; --i) len = (len << 8) | static_cast<std::uint8_t>(hdr[i]);
  ASSERT_GT(len, 5u);
  std::string body(len, '\0');
  recv_all(fd.get(), std::as_writable_bytes(std::span(body.data(), body.size())),
           deadline_after(kLong), "reply");
  EXPECT_EQ(body[0], 2);  // error status
  EXPECT_TRUE(contains(body, "version mismatch")) << body;
}

TEST(Store, ServerShutdownWakesBlockedClientWithPeerFailure) {
  auto server = std::make_unique<StoreServer>();
  StoreClient c("127.0.0.1", server->port());
  c.set("x", "1");  // connected and past hello
  std::atomic<int> kind{-1};
  std::thread t([&] {
    try {
      c.get("never", kLong);
    } catch (const Error& e) {
      kind = static_cast<int>(e.kind());
    }
  });
  server.reset();
  t.join();
  EXPECT_EQ(kind.load(), static_cast<int>(Error::Kind::peer_failure));
  // The client stays broken with the original cause.
  auto e = expect_error([&] { c.set("y", "2"); }, Error::Kind::network);
  EXPECT_TRUE(contains(e.what(), "earlier failure")) << e.what();
}

TEST(Store, ConnectTimeoutWhenNoServer) {
  int port;
  {
    auto probe = listen_tcp("127.0.0.1", 0);
    port = probe.port;
  }
  StoreClient::Options o;
  o.connect_timeout = milliseconds(50);
  auto e = expect_error([&] { StoreClient c("127.0.0.1", port, o); }, Error::Kind::timeout);
  EXPECT_TRUE(contains(e.what(), "rendezvous store")) << e.what();
}

TEST(StoreBarrier, AllThreadsPass) {
  StoreServer server;
  constexpr int kWorld = 5;
  std::atomic<int> passed{0};
  std::vector<std::thread> ts;
  for (int r = 0; r < kWorld; ++r)
    ts.emplace_back([&, r] {
      StoreClient c("127.0.0.1", server.port());
      barrier(c, "b1", kWorld, r, kLong);
      barrier(c, "b2", kWorld, r, kLong);
      ++passed;
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(passed.load(), kWorld);
}

TEST(StoreBarrier, TimeoutSaysHowManyArrived) {
  StoreServer server;
  StoreClient other("127.0.0.1", server.port());
  other.add("barrier/init/count", 1);  // one other rank already arrived
  StoreClient c("127.0.0.1", server.port());
  auto e = expect_error([&] { barrier(c, "init", 3, 0, milliseconds(30)); }, Error::Kind::timeout);
  EXPECT_TRUE(contains(e.what(), "only 2 of 3")) << e.what();
  EXPECT_TRUE(contains(e.what(), "'init'")) << e.what();
}

TEST(StoreBarrier, AbortWakesWaitersWithTheReason) {
  StoreServer server;
  std::string error;
  std::thread t([&] {
    StoreClient c("127.0.0.1", server.port());
    try {
      barrier(c, "init", 2, 0, kLong);
    } catch (const Error& e) {
      if (e.kind() == Error::Kind::peer_failure) error = e.what();
    }
  });
  StoreClient failing("127.0.0.1", server.port());
  EXPECT_TRUE(publish_abort(failing, 1, "CUDA out of memory"));
  t.join();
  EXPECT_TRUE(contains(error, "rank 1 failed: CUDA out of memory")) << error;
}

TEST(StoreBarrier, RejectsBadArgumentsAndReuse) {
  StoreServer server;
  StoreClient c("127.0.0.1", server.port());
  expect_error([&] { barrier(c, "x", 2, 2, kLong); }, Error::Kind::invalid_argument);
  expect_error([&] { barrier(c, "x", 0, 0, kLong); }, Error::Kind::invalid_argument);
  barrier(c, "solo", 1, 0, kLong);
  expect_error([&] { barrier(c, "solo", 1, 0, kLong); }, Error::Kind::mismatch);
}

TEST(StoreAbort, FirstPublisherWins) {
  StoreServer server;
  StoreClient a("127.0.0.1", server.port());
  StoreClient b("127.0.0.1", server.port());
  EXPECT_EQ(poll_abort(a), std::nullopt);
  check_abort(a);  // nothing published: no throw
  EXPECT_TRUE(publish_abort(a, 2, "first"));
  EXPECT_FALSE(publish_abort(b, 0, "second"));
  EXPECT_EQ(poll_abort(b), "rank 2 failed: first");
  EXPECT_EQ(server.peek("abort/0"), "rank 0 failed: second");
  auto e = expect_error([&] { check_abort(b); }, Error::Kind::peer_failure);
  EXPECT_EQ(std::string(e.what()), "rank 2 failed: first");
}

// Seeded mutation of valid requests (a cheap, always-on companion of the libFuzzer target
// fuzz_store_server): whatever arrives, the server answers or closes that connection, and keeps
// serving everybody else. INC_TEST_SEED replays a failing run.
TEST(Store, SurvivesMutatedRequests) {
  std::uint64_t seed = 20240601;
  if (const char* s = std::getenv("INC_TEST_SEED")) seed = std::strtoull(s, nullptr, 10);
  SCOPED_TRACE("INC_TEST_SEED=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  auto pick = [&](std::uint64_t n) { return static_cast<std::size_t>(rng() % n); };
  auto str = [&](std::size_t max) {
    std::string s(pick(max + 1), '\0');
    for (auto& c : s) c = static_cast<char>(rng());
    return s;
  };
  auto field = [&](std::string& b, const std::string& s) {
    put_u32(b, static_cast<std::uint32_t>(s.size()));
    b += s;
  };
  auto valid_request = [&] {
    std::string b(1, static_cast<char>(1 + pick(8)));
    switch (b[0]) {
      case 1:
        put_u32(b, kStoreMagic);
        b += std::string("\x01\x00", 2);
        break;
      case 2:
      case 3:
        field(b, str(8));
        field(b, str(16));
        break;
      case 4:
        field(b, str(8));
        put_u32(b, static_cast<std::uint32_t>(pick(3)));
        break;
      case 5:
        field(b, str(8));
        put_u32(b, static_cast<std::uint32_t>(rng()));
        put_u32(b, 0);
        break;
      case 6:
      case 7: {
        std::uint32_t n = 1 + static_cast<std::uint32_t>(pick(3));
        put_u32(b, n);
        for (std::uint32_t i = 0; i < n; ++i) field(b, str(8));
        if (b[0] == 7) {
          b.push_back(static_cast<char>(pick(2)));
          put_u32(b, static_cast<std::uint32_t>(pick(3)));
        }
        break;
      }
      default:
        field(b, str(8));
    }
    return frame(b);
  };

  StoreServer server;
  StoreClient control("127.0.0.1", server.port());
  control.set("control", "ok");
  for (int iter = 0; iter < 400; ++iter) {
    std::string bytes = hello();
    for (std::size_t i = 0, n = 1 + pick(4); i < n; ++i) bytes += valid_request();
    switch (pick(5)) {
      case 0:
        bytes[4 + pick(bytes.size() - 4)] ^= static_cast<char>(1 + pick(255));
        break;
      case 1:
        bytes.resize(4 + pick(bytes.size() - 4));
        break;
      case 2:
        bytes.insert(4 + pick(bytes.size() - 4), str(8));
        break;
      case 3: {
        std::size_t at = pick(bytes.size() - 3);
        for (int k = 0; k < 4; ++k) bytes[at + k] = static_cast<char>(rng());
        break;
      }
      default:
        break;  // valid as generated
    }
    Fd fd = connect_tcp("127.0.0.1", server.port(), deadline_after(kLong));
    try {
      send_all(fd.get(), bytes, deadline_after(kLong), "mutated");
    } catch (const Error&) {
      continue;  // the server already closed it
    }
    ::shutdown(fd.get(), SHUT_WR);
    // The server must end this connection by itself (answer what it can, then close on EOF).
    std::byte buf[4096];
    bool closed = false;
    auto deadline = deadline_after(kLong);
    for (;;) {
      try {
        recv_all(fd.get(), std::span(buf, 1), deadline, "mutated reply");
      } catch (const Error& e) {
        closed = e.kind() == Error::Kind::peer_failure;
        break;
      }
    }
    ASSERT_TRUE(closed) << "iteration " << iter;
  }
  // Both paths were exercised: malformed requests rejected, valid ones served.
  auto st = server.stats();
  EXPECT_GT(st.bad_requests, 100u);
  EXPECT_GT(st.requests, 400u);
  EXPECT_EQ(control.get("control", kLong), "ok");
  StoreClient fresh("127.0.0.1", server.port());
  EXPECT_EQ(fresh.add("after", 1), 1);
}
