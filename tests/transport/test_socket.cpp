// Socket utilities: address parsing, listen/connect/accept, deadline-bounded transfers and the
// choice of the address peers use to reach this process.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <thread>

#include "tests/transport/test_util.hpp"
#include "transport/socket.hpp"

using namespace inc::transport;
using inc::Error;
using inc::testing::expect_error;
using std::chrono::milliseconds;

namespace {

bool fd_open(int fd) { return ::fcntl(fd, F_GETFD) != -1 || errno != EBADF; }

}  // namespace

TEST(HostPort, ParsesNamesIpv4AndBracketedIpv6) {
  auto a = parse_host_port("127.0.0.1:29500", "INC_STORE");
  EXPECT_EQ(a.host, "127.0.0.1");
  EXPECT_EQ(a.port, 29500);
  auto b = parse_host_port("node-17.cluster:1", "INC_STORE");
  EXPECT_EQ(b.host, "node-17.cluster");
  EXPECT_EQ(b.port, 1);
  auto c = parse_host_port("[::1]:65535", "INC_STORE");
  EXPECT_EQ(c.host, "::1");
  EXPECT_EQ(c.port, 65535);
  EXPECT_EQ(c.to_string(), "[::1]:65535");
  EXPECT_EQ(a.to_string(), "127.0.0.1:29500");
  EXPECT_EQ(parse_host_port("h:0", "x", /*allow_port_zero=*/true).port, 0);
}

TEST(HostPort, RejectsMalformedAddressesNamingTheSource) {
  for (const char* bad :
       {"", "host", "host:", ":80", "host:0", "host:65536", "host:-1", "host:abc", "host:80x",
        "::1:80", "[::1]80", "[::1]", "[zz]:80", "[::1:80", "ho st:80", "host:+80", "host: 80"}) {
    auto e = expect_error([&] { parse_host_port(bad, "INC_STORE"); }, Error::Kind::config);
    std::string msg = e.what();
    EXPECT_NE(msg.find("INC_STORE"), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::string("'") + bad + "'"), std::string::npos) << msg;
  }
}

TEST(HostPort, PortParsing) {
  EXPECT_EQ(parse_port("1", "P"), 1);
  EXPECT_EQ(parse_port("65535", "P"), 65535);
  for (const char* bad : {"", "0", "65536", "-5", "1.5", "99999999999999999999"}) {
    auto e = expect_error([&] { parse_port(bad, "MASTER_PORT"); }, Error::Kind::config);
    EXPECT_NE(std::string(e.what()).find("MASTER_PORT"), std::string::npos);
  }
}

TEST(Fd, ClosesOnDestructionAndMoves) {
  int raw[2];
  ASSERT_EQ(::pipe(raw), 0);
  {
    Fd a(raw[0]);
    Fd b(std::move(a));
    EXPECT_FALSE(a.valid());
    EXPECT_EQ(b.get(), raw[0]);
    Fd c;
    c = std::move(b);
    EXPECT_TRUE(fd_open(raw[0]));
    Fd d(raw[1]);
    int released = d.release();
    EXPECT_EQ(released, raw[1]);
  }
  EXPECT_FALSE(fd_open(raw[0]));
  EXPECT_TRUE(fd_open(raw[1]));  // released, not closed
  ::close(raw[1]);
}

TEST(Tcp, ListenConnectAcceptAndTransfer) {
  auto l = listen_tcp("127.0.0.1", 0);
  ASSERT_GT(l.port, 0);
  auto client = connect_tcp("127.0.0.1", l.port, deadline_after(milliseconds(10000)));
  std::string peer;
  auto server = accept_tcp(l.fd.get(), deadline_after(milliseconds(10000)), &peer);
  EXPECT_EQ(peer.rfind("127.0.0.1:", 0), 0u) << peer;
  EXPECT_EQ(local_endpoint(l.fd.get()), "127.0.0.1:" + std::to_string(l.port));

  // Large enough to need several partial sends on a non-blocking socket.
  std::string data(8 << 20, '\0');
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 131 + 7);
  set_nonblocking(client.get());
  set_buffer_sizes(client.get(), 64 << 10, 64 << 10);
  std::thread sender(
      [&] { send_all(client.get(), data, deadline_after(milliseconds(60000)), "test send"); });
  std::string got(data.size(), '\0');
  recv_all(server.get(), std::as_writable_bytes(std::span(got.data(), got.size())),
           deadline_after(milliseconds(60000)), "test recv");
  sender.join();
  EXPECT_TRUE(got == data);
}

