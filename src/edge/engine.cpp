#include "edge/engine.hpp"

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "edge/proxy.hpp"

namespace inc::edge {

namespace {

sockaddr_un unix_address(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof a.sun_path)
    throw Error(Error::Kind::config, fmt::format("edge socket path '{}' is empty or longer than {} bytes", path,
                                                 sizeof a.sun_path - 1));
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  return a;
}

}  // namespace

EdgeEngine::EdgeEngine(EngineConfig cfg) : cfg_(std::move(cfg)) {
  if (!cfg_.handlers) cfg_.handlers = std::make_shared<const HandlerRegistry>(HandlerRegistry::with_builtins());
  const sockaddr_un a = unix_address(cfg_.socket_path);
  // A socket file nobody answers on is a dead engine's: take its place. One that answers is
  // a live engine: refuse rather than steal its future connections.
  {
    transport::Fd probe(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    if (::connect(probe.get(), reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0)
      throw Error(Error::Kind::config, fmt::format("an edge engine already serves {}", cfg_.socket_path));
    if (errno == ECONNREFUSED) ::unlink(cfg_.socket_path.c_str());
  }
  listen_.reset(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!listen_ || ::bind(listen_.get(), reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(listen_.get(), 128) != 0)
    throw Error(Error::Kind::config, fmt::format("edge engine: cannot listen on {}: {}", cfg_.socket_path,
                                                 std::strerror(errno)));
  // Any local user may connect: admission is by job token and uid (SO_PEERCRED), per session.
  ::chmod(cfg_.socket_path.c_str(), 0666);
}

EdgeEngine::~EdgeEngine() {
  reap(true);
  ::unlink(cfg_.socket_path.c_str());
}

void EdgeEngine::log(const std::string& line) {
  if (cfg_.verbose) std::fprintf(stderr, "inc edge: %s\n", line.c_str());
}

std::string EdgeEngine::admit(std::uint64_t job, int rank, const std::uint8_t (&token)[32], std::uint32_t uid,
                              const std::string& handler) {
  std::lock_guard lk(mu_);
  auto [it, created] = sessions_.try_emplace(job);
  Session& s = it->second;
  if (created) {
    s.uid = uid;
    std::memcpy(s.token.data(), token, sizeof token);
    s.handler = handler;
    ++stats_.sessions;
  } else {
    // The same answer whatever failed, so that a stranger learns nothing about the session.
    if (s.uid != uid || CRYPTO_memcmp(s.token.data(), token, sizeof token) != 0)
      return fmt::format("job {:x}: wrong token or user for this job's session", job);
    if (s.ranks.count(rank)) return fmt::format("job {:x}: rank {} is already attached", job, rank);
    if (s.handler != handler)
      return fmt::format("job {:x}: rank {} names handler '{}' but the job's first rank named '{}'", job, rank, handler,
                         s.handler);
  }
  s.ranks[rank] = 1;
  ++stats_.connections;
  ++stats_.attached;
  return "";
}

void EdgeEngine::leave(std::uint64_t job, int rank) {
  std::lock_guard lk(mu_);
  auto it = sessions_.find(job);
  if (it == sessions_.end()) return;
  if (it->second.ranks.erase(rank)) --stats_.attached;
  if (it->second.ranks.empty()) sessions_.erase(it);  // the next job with this id starts afresh
}

EngineStats EdgeEngine::stats() const {
  std::lock_guard lk(mu_);
  EngineStats s = stats_;
  s.handler_headers = handler_counts_.headers;
  s.handler_payloads = handler_counts_.payloads;
  s.handler_completions = handler_counts_.completions;
  s.converted_messages = handler_counts_.converted_messages;
  s.deposited = handler_counts_.deposited;
  return s;
}

// Join the proxies that have finished (all: stop every proxy first).
void EdgeEngine::reap(bool all) {
  if (all) {
    stopping_ = true;
    for (auto& w : workers_)
      if (!*w.done) ::shutdown(w.sock, SHUT_RDWR);
  }
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (all || *it->done) {
      it->thread.join();
      it = workers_.erase(it);
    } else {
      ++it;
    }
  }
}

void EdgeEngine::run(const std::atomic<bool>& stop) {
  while (!stop) {
    pollfd pfd{listen_.get(), POLLIN, 0};
    ::poll(&pfd, 1, 100);
    reap(false);
    if (!(pfd.revents & POLLIN)) continue;
    transport::Fd c(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!c) continue;
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(c.get(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) continue;
    auto done = std::make_shared<std::atomic<bool>>(false);
    const int fd = c.get();
    Worker w;
    w.done = done;
    w.sock = fd;
    w.thread = std::thread([this, done, sock = std::move(c), uid = cred.uid]() mutable {
      try {
        RankProxy proxy(*this, std::move(sock), uid);
        proxy.run();
      } catch (const std::exception& e) {
        log(fmt::format("a proxy failed: {}", e.what()));
      }
      *done = true;
    });
    workers_.push_back(std::move(w));
  }
}

}  // namespace inc::edge
