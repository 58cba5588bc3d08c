// The runtime executor: runs one rank's schedule on real buffers over the TCP mesh and, for
// the in-network ops (inc_reduce, inc_broadcast), through a Core-INC switch tree.
// One Engine per process world; communicators (the world and its splits) share its
// connections and are told apart by comm_id in every message. A communicator with a switch
// tree has one switch attachment: a UDP socket, watched by the mesh's epoll loop, and the
// sans-IO worker protocol (src/switch/worker.hpp), to which its inc ops are submitted as they
// become ready, in (collective sequence, op index) order -- the same order on every rank.
// Progress is made by the threads that wait on or test a collective (no hidden progress
// thread): every wait has a deadline, and its error names the collective, the op and the peer
// or switch it was waiting for.
#pragma once

#include <chrono>
#include <functional>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "coll/recv_hook.hpp"
#include "coll/schedule.hpp"
#include "coll/trace.hpp"
#include "src/switch/udp.hpp"
#include "src/switch/worker.hpp"
#include "transport/tcp_mesh.hpp"

namespace inc::coll {

// How a collective ran, for the user's report.
struct RunInfo {
  Collective coll = Collective::allreduce;
  std::uint64_t seq = 0;
  Algorithm algo = Algorithm::automatic;
  std::string selection;         // why this algorithm: "INC_ALGO=ring", "automatic: ...", ...
  bool in_network = false;
  std::uint64_t bytes_sent = 0;  // payload bytes this rank sent / received in this collective
  std::uint64_t bytes_received = 0;  // (in the network: datagrams with their headers)
  std::uint64_t retransmissions = 0;  // in the network: datagrams this rank sent again
  std::uint64_t bytes_resent = 0;     // in the network: of bytes_sent, resends and probes
  // Segmentation actually used: point-to-point messages this rank sent, and the switch
  // operations it took part in (each at most the segment size, INC_SEGMENT_BYTES).
  std::uint64_t messages_sent = 0;
  std::uint64_t switch_operations = 0;
  bool overflow = false;              // in the network: an i32 partial sum wrapped around
  // Numeric events of the call's sums (numerics/events.hpp): in the network the whole tree's,
  // on the hosts this rank's own adds; `events_counted` false when a path that ran cannot
  // count them (a switch without cap::events, u32 sums in the switch's i32 cells). And the
  // elements of this rank's input that were NaN or infinite (float sums).
  std::uint64_t overflow_events = 0;
  bool events_counted = true;
  std::uint64_t nonfinite_inputs = 0;
  std::vector<NumericsHop> hops;  // sums: per hop of the path (numerics_hops.cpp)
  // In the network, f16/bf16 sums: the accumulator policy that ran; and the bytes per element
  // on this rank's link to the switch (0 on the host path).
  Accumulate accumulate = Accumulate::automatic;
  std::uint32_t link_bytes_per_element = 0;
  // Accumulate::reproducible: blocks (numerics::repro::kBlock elements) whose values span more
  // than the exact window, and blocks holding NaN or an infinity (src/numerics/repro.hpp).
  std::uint64_t inexact_blocks = 0;
  std::uint64_t nonfinite_blocks = 0;
  double seconds = 0;
};

// Fills info's reproducible-sum counts from the agreed block exponents (repro_decode's aux).
void note_repro_stats(RunInfo& info, const CollectiveParams& p, const std::byte* exps, std::uint64_t bytes);

// This rank's attachment to a communicator's switch tree.
struct SwitchAttachment {
  sw::WorkerConfig worker;   // job, member id, switch endpoint, session, timers and deadlines
  sw::FaultConfig faults;    // injected into outgoing datagrams (tests on real sockets)
  std::string where;         // "switch 127.0.0.1:7710, job 1, member 3", for reports and errors
  // Members of the job at each switch from this rank's up to the root, when the tree is known
  // here (INC_TOPOLOGY; INC_SWITCH: one switch); empty: only the first switch's, from its join.
  // For the report's hops (numerics_hops.hpp).
  std::vector<std::uint32_t> path_members;
};

struct StartOptions {
  // A failure of this collective leaves the engine usable and is not told to the peers: the
  // start-up probe of a switch tree, whose outcome the ranks then agree on over TCP.
  bool tentative = false;
  // Deadline from the start; 0 = the engine's (INC_TIMEOUT).
  std::chrono::milliseconds timeout{0};
};

class Engine;
struct SwitchLink;

// One collective in flight.
class CollOp {
 public:
  bool done() const { return state_ != State::running; }
  bool failed() const { return state_ == State::failed; }
  const std::optional<Error>& error() const { return error_; }
  const RunInfo& info() const { return info_; }

