// Host-to-host message transport over TCP: one connection per peer pair, a non-blocking epoll
// event loop, full duplex. It frames messages (WireHeader + payload), queues sends per peer
// (several ready messages leave in one writev), and streams each received payload straight to
// where the layer above wants it: copied into place, reduced into place as bytes arrive, or
// parked in a buffer when nobody asked for it yet. It knows nothing about collectives.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "inc/types.hpp"

namespace inc::transport {

// ready: a header without payload by which a receiver says it has posted the receive of message
// (comm_id, seq, msg_index) from the peer, so that the peer may send it now (the executor's
// receiver-ready large messages, src/coll/executor_ready.cpp).
// refuse: the sender's call of collective (comm_id, seq) was refused before it started (the edge
// engine's checks of a rank's descriptor, src/edge/proxy.cpp); payload: the reason (text).
enum class MsgKind : std::uint16_t { data = 1, abort = 2, ready = 3, refuse = 4 };

// 64 bytes on the wire, little-endian host order (all supported hosts are little-endian;
// the magic catches a peer that is not).
struct WireHeader {
  std::uint32_t magic = kMagic;
  std::uint16_t kind = static_cast<std::uint16_t>(MsgKind::data);
  std::uint16_t version = kVersion;
  std::uint32_t comm_id = 0;    // which communicator (sub-communicators share connections)
  std::uint32_t msg_index = 0;  // k-th message from this sender to this receiver in `seq`
  std::uint64_t seq = 0;        // collective sequence number within the communicator
  std::uint64_t bytes = 0;      // payload bytes that follow
  std::uint8_t desc[32] = {};   // opaque to the transport: the collective's descriptor

  static constexpr std::uint32_t kMagic = 0x4d434e49;  // "INCM"
  static constexpr std::uint16_t kVersion = 3;  // 2: MsgKind::ready; 3: MsgKind::refuse
};
static_assert(sizeof(WireHeader) == 64);

// A layer above that processes a payload itself as its bytes arrive (the edge engine's packet
// handlers, src/edge/handler.hpp): the transport hands it every piece of the payload in order.
class PayloadConsumer {
 public:
  virtual ~PayloadConsumer() = default;
  // Bytes [offset, offset + n) of the payload. Returns how many it consumed from the front
  // (e.g. whole elements or blocks only); the rest comes again, with more bytes, in the next
  // call. When offset + n is the payload's end it must consume all n. May throw inc::Error
  // (reported through MessageSink::on_error; the rest of the payload is discarded).
  virtual std::size_t consume(std::uint64_t offset, const std::byte* data, std::size_t n) = 0;
  // The transport passes `data` aligned to this many bytes (a power of two, at most 8).
  virtual std::size_t alignment() const { return 1; }
};

// Where the payload of a received message goes.
struct RecvTarget {
  enum class Mode { discard, copy, reduce, consumer } mode = Mode::discard;
  std::byte* dst = nullptr;
  const std::byte* operand = nullptr;  // reduce: dst = operand (op) payload
  DataType dtype = DataType::u8;
  ReduceOp op = ReduceOp::sum;
  PayloadConsumer* consumer = nullptr;  // consumer: not owned, lives until on_message
  // reduce: where the adds' numeric events are added (numerics/events.hpp); null: not counted.
  std::uint64_t* events = nullptr;
};

// Implemented by the layer above (the collective executor).
class MessageSink {
 public:
  virtual ~MessageSink() = default;
  // A data header arrived from `peer`; say where its payload goes. May throw inc::Error to
  // reject it (the error is reported through on_error, and the payload is discarded).
  virtual RecvTarget on_header(int peer, const WireHeader& h) = 0;
  // The whole payload of the message announced by `h` has been delivered.
  virtual void on_message(int peer, const WireHeader& h) = 0;
  virtual void on_send_done(std::uint64_t token) = 0;
  // A ready notice (MsgKind::ready, no payload) arrived from `peer`. May throw inc::Error to
  // reject it (reported through on_error). The default ignores it.
  virtual void on_ready(int /*peer*/, const WireHeader& /*h*/) {}
  // The peer closed the connection, sent garbage, or aborted (text = its reason).
  virtual void on_peer_failed(int peer, const std::string& why) = 0;
  virtual void on_abort(int peer, const std::string& reason) = 0;
  // A refusal (MsgKind::refuse) arrived from `peer`: its call of (h.comm_id, h.seq) will not run.
  // The default takes it for an abort.
  virtual void on_refused(int peer, const WireHeader& /*h*/, const std::string& reason) { on_abort(peer, reason); }
  virtual void on_error(int peer, const inc::Error& e) = 0;
};

struct TransportStats {
  std::uint64_t bytes_sent = 0;  // payload + headers
  std::uint64_t bytes_received = 0;
  std::uint64_t payload_sent = 0;
  std::uint64_t payload_received = 0;
  std::uint64_t messages_sent = 0;
  std::uint64_t messages_received = 0;
};

class TcpMesh {
 public:
  // Takes ownership of connected sockets: fds[peer] for every peer != rank (-1 for self).
  TcpMesh(int rank, std::vector<int> fds);
  ~TcpMesh();
  TcpMesh(const TcpMesh&) = delete;
  TcpMesh& operator=(const TcpMesh&) = delete;

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(peers_.size()); }
  void set_sink(MessageSink* sink) { sink_ = sink; }

