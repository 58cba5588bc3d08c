// The real-network driver of the sans-IO state machines: UDP sockets with batched
// recvmmsg/sendmmsg, an epoll loop, and a seeded fault injector in the transport (loss,
// duplication, reordering, delay of outgoing datagrams) for tests on real sockets.
// IPv4 only (Endpoint packs address and port).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <functional>
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

// Kernel offloads that cut the per-datagram cost (docs/SWITCH.md, "Per-datagram cost").
// gso: runs of equal-size datagrams to one destination leave in one sendmmsg entry with
//      UDP_SEGMENT (one trip through the stack for up to 64 datagrams / 64 KiB). When the
//      kernel refuses, the run is resent as plain datagrams and GSO is turned off for good
//      (EIO: a device without checksum offload; EOPNOTSUPP: no UDP GSO) or for that size and
//      larger (EMSGSIZE/EINVAL: segments above the path MTU, which only IP fragmentation of
//      single datagrams can carry).
// gro: UDP_GRO on receive: the kernel may hand over several datagrams of one sender in one
//      buffer; they are split again by the segment size it reports (cmsg).
struct UdpOffload {
  bool gso = true;
  bool gro = true;
  static UdpOffload none() { return {false, false}; }
};

// A bound UDP socket with batched I/O and an epoll wait that another thread can interrupt.
class UdpPort {
 public:
  explicit UdpPort(Endpoint bind, std::size_t batch = 32, UdpOffload offload = {});
  ~UdpPort();
  UdpPort(const UdpPort&) = delete;
  UdpPort& operator=(const UdpPort&) = delete;
  Endpoint local() const { return local_; }
  // The socket, for a caller's own epoll (readable = datagrams to recv_batch()).
  int fd() const { return fd_; }
  bool gso() const { return gso_; }  // still in use (the kernel may have refused it)
  bool gro() const { return gro_; }

  // Wait until a datagram is readable, `timeout` passes or wake() is called.
  void wait(Nanos timeout);
  void wake();  // thread-safe
  // Receive up to `batch` buffers without blocking (each one datagram, or several coalesced by
  // GRO); returns how many datagrams they held, read with datagram(i) and from(i).
  std::size_t recv_batch();
  std::span<const std::byte> datagram(std::size_t i) const {
    return {bufs_.data() + segs_[i].offset, segs_[i].size};
  }
  Endpoint from(std::size_t i) const { return segs_[i].from; }
  // Multicast (docs/PROTOCOL.md, "Multicast results"). Receive `group` (address and port) as
  // well: a second socket bound to the group's address and port (SO_REUSEADDR, so that several
  // members on one host each get every datagram) joins it on the interface whose address
  // reaches `toward` (the switch); recv_batch() reads both sockets, wait() waits for both.
  // Throws std::runtime_error naming the step that failed. A port joins one group.
  void join_group(Endpoint group, Endpoint toward);
  Endpoint group() const { return group_; }
  int group_fd() const { return gfd_; }  // -1 without a group (for a caller's own epoll)
  // Send every entry of the outbox (through the injector if given) and clear it.
  void send_all(Outbox& out, FaultInjector* inj, Nanos now);
  // Send the injector's due datagrams.
  void send_due(FaultInjector& inj, Nanos now);

  std::uint64_t send_errors = 0, recv_datagrams = 0, sent_datagrams = 0;
  std::uint64_t gso_sends = 0;     // sendmmsg entries that carried several datagrams
  std::uint64_t gro_receives = 0;  // buffers that held several datagrams
  std::uint64_t gso_refusals = 0;  // GSO sends the kernel refused (resent as plain datagrams)
  std::uint64_t recv_calls = 0, send_calls = 0;