 private:
  friend class Engine;
  enum class State { running, succeeded, failed };
  struct Early;  // a message that arrived before its recv op was ready

  State state_ = State::running;
  std::optional<Error> error_;
  RunInfo info_;
  std::uint64_t uid = 0;
  std::uint32_t comm_id = 0;
  const std::vector<int>* members = nullptr;  // comm rank -> world rank
  CollectiveParams params;
  RankSchedule sched;
  const std::byte* input = nullptr;
  std::byte* output = nullptr;
  std::vector<std::byte> scratch;
  std::chrono::steady_clock::time_point start, deadline;
  std::vector<std::uint32_t> remaining;        // unmet dependencies per op
  std::vector<std::uint32_t> dependents_begin;  // CSR of the inverse dependency graph
  std::vector<std::uint32_t> dependents;
  std::vector<std::uint8_t> op_state;  // 0 waiting, 1 started, 2 done
  std::vector<std::uint32_t> msg_index;  // per send/recv op: k-th message with that peer
  std::vector<std::vector<std::uint32_t>> recv_by_peer;  // [peer][k] -> op index
  std::vector<std::uint8_t> recv_arrived;  // per op: payload fully parked in early buffer
  std::unordered_map<std::uint32_t, std::vector<std::byte>> parked;  // op -> early payload
  std::size_t ops_done = 0;
  bool tentative = false;
  // In-network ops: indices in program order; the first inc_submitted went to the switch.
  SwitchLink* link = nullptr;
  std::vector<std::uint32_t> inc_ops;
  std::size_t inc_submitted = 0, inc_completed = 0;
  // inc_gather: the zero-padded vectors handed to the worker, and per op index the padded
  // result to copy into dst on completion (when dst is not whole i32 words).
  std::vector<std::vector<std::byte>> staging;
  std::unordered_map<std::uint32_t, std::size_t> staged_out;
  // Accumulate::wide: per op index, the f32 result (staging index) to round into dst (f16/bf16).
  std::unordered_map<std::uint32_t, std::size_t> widened_out;
  // With a RecvHook that converts: per send op index, its payload as it goes on the wire.
  std::unordered_map<std::uint32_t, std::vector<std::byte>> encoded;
};

class Engine : public transport::MessageSink {
 public:
  Engine(std::unique_ptr<transport::TcpMesh> mesh, std::chrono::milliseconds timeout);
  ~Engine() override;

  int world_rank() const { return mesh_->rank(); }
  int world_size() const { return mesh_->size(); }
  std::chrono::milliseconds timeout() const { return timeout_; }

  // Register a communicator. members[i] = world rank of comm rank i; this process must be one.
  void add_comm(std::uint32_t comm_id, std::vector<int> members);
  void remove_comm(std::uint32_t comm_id);

  // Attach a communicator to its switch tree (opens the UDP socket; the worker joins the
  // switch with the first in-network op). Throws inc::Error(network) if the socket fails.
  void attach_switch(std::uint32_t comm_id, const SwitchAttachment& a);
  // Leave the switch tree (best effort) and close the socket. Collectives still using it fail.
  void detach_switch(std::uint32_t comm_id);
  bool has_switch(std::uint32_t comm_id);