  // Queue a message; `data` must stay valid until on_send_done(token).
  void send(int peer, const WireHeader& h, const void* data, std::uint64_t token);
  // Queue a ready notice (h.kind = ready, no payload; no on_send_done). Throws as send().
  void send_ready(int peer, WireHeader h);
  // Best effort: tell every live peer that this rank aborts (blocking up to ~100 ms).
  void broadcast_abort(const std::string& reason);
  // Queue a refusal of this rank's call (h.comm_id, h.seq) to `peer` (h.kind = refuse, the
  // reason as payload, kept here until it has left): without blocking, behind what is queued.
  // An abort to one peer, likewise. Throws as send().
  void send_refusal(int peer, WireHeader h, const std::string& reason);
  void send_abort(int peer, const std::string& reason);

  // Run the event loop once: wait up to timeout_ms (0 = just poll) for I/O and handle it.
  void poll(int timeout_ms);

  // Also wake poll() when `fd` (not owned) is readable, and call `on_readable` from it, so that
  // another protocol's socket (the Core-INC worker's UDP socket) is served by the same loop.
  // Level-triggered: `on_readable` should read what it can. unwatch_fd before closing fd.
  void watch_fd(int fd, std::function<void()> on_readable);
  void unwatch_fd(int fd);

  // After a failure: the payload now arriving from `peer` goes nowhere (its destination may
  // be about to disappear), and queued sends are dropped (their buffers may be freed).
  void discard_incoming(int peer);
  void drop_sends();

  // Bytes read from one peer per event before others get a turn (tests make it tiny).
  void set_read_budget(std::uint64_t bytes) { read_budget_ = bytes; }

  bool peer_alive(int peer) const;
  const TransportStats& stats() const { return stats_; }

 private:
  struct Peer;
  Peer& live_peer(int peer);  // throws for an invalid or closed peer
  void handle_readable(int peer);
  void handle_writable(int peer);
  // After a read of a peer's socket that returned r <= 0: true to read again (interrupted);
  // false to stop reading, because the socket is drained or the peer failed (fail_peer).
  bool read_again(int peer, ssize_t r);
  void fail_peer(int peer, const std::string& why);
  void update_interest(int peer);
  bool consume_rx(int peer, Peer& p);
  void send_text(int peer, WireHeader h, MsgKind kind, const std::string& text);  // abort, refuse

  int rank_;
  int epfd_ = -1;
  std::vector<std::unique_ptr<Peer>> peers_;
  struct Watch {
    int fd = -1;  // -1: free entry
    std::function<void()> on_readable;
  };
  std::vector<Watch> watches_;  // epoll data: kWatchTag | index
  MessageSink* sink_ = nullptr;
  TransportStats stats_;
  std::uint64_t read_budget_ = 8u << 20;
};

// Connect all `world` ranks pairwise. Each rank listens on `listen_host`, publishes its
// address with `publish(rank, "host:port")`, looks up others with `lookup(rank)` (blocking
// with deadline), connects to lower ranks and accepts higher ones. `job_tag` guards against
// connections from a different job. Throws inc::Error on failure or deadline.
struct MeshAddressBook {
  virtual ~MeshAddressBook() = default;
  virtual void publish(int rank, const std::string& addr) = 0;
  virtual std::string lookup(int rank) = 0;
};
std::vector<int> connect_mesh(int rank, int world, const std::string& listen_host,
                              MeshAddressBook& book, std::uint64_t job_tag, int timeout_ms);

}  // namespace inc::transport
