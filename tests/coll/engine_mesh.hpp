// Runtime Engines (coll::Engine) of one process over connected socket pairs, for the executor's
// unit tests, which drive them from one thread: `EngineMesh`, n engines fully connected (comm 0
// the world), and `RawPeer`, rank 0's engine whose rank 1 is a raw socket the test writes by
// hand (a hostile or hand-made peer).
#pragma once

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "coll/executor.hpp"

namespace inc::coll::test {

struct EngineMesh {
  std::vector<std::unique_ptr<Engine>> e;
  explicit EngineMesh(int n, std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    std::vector<std::vector<int>> fds(n, std::vector<int>(n, -1));
    for (int a = 0; a < n; ++a)
      for (int b = a + 1; b < n; ++b) {
        int sv[2];
        EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        fds[a][b] = sv[0];
        fds[b][a] = sv[1];
      }
    std::vector<int> world;
    for (int r = 0; r < n; ++r) world.push_back(r);
    for (int r = 0; r < n; ++r) {
      e.push_back(std::make_unique<Engine>(std::make_unique<transport::TcpMesh>(r, fds[r]), timeout));
      e.back()->add_comm(0, world);
    }
  }
  // `rounds` rounds of every engine's event loop, none of them blocking.
  void progress(int rounds = 50) {
    for (int k = 0; k < rounds; ++k)
      for (auto& x : e) x->progress(0);
  }
};

struct RawPeer {
  int sv[2] = {-1, -1};  // sv[1]: rank 1's end
  std::unique_ptr<Engine> e;
  explicit RawPeer(std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
    EXPECT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    e = std::make_unique<Engine>(std::make_unique<transport::TcpMesh>(0, std::vector<int>{-1, sv[0]}), timeout);
    e->add_comm(0, {0, 1});
  }
  ~RawPeer() { ::close(sv[1]); }
  RawPeer(const RawPeer&) = delete;
  RawPeer& operator=(const RawPeer&) = delete;
  // Writes `n` bytes as rank 1, running rank 0's event loop (then `each`) after every attempt,
  // so that a full socket drains; gives up after 20 s (a hang, not a speed check). Returns the
  // bytes written.
  std::size_t write(const void* p, std::size_t n, const std::function<void()>& each = {}) {
    const auto* bytes = static_cast<const char*>(p);
    std::size_t sent = 0;
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (sent < n && std::chrono::steady_clock::now() < until) {
      const ssize_t w = ::send(sv[1], bytes + sent, n - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (w > 0) sent += static_cast<std::size_t>(w);
      e->progress(0);
      if (each) each();
    }
    return sent;
  }
};

}  // namespace inc::coll::test