  // Start a collective on comm `comm_id`. Throws inc::Error for invalid calls or if the
  // engine was aborted. The schedule is built here (algorithm already resolved in params).
  // Never blocks: in-network ops are handed to the switch worker and progress in wait/test.
  std::shared_ptr<CollOp> start(std::uint32_t comm_id, const CollectiveParams& params,
                                const void* input, void* output, std::string selection,
                                const StartOptions& opts = {});

  // Progress until op completes (throws its error) or its deadline passes.
  void wait(CollOp& op);
  // Progress without blocking; true if done (throws its error if it failed).
  bool test(CollOp& op);
  // Run the event loop once, blocking up to timeout_ms: for a caller that serves many
  // collectives and other events at once (the edge engine's rank proxy, src/edge) rather than
  // waiting for one. Deadlines are enforced by test()/wait() of each collective.
  void progress(int timeout_ms);
  // Also serve `fd` (not owned) from that loop: see TcpMesh::watch_fd.
  void watch_fd(int fd, std::function<void()> on_readable);
  void unwatch_fd(int fd);
  // This rank's call on `comm_id` was refused before it could start (the edge engine's checks
  // of a rank's descriptor, src/edge/proxy.cpp): it takes the communicator's next sequence
  // number, as the call would have, and every other member is told (MsgKind::refuse, `why`), so
  // that its call of that collective fails at once with Error::Kind::mismatch naming this rank
  // and `why` instead of waiting for it until the deadline. Their engines are then unusable, as
  // after any failed collective, and tell this one (an abort). A call refused on every rank
  // fails nothing else: the next one runs (executor_refuse.cpp).
  void refuse(std::uint32_t comm_id, const std::string& why);
  // Refusals of collectives not started here yet, kept for their start(); more than this many
  // is a peer gone wrong: a mismatch error naming it.
  static constexpr std::size_t kMaxRefusals = 4096;
  // Hand every receive op's payload to `hook` (and let it convert what send ops put on the
  // wire): the edge engine's packet handlers. Before the first collective; every rank of the
  // communicators must use the same hook (the wire sizes must agree).
  void set_recv_hook(std::shared_ptr<RecvHook> hook);
  // Point-to-point messages of more than `bytes` (on the wire) leave only once their receiver
  // has posted the receive (a ready notice, executor_ready.cpp); smaller ones leave at once.
  // Every rank of a job must use the same value (default kEagerBytes); ~0 = all eager.
  static constexpr std::uint64_t kEagerBytes = 64 * 1024;
  void set_eager_bytes(std::uint64_t bytes);
  // Ready notices that came before their send op was ready are kept (a peer may be a step
  // ahead); more than this many at once is a peer gone wrong: a mismatch error naming it, and
  // the engine keeps no more.
  static constexpr std::size_t kMaxEarlyNotices = std::size_t{1} << 20;
  void set_max_early_notices(std::size_t n);
  std::size_t early_notices();  // how many are kept now
  // How long wait() polls (yielding) before it sleeps in epoll_wait; 0 = sleep at once.
  void set_spin(std::chrono::microseconds spin) { spin_ = spin; }

  transport::TransportStats stats();

  // Record this rank's events (coll/trace.hpp) in `cap` records reserved now (api: INC_TRACE);
  // before the first collective. Off by default: then each event site costs one branch.
  void enable_trace(std::size_t cap);
  // Write the events as DIR/<stem>.csv and .json; false if tracing is off. Throws
  // inc::Error(config) naming the file it cannot write.
  bool write_trace(const std::string& dir, const std::string& stem);
  const Trace* trace() const { return trace_.get(); }

  // MessageSink
  transport::RecvTarget on_header(int peer, const transport::WireHeader& h) override;
  void on_message(int peer, const transport::WireHeader& h) override;
  void on_send_done(std::uint64_t token) override;
  void on_ready(int peer, const transport::WireHeader& h) override;
  void on_peer_failed(int peer, const std::string& why) override;
  void on_abort(int peer, const std::string& reason) override;
  void on_refused(int peer, const transport::WireHeader& h, const std::string& reason) override;
  void on_error(int peer, const Error& e) override;