TEST(Tcp, RecvTimesOutAndReportsPeerClose) {
  auto l = listen_tcp("127.0.0.1", 0);
  auto client = connect_tcp("127.0.0.1", l.port, deadline_after(milliseconds(10000)));
  auto server = accept_tcp(l.fd.get(), deadline_after(milliseconds(10000)));
  std::byte buf[16];
  auto e = expect_error(
      [&] { recv_all(server.get(), buf, deadline_after(milliseconds(20)), "hello from rank 1"); },
      Error::Kind::timeout);
  EXPECT_NE(std::string(e.what()).find("hello from rank 1"), std::string::npos);
  EXPECT_NE(std::string(e.what()).find("0 of 16"), std::string::npos) << e.what();

  send_all(client.get(), std::string_view("abcd"), deadline_after(milliseconds(10000)), "t");
  client.reset();
  auto e2 = expect_error(
      [&] { recv_all(server.get(), buf, deadline_after(milliseconds(10000)), "reply"); },
      Error::Kind::peer_failure);
  EXPECT_NE(std::string(e2.what()).find("4 of 16"), std::string::npos) << e2.what();
}

TEST(Tcp, SendToClosedPeerIsPeerFailureNotSigpipe) {
  auto l = listen_tcp("127.0.0.1", 0);
  auto client = connect_tcp("127.0.0.1", l.port, deadline_after(milliseconds(10000)));
  { auto server = accept_tcp(l.fd.get(), deadline_after(milliseconds(10000))); }
  std::string chunk(1 << 16, 'x');
  expect_error(
      [&] {
        for (int i = 0; i < 1000; ++i)
          send_all(client.get(), chunk, deadline_after(milliseconds(10000)), "to closed peer");
      },
      Error::Kind::peer_failure);
}

TEST(Tcp, ConnectRetriesUntilTheListenerAppears) {
  int port;
  {
    auto probe = listen_tcp("127.0.0.1", 0);
    port = probe.port;
  }
  Fd connected;
  std::string error;
  std::thread t([&] {
    try {
      connected = connect_tcp("127.0.0.1", port, deadline_after(milliseconds(30000)));
    } catch (const Error& e) {
      error = e.what();
    }
  });
  // Give the connector time to be refused at least once (ordering only; nothing is timed).
  std::this_thread::sleep_for(milliseconds(100));
  auto l = listen_tcp("127.0.0.1", port);
  auto s = accept_tcp(l.fd.get(), deadline_after(milliseconds(30000)));
  t.join();
  EXPECT_TRUE(connected.valid()) << error;
}

TEST(Tcp, ConnectTimeoutNamesTheAddress) {
  int port;
  {
    auto probe = listen_tcp("127.0.0.1", 0);
    port = probe.port;
  }
  auto e = expect_error([&] { connect_tcp("127.0.0.1", port, deadline_after(milliseconds(50))); },
                        Error::Kind::timeout);
  std::string msg = e.what();
  EXPECT_NE(msg.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << msg;
  EXPECT_NE(msg.find("refused"), std::string::npos) << msg;
}

TEST(Tcp, AcceptTimesOut) {
  auto l = listen_tcp("127.0.0.1", 0);
  expect_error([&] { accept_tcp(l.fd.get(), deadline_after(milliseconds(10))); },
               Error::Kind::timeout);
}

TEST(Tcp, ListenOnBusyPortFails) {
  auto l = listen_tcp("127.0.0.1", 0);
  auto e = expect_error([&] { listen_tcp("127.0.0.1", l.port); }, Error::Kind::network);
  EXPECT_NE(std::string(e.what()).find(std::to_string(l.port)), std::string::npos);
}

TEST(LocalAddress, HonoursIncHostThenIfaceThenRouteToStore) {
  EXPECT_EQ(local_address_for_peers(map_env({{"INC_HOST", "node7-ib"}}), "127.0.0.1", 1234),
            "node7-ib");
  EXPECT_EQ(local_address_for_peers(map_env({{"INC_IFACE", "lo"}})), "127.0.0.1");
  EXPECT_EQ(local_address_for_peers(map_env({}), "127.0.0.1", 1234), "127.0.0.1");
  EXPECT_EQ(local_address_for_peers(map_env({})), "127.0.0.1");
  auto e = expect_error(
      [&] {
        local_address_for_peers(map_env({{"INC_IFACE", "nosuchif0"}}));
      },
      Error::Kind::config);
  std::string msg = e.what();
  EXPECT_NE(msg.find("nosuchif0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("lo"), std::string::npos) << msg;  // lists the interfaces that exist
}

TEST(LocalAddress, IsLocalHost) {
  EXPECT_TRUE(is_local_host("127.0.0.1"));
  EXPECT_TRUE(is_local_host("localhost"));
  EXPECT_FALSE(is_local_host("192.0.2.1"));  // TEST-NET-1, never assigned
  EXPECT_FALSE(is_local_host("no-such-host.invalid"));
}
