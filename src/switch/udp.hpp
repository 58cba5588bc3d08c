// The real-network driver of the sans-IO state machines: UDP sockets with batched
// recvmmsg/sendmmsg, an epoll loop, and a seeded fault injector in the transport (loss,
// duplication, reordering, delay of outgoing datagrams) for tests on real sockets.
// IPv4 only (Endpoint packs address and port).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <queue>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "src/switch/dataplane.hpp"
#include "src/switch/worker.hpp"

namespace inc::sw {

Nanos monotonic_now();

// "a.b.c.d:port", "localhost:port" or ":port"/"port" (0.0.0.0). Returns nullopt if invalid.
std::optional<Endpoint> parse_endpoint(std::string_view s);

struct FaultConfig {
  double loss = 0, dup = 0, reorder = 0;
  Nanos delay = 0;                         // added to every datagram
  Nanos jitter = 0;                        // uniform extra delay
  Nanos reorder_delay = 2 * kMillisecond;  // extra delay of a reordered datagram
  std::uint64_t seed = 1;
  bool enabled() const { return loss > 0 || dup > 0 || reorder > 0 || delay > 0 || jitter > 0; }
};

// Decides the fate of each outgoing datagram from one seed; holds delayed ones until due.
class FaultInjector {
 public:
  explicit FaultInjector(const FaultConfig& f) : f_(f), rng_(f.seed) {}
  // Queue `bytes` for `to`; the datagram (or its copies) become due at some time >= now.
  void submit(Endpoint to, std::span<const std::byte> bytes, Nanos now);
  // Move the datagrams due at `now` into `out` (their bytes stay valid until the next call).
  void due(Nanos now, Outbox& out);
  Nanos next_due() const;
  std::uint64_t lost = 0, duplicated = 0, reordered = 0;

 private:
  struct Held {
    Nanos at;
    std::uint64_t seq;
    Endpoint to;
    std::vector<std::byte> bytes;
    bool operator>(const Held& o) const { return at != o.at ? at > o.at : seq > o.seq; }
  };
  double uniform() { return std::uniform_real_distribution<double>(0, 1)(rng_); }
  FaultConfig f_;
  std::mt19937_64 rng_;
  std::uint64_t seq_ = 0;
  std::priority_queue<Held, std::vector<Held>, std::greater<>> q_;
};

// A bound UDP socket with batched I/O and an epoll wait that another thread can interrupt.
class UdpPort {
 public:
  explicit UdpPort(Endpoint bind, std::size_t batch = 32);
  ~UdpPort();
  UdpPort(const UdpPort&) = delete;
  UdpPort& operator=(const UdpPort&) = delete;
  Endpoint local() const { return local_; }
  // The socket, for a caller's own event loop (readable: call recv_batch until it returns 0).
  int fd() const { return fd_; }

  // Wait until a datagram is readable, `timeout` passes or wake() is called.
  void wait(Nanos timeout);
  void wake();  // thread-safe
  // Receive up to `batch` datagrams without blocking; returns how many.
  std::size_t recv_batch();
  std::span<const std::byte> datagram(std::size_t i) const;
  Endpoint from(std::size_t i) const { return from_[i]; }
  // Send every entry of the outbox (through the injector if given) and clear it.
  void send_all(Outbox& out, FaultInjector* inj, Nanos now);
  // Send the injector's due datagrams.
  void send_due(FaultInjector& inj, Nanos now);

  std::uint64_t send_errors = 0, recv_datagrams = 0, sent_datagrams = 0;

 private:
  void send_entries(const Outbox& out);
  int fd_ = -1, ep_ = -1, ev_ = -1;
  Endpoint local_;
  std::size_t batch_;
  std::vector<std::byte> bufs_;
  std::vector<std::size_t> lens_;
  std::vector<Endpoint> from_;
  std::vector<mmsghdr> msgs_;
  std::vector<iovec> iov_;
  std::vector<sockaddr_in> addrs_;
  Outbox held_;  // scratch for injector releases
};

// The switch daemon's event loop around one SwitchDataPlane.
class UdpSwitchServer {
 public:
  UdpSwitchServer(const SwitchConfig& cfg, Endpoint bind, const FaultConfig& faults = {},
                  std::size_t batch = 32);
  Endpoint local() const { return port_.local(); }
  SwitchDataPlane& dataplane() { return dp_; }  // before run() or after it returned
  void run(const std::atomic<bool>* also_stop = nullptr);  // until stop() (or *also_stop)
  void stop();  // thread-safe
  // A copy of the counters, refreshed by the loop at least every 100 ms (thread-safe).
  SwitchSnapshot snapshot() const;

 private:
  SwitchDataPlane dp_;
  UdpPort port_;
  std::optional<FaultInjector> inj_;
  std::atomic<bool> stop_{false};
  mutable std::mutex snap_mu_;
  SwitchSnapshot snap_;
};

// A worker's loop: one WorkerProtocol on one socket.
class UdpWorker {
 public:
  explicit UdpWorker(const WorkerConfig& cfg, Endpoint bind = Endpoint::ipv4(0x7F000001, 0),
                     const FaultConfig& faults = {});
  Endpoint local() const { return port_.local(); }
  WorkerProtocol& protocol() { return proto_; }
  // Run one collective until done or failed (bounded by the protocol's deadlines).
  bool run(WorkerOp op);
  void leave();

 private:
  void pump_io();
  WorkerProtocol proto_;
  UdpPort port_;
  std::optional<FaultInjector> inj_;
};

// Controller side of admission over UDP: retries until an answer or `timeout`.
// Returns the switch's answer (ok or its refusal reason), nullopt if it never answered.
std::optional<proto::Reason> udp_admit(Endpoint sw, std::uint64_t key, const JobSpec& spec,
                                       Nanos timeout = kSecond);
std::optional<proto::Reason> udp_release(Endpoint sw, std::uint64_t key, std::uint32_t job,
                                         Nanos timeout = kSecond);

}  // namespace inc::sw