 private:
  struct Comm {
    std::vector<int> members;      // comm rank -> world rank
    std::vector<int> comm_rank_of;  // world rank -> comm rank or -1
    std::uint64_t next_seq = 0;
  };
  struct EarlyMsg {
    int peer;  // world rank of the sender
    transport::WireHeader h;
    std::vector<std::byte> payload;
    bool complete = false;
  };
  // Where the payload now arriving from each peer goes.
  struct Incoming {
    enum class Mode { none, direct, parked, early, discard } mode = Mode::none;
    std::uint64_t uid = 0;
    std::uint32_t op = 0;
    EarlyMsg* early = nullptr;
    std::unique_ptr<MessageProcessor> proc;  // with a RecvHook: processes a direct payload
  };

  void ready(CollOp& op, std::uint32_t i);
  // The trace (executor_trace.cpp): one branch here while it is off.
  void trace_coll(TraceEvent e, const CollOp& op) {
    if (trace_) [[unlikely]] record_coll(e, op);
  }
  void trace_op(TraceEvent e, const CollOp& op, std::uint32_t i) {
    if (trace_) [[unlikely]] record_op(e, op, i);
  }
  void trace_msg(TraceEvent e, int wpeer, const transport::WireHeader& h, std::uint32_t i = ~std::uint32_t{0}) {
    if (trace_) [[unlikely]] record_msg(e, wpeer, h, i);
  }
  void record_coll(TraceEvent e, const CollOp& op);
  void record_op(TraceEvent e, const CollOp& op, std::uint32_t i);
  void record_msg(TraceEvent e, int wpeer, const transport::WireHeader& h, std::uint32_t i);
  void record_send_done(std::uint64_t token);  // (op uid << 32) | op index
  // Receiver-ready large messages (executor_ready.cpp).
  bool waits_for_receiver(std::uint64_t wire) const { return wire > eager_bytes_; }
  bool send_may_leave(CollOp& op, std::uint32_t i);  // else: parked until the notice comes
  void tell_ready(CollOp& op, std::uint32_t i);
  void forget_ready(const CollOp& op);  // op finished or failed
  void forget_notices(std::uint32_t comm_id, std::uint64_t seq);  // the early notices of one collective
  bool awaits_ready(const CollOp& op, std::uint32_t i) const;
  // Running ops (executor.cpp).
  void post_send(CollOp& op, std::uint32_t i);
  void complete(CollOp& op, std::uint32_t i);
  void drain();  // run deferred completions and the ops they make ready
  void finish(CollOp& op);
  std::byte* region_ptr(CollOp& op, const Region& r);
  // Progress, waits and failures (executor_progress.cpp).
  void fail(CollOp& op, Error e, bool tell_peers);
  void fail_all(const Error& e);
  std::string describe_blocked(const CollOp& op) const;
  void progress_once(int timeout_ms);
  void check_dead_peers();
  // Refusals (executor_refuse.cpp): a start() of a collective that a peer refused fails with it.
  std::optional<Error> take_refusal(std::uint32_t comm_id, Collective coll);
  Error refusal_error(std::uint32_t comm_id, Collective coll, std::uint64_t seq, int wpeer, const std::string& why) const;
  void failed_by_refusal(const Error& e, int wpeer);  // the engine is unusable; tell the refusing rank
  void forget_early(std::pair<std::uint32_t, std::uint64_t> key);
  // Messages and their collectives (executor.cpp).
  void check_descriptor(const CollOp& op, int peer, const transport::WireHeader& h);
  std::string describe(const CollOp& op) const;
  std::uint64_t wire_bytes(const CollOp& op, std::uint64_t bytes) const;
  RecvMessage recv_message(CollOp& op, std::uint32_t i);
  // In-network ops (executor_inc.cpp).
  void check_inc_call(const CollOp& op) const;
  sw::WorkerOp make_worker_op(CollOp& op, std::uint32_t i);
  void widen_on_host(CollOp& op, std::uint32_t i, sw::Segment& seg);
  void submit_ready_inc(SwitchLink& l);
  void on_link_readable(SwitchLink& l);
  void service_links();  // timers, sends, completions and failures of every switch worker
  int link_wait_ms(int timeout_ms) const;  // timeout_ms, shortened to the next switch timer
  void link_failed(SwitchLink& l, Error::Kind kind, const std::string& why);
  void abandon_inc(CollOp& op);  // op failed: the switch worker must let go of its buffers
  std::string describe_inc(const CollOp& op) const;
  std::string closed_members(std::uint32_t comm_id) const;
  void close_link(SwitchLink& l);