 private:
  struct Segment {
    std::size_t offset;
    std::uint32_t size;
    Endpoint from;
  };
  void send_entries(const Outbox& out);
  // recvmmsg on `fd` into the buffers from `first` on; appends to segs_; returns buffers used.
  std::size_t recv_into(int fd, std::size_t first);
  // Sends the entries order[first..) of `out`; returns false if GSO was refused (then off).
  bool send_messages(const Outbox& out, std::size_t first, std::size_t& resume_at);
  int fd_ = -1, ep_ = -1, ev_ = -1, gfd_ = -1;
  Endpoint local_, group_;
  std::size_t batch_;
  bool gso_ = false, gro_ = false;
  std::size_t gso_max_size_ = SIZE_MAX;  // lowered when the kernel refuses a segment size
  std::vector<std::byte> bufs_;
  std::vector<Segment> segs_;
  std::vector<mmsghdr> msgs_;
  std::vector<iovec> iov_;
  std::vector<sockaddr_in> addrs_;
  struct alignas(alignof(cmsghdr)) Cmsg {
    char b[CMSG_SPACE(sizeof(int))];
  };
  std::vector<Cmsg> rx_cmsg_;
  // Send scratch (kept to avoid allocating per batch).
  std::vector<std::uint32_t> order_;
  std::vector<mmsghdr> tx_msgs_;
  std::vector<iovec> tx_iov_;
  std::vector<sockaddr_in> tx_addrs_;
  std::vector<Cmsg> tx_cmsg_;
  std::vector<std::uint32_t> tx_first_;  // per message: its first position in order_
  std::vector<std::uint32_t> tx_count_;  // per message: its datagrams
  Outbox held_;  // scratch for injector releases
};

// The switch daemon's event loop around one SwitchDataPlane: one lane of a daemon. Aligned so
// that two lanes never share a cache line.
class alignas(64) UdpSwitchServer {
 public:
  UdpSwitchServer(const SwitchConfig& cfg, Endpoint bind, const FaultConfig& faults = {},
                  std::size_t batch = 32, UdpOffload offload = {});
  Endpoint local() const { return port_.local(); }
  const UdpPort& port() const { return port_; }  // counters: read after run() returned
  SwitchDataPlane& dataplane() { return dp_; }  // before run() or after it returned
  void run(const std::atomic<bool>* also_stop = nullptr);  // until stop() (or *also_stop)
  void stop();  // thread-safe
  // A copy of the counters, refreshed by the loop at least every 100 ms (thread-safe), with the
  // CPU time of the thread running the loop.
  SwitchSnapshot snapshot() const;

  // For a multi-lane daemon (lanes.hpp): control events of the data plane (external_control)
  // go to `sink`, called on this lane's thread; post() runs `cmd` on this lane's thread at its
  // next loop iteration and sends what it queued (thread-safe). Neither touches the per-packet
  // path: the loop checks one flag of its own between batches.
  using ControlSink = std::function<void(ControlEvent&&)>;
  using Command = std::function<void(SwitchDataPlane&)>;
  void set_control_sink(ControlSink sink) { sink_ = std::move(sink); }  // before run()
  void post(Command cmd);

 private:
  void run_posted();
  void publish();
  SwitchDataPlane dp_;
  UdpPort port_;
  std::optional<FaultInjector> inj_;
  std::atomic<bool> stop_{false};
  ControlSink sink_;
  alignas(64) std::atomic<bool> cmd_pending_{false};
  std::mutex cmd_mu_;
  std::vector<Command> cmds_;
  alignas(64) mutable std::mutex snap_mu_;
  SwitchSnapshot snap_;
};

// A worker's loop: one WorkerProtocol on one socket.
class UdpWorker {
 public:
  explicit UdpWorker(const WorkerConfig& cfg, Endpoint bind = Endpoint::ipv4(0x7F000001, 0),
                     const FaultConfig& faults = {}, UdpOffload offload = {});
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

// A driver's step after feeding a worker packets and before sending its outbox: if the worker
// learned a multicast group that `port` has not joined, join it (toward the switch); if that
// fails, the worker fails with the reason. Returns true when it joined just now (a caller with
// its own epoll then watches port.group_fd()).
bool follow_multicast(WorkerProtocol& w, UdpPort& port);

// Admission over UDP without a controller: requests sealed under the switch's control key
// (`inc switch --control-key-file`); retries until an answer or `timeout`. Returns the switch's
// answer (ok or its refusal reason), nullopt if no authentic answer came.
std::optional<proto::Reason> udp_admit(Endpoint sw, const proto::auth::Key& key, const JobSpec& spec,
                                       Nanos timeout = kSecond);
std::optional<proto::Reason> udp_release(Endpoint sw, const proto::auth::Key& key, std::uint32_t job,
                                         Nanos timeout = kSecond);

}  // namespace inc::sw