  std::mutex mu_;
  std::unique_ptr<transport::TcpMesh> mesh_;
  std::chrono::milliseconds timeout_;
  std::map<std::uint32_t, Comm> comms_;
  std::unordered_map<std::uint64_t, std::shared_ptr<CollOp>> by_uid_;
  std::map<std::pair<std::uint32_t, std::uint64_t>, CollOp*> active_;  // (comm, seq)
  // Messages for collectives this rank has not started yet: (comm, seq) -> messages.
  std::map<std::pair<std::uint32_t, std::uint64_t>, std::list<EarlyMsg>> early_;
  std::vector<Incoming> incoming_;  // per world peer
  std::vector<int> dead_;           // per world peer: 1 once its connection failed
  std::vector<std::string> dead_why_;
  std::vector<int> newly_dead_;  // checked against active collectives after drain()
  // Completions found while inside the transport (op uid, op index), run by drain().
  std::vector<std::pair<std::uint64_t, std::uint32_t>> deferred_;
  std::vector<std::pair<std::uint64_t, std::uint32_t>> work_;  // ops whose deps are met
  std::optional<Error> fatal_;  // once set, every call fails with it
  // Refusals: peers' of collectives not started here ((comm, seq) -> world peer, reason), and
  // this rank's own (their messages are dropped; the last kMaxRefusals).
  std::map<std::pair<std::uint32_t, std::uint64_t>, std::pair<int, std::string>> refusals_;
  std::set<std::pair<std::uint32_t, std::uint64_t>> refused_here_;
  // Ready notices: (comm, seq, world peer, msg_index). Those that came before their send op
  // was ready, and the send ops waiting for one (-> op uid, op index).
  using ReadyKey = std::tuple<std::uint32_t, std::uint64_t, int, std::uint32_t>;
  std::set<ReadyKey> ready_in_;
  std::map<ReadyKey, std::pair<std::uint64_t, std::uint32_t>> awaiting_ready_;
  std::uint64_t eager_bytes_ = kEagerBytes;
  std::size_t max_early_notices_ = kMaxEarlyNotices;
  std::shared_ptr<RecvHook> hook_;
  // How long wait() polls (yielding) before it sleeps in epoll_wait (set_spin; api: INC_SPIN_US).
  std::chrono::microseconds spin_{500};
  std::uint64_t next_uid_ = 1;
  std::unique_ptr<Trace> trace_;  // null: not tracing
  // Switch attachments by communicator (after mesh_: closed before it).
  std::map<std::uint32_t, std::unique_ptr<SwitchLink>> links_;
};

// Pack/unpack the collective descriptor carried by every data message.
void encode_descriptor(const CollectiveParams& p, std::uint8_t (&desc)[32]);
CollectiveParams decode_descriptor(const std::uint8_t (&desc)[32]);
std::string describe_params(const CollectiveParams& p);

// The MX types a switch aggregates (worker kinds mx*; sums only): every MX type (MXFP6 since
// its wire types mxe2m3/mxe3m2 and capability mx6_sum).
constexpr bool mx_in_switch(DataType t) noexcept {
  return t == DataType::mxfp8_e4m3 || t == DataType::mxfp8_e5m2 || t == DataType::mxint8 || t == DataType::mxfp4 ||
         t == DataType::mxfp6_e2m3 || t == DataType::mxfp6_e3m2;
}

}  // namespace inc::coll
