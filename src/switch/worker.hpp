// The worker side of the Core-INC protocol as a sans-IO state machine. The runtime drives it:
//
//   WorkerProtocol w(cfg);
//   auto id = w.submit(WorkerOp::allreduce(...), now);  // joins the switch first if needed
//   w.submit(WorkerOp::broadcast(...), now);            // queued behind it, pipelined
//   while (!w.idle()) {
//     TxPacket p; while (w.poll_tx(p)) send(p.to, p.bytes);
//     wait for a datagram or until w.next_deadline();
//     datagram ? w.on_packet(bytes, from, now) : w.on_tick(now);
//     WorkerCompletion c; while (w.poll_completion(c)) finished(c.id, c.report);
//   }
//   w.failed() ? w.error() (kind, message, retryable()) : ...
//
// Submitted ops form one chunk stream per job, issued in order and striped over the switch's
// lanes (chunk c to lane c mod L, in lane slot (c / L) mod S); chunk c is sent only once the
// result of chunk c - L S arrived (SwitchML's window, per lane), and at most a congestion
// window of chunks is in the network (loss-based AIMD; worker_pipe.cpp: the chunks out;
// worker_recovery.cpp: RACK, probes of suspects; worker_timers.cpp: tail probes, a timer from
// the measured round trip, polls of chunks the switch holds). Each lane's epoch
// (learned at join) guards every exchange: a switch that restarted or reset the job answers
// with a refusal, which becomes an error, never a silent wrong result. docs/PROTOCOL.md.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "src/proto/auth.hpp"
#include "src/proto/packet.hpp"
#include "src/switch/common.hpp"
#include "src/switch/worker_cc.hpp"

namespace inc::sw {

// How this worker's elements travel through the switch.
enum class NumKind : std::uint8_t {
  i32,   // switch adds i32 with wrap-around and an overflow flag
  f32,   // switch adds f32 (arrival-order dependent)
  fx32,  // f32 as i32 fixed point with a per-block shared exponent: order-independent results
  raw,   // opaque bytes, replication only (broadcast, allgather)
  // 2 bytes per element on the member's link (docs/NUMERICS.md, "In the switch"):
  f16, bf16,              // sum: narrow cells, every add in the switch rounds; min/max: exact
  f16_widen, bf16_widen,  // sum only: f32 accumulators from the first aggregating hop on
  // 1 byte per element; sums wrap modulo 2^8 (as on the hosts), overflow flagged:
  i8, u8,                 // sum: 8-bit cells, any partial sum that wrapped is flagged; min/max
  i8_widen, u8_widen,     // sum only: i32 accumulators, the root flags a total that does not fit
  // 1 byte per element (OCP fp8) or per two elements (i4; counts are bytes): narrow cells,
  // each add rounded (fp8) / wrapped (i4) as on the hosts; min/max exact; overflow flagged:
  e4m3, e5m2, i4,
  e4m3_widen, e5m2_widen, i4_widen,  // sum only: f32 (i4: 2 x i16) accumulators, the root narrows
  // MX blocks (counts are blocks of 32 elements: 33 bytes, mxfp4 17, mxfp6 25), sums only, f32
  // accumulators in the switch: re-quantised at every aggregating hop, or (_widen) once at the root
  mxe4m3, mxe5m2, mxint8, mxfp4,
  mxe4m3_widen, mxe5m2_widen, mxint8_widen, mxfp4_widen,
  mxe2m3, mxe3m2, mxe2m3_widen, mxe3m2_widen,  // MXFP6: 25-byte blocks (codes four per three bytes)
};
enum class ReduceKind : std::uint8_t { sum, max, min };

// The buffers belong to the worker until the op completes (or fails, or reset()): chunks and
// their retransmissions are sent from `in` without a copy (Outbox::commit_ref), results are
// written into `out` as they arrive.
struct Segment {
  std::uint64_t elems = 0;              // elements (bytes for raw)
  std::span<const std::byte> in;        // this member's contribution; empty: contributes nothing
  std::span<std::byte> out;             // where the result lands; empty: does not want it
};

// One collective as the switch sees it. All members of a job must issue the same sequence of
// ops with the same segment sizes (their chunk streams must line up).
struct WorkerOp {
  std::string label = "collective";
  NumKind kind = NumKind::i32;
  ReduceKind op = ReduceKind::sum;
  std::uint32_t contributors = 1;  // members with data, over the whole tree (fx32 headroom)
  bool sync = false;               // send one empty chunk even without elements (barrier)
  std::vector<Segment> segments;

  // Bytes of one element (i4: of a byte, two elements; MX: of a block) on the member's link.
  static std::size_t elem_bytes(NumKind k) {
    switch (k) {
      case NumKind::i32:
      case NumKind::f32:
      case NumKind::fx32: return 4;
      case NumKind::f16:
      case NumKind::bf16:
      case NumKind::f16_widen:
      case NumKind::bf16_widen: return 2;
      case NumKind::mxe4m3:
      case NumKind::mxe5m2:
      case NumKind::mxint8:
      case NumKind::mxe4m3_widen:
      case NumKind::mxe5m2_widen:
      case NumKind::mxint8_widen: return 33;
      case NumKind::mxfp4:
      case NumKind::mxfp4_widen: return 17;
      case NumKind::mxe2m3:
      case NumKind::mxe3m2:
      case NumKind::mxe2m3_widen:
      case NumKind::mxe3m2_widen: return 25;
      default: return 1;  // raw, i8, u8, fp8, i4
    }
  }
  // A sum whose accumulators widen at the first aggregating hop (wire op sum_widen).
  static bool widens(NumKind k) {
    switch (k) {
      case NumKind::f16_widen:
      case NumKind::bf16_widen:
      case NumKind::i8_widen:
      case NumKind::u8_widen:
      case NumKind::e4m3_widen:
      case NumKind::e5m2_widen:
      case NumKind::i4_widen:
      case NumKind::mxe4m3_widen:
      case NumKind::mxe5m2_widen:
      case NumKind::mxint8_widen:
      case NumKind::mxfp4_widen:
      case NumKind::mxe2m3_widen:
      case NumKind::mxe3m2_widen: return true;
      default: return false;
    }
  }
  static bool is_mx(NumKind k) { return k >= NumKind::mxe4m3 && k <= NumKind::mxe3m2_widen; }
  static WorkerOp allreduce(NumKind k, ReduceKind op, std::span<const std::byte> in,
                            std::span<std::byte> out, std::uint64_t count, std::uint32_t nranks);
  // in: nranks x count elements; out: this rank's count elements.
  static WorkerOp reduce_scatter(NumKind k, ReduceKind op, std::span<const std::byte> in,
                                 std::span<std::byte> out, std::uint64_t count,
                                 std::uint32_t nranks, std::uint32_t rank);
  // Reduce to one rank: every rank contributes, only the root receives.
  static WorkerOp reduce(NumKind k, ReduceKind op, std::span<const std::byte> in,
                         std::span<std::byte> out, std::uint64_t count, std::uint32_t nranks,
                         bool is_root);
  // in: this rank's bytes; out: nranks x bytes (rank r's block at r x bytes).
  static WorkerOp allgather(std::span<const std::byte> in, std::span<std::byte> out,
                            std::uint64_t bytes, std::uint32_t nranks, std::uint32_t rank);
  // The root contributes buf, every other rank receives it into buf.
  static WorkerOp broadcast(std::span<std::byte> buf, bool is_root);
  static WorkerOp barrier();
};

struct WorkerConfig {
  std::uint32_t job = 0;
  std::uint16_t member = 0;       // member id at the switch this worker attaches to
  Endpoint switch_ep{};
  std::uint32_t session = 0;      // agreed by all members of a run; a newer one resets the job
  // Chunks in flight: 0 = congestion-controlled (loss-based AIMD, capped by the job's slots);
  // N > 0 = a fixed window of min(N, slots) chunks (tests, experiments).
  std::uint32_t window = 0;
  // Retransmission timeout: rto_initial before the first RTT sample, then srtt + 4 rttvar
  // clamped to [rto_min, rto_max], doubled per consecutive time-out (at most rto_max).
  Nanos rto_initial = 5 * kMillisecond;
  Nanos rto_min = 50000;
  Nanos rto_max = 200 * kMillisecond;
  // Use only the lane at switch_ep, whatever lanes the job has (the switch's per-lane tests and
  // benchmarks drive lanes independently); every member of the job must then use that lane.
  // Default: join lane 0 at switch_ep, then every lane of the job, and stripe over them.
  bool single_lane = false;
  Nanos progress_timeout = 5 * kSecond;  // no chunk completed for this long: error
  Nanos join_timeout = 5 * kSecond;
  // Authentication (docs/PROTOCOL.md "Authentication"): with the job's key, every packet is
  // sealed and only sealed, valid, fresh packets from the switch are taken. `instance` must be
  // random per worker (the driver draws it), `seq_base` the wall clock in ns (sans-IO: inputs).
  std::optional<proto::auth::Key> key;
  proto::auth::Instance instance{};
  std::uint64_t seq_base = 0;
};

// The congestion controller's state and counters (for tests, benchmarks and reports).
struct WorkerCcStats {
  std::uint32_t cwnd = 0, ssthresh = 0, cap = 0;  // chunks
  std::uint32_t pipe = 0;  // chunks in the network (sent, not completed, held or deemed lost)
  Nanos srtt = 0, rttvar = 0, min_rtt = 0, rto = 0;
  std::uint32_t reorder_window_mult = 1;  // RACK's reordering window, in min_rtt/4
  std::uint64_t fast_retransmits = 0;  // chunks whose loss is ours, retransmitted with data
  std::uint64_t timeouts = 0;          // retransmission timer expiries
  std::uint64_t tail_probes = 0;       // tail loss probes
  std::uint64_t polls = 0;             // timer polls of chunks the switch holds for us
  // Header-only probes (flag `probe`): every probe sent (gap verdicts, tail probes, polls),
  // those asking about a chunk suspected lost (a RACK or time-out verdict), and the answers
  // `missing` (our own loss confirmed: the chunk then goes again with its data).
  std::uint64_t probes_sent = 0, gap_probes = 0, probes_missing = 0;
  std::uint64_t spurious = 0;          // retransmissions or loss marks proven unnecessary
  std::uint64_t decreases = 0, undos = 0;
  std::uint64_t rtt_samples = 0;
  bool lossy = false;  // repairs lately needed or retransmissions unanswered (see lossy())
  std::uint32_t repairs_needed = 0, repairs_unneeded = 0, retx_answered = 0, retx_unanswered = 0;
};

enum class WorkerErrorKind : std::uint8_t {
  none,
  invalid,           // bad op (buffer sizes, fx32 with min/max)
  timeout,           // no progress within the deadline (names the missing members if known)
  switch_restarted,  // the switch lost the job's state (restart, release, reset): retryable
  job_failed,        // the job failed upstream (a parent switch lost its state): retryable
  rejected,          // the switch refused our packets (mismatch, member id, not joined)
  unsupported,       // the switch path cannot aggregate this type/operation: use a fallback
  nonfinite,         // fx32 block holds NaN/Inf: cannot be carried in fixed point
  protocol,          // the switch sent something inconsistent
  mismatch,          // members issued different collectives (counts, types, operations)
};
std::string_view name(WorkerErrorKind k) noexcept;

struct WorkerError {
  WorkerErrorKind kind = WorkerErrorKind::none;
  std::string message;
  // Worth re-joining and retrying (or falling back to the host algorithm).
  bool retryable() const {
    return kind == WorkerErrorKind::switch_restarted || kind == WorkerErrorKind::job_failed ||
           kind == WorkerErrorKind::timeout;
  }
};

struct OpReport {
  std::uint64_t chunks = 0;
  std::uint64_t packets_sent = 0, packets_received = 0, bytes_sent = 0, bytes_received = 0;
  std::uint64_t retransmissions = 0;    // data packets sent again (probes not included)
  std::uint64_t bytes_resent = 0;       // of bytes_sent: data sent again and probes (not first sends)
  std::uint64_t probes = 0;             // header-only probes (a question about a chunk)
  std::uint64_t duplicate_results = 0;  // results for chunks already complete (ignored)
  std::uint64_t foreign = 0;            // undecodable / other job / other epoch (ignored)
  std::uint64_t unauthenticated = 0;    // keyed job: unsealed, wrong tag or replayed (ignored)
  bool overflow = false;                // i32/i8/u8: a sum wrapped (see arith.hpp)
  // Numeric events of the op's chunks in the whole tree (src/numerics/events.hpp), as the
  // results carried them (cap::events); each chunk's count saturates at proto::kMaxEvents.
  std::uint64_t events = 0;
};

// One finished op of the stream: its id (from submit()) and the traffic of its own chunks.
struct WorkerCompletion {
  std::uint64_t id = 0;
  OpReport report;  // this op only (join traffic and foreign packets are in report())
};

// What the loss recovery did, for a tracer installed with WorkerProtocol::set_trace (tests,
// benchmarks, debugging; no cost when none is installed).
struct WorkerTraceEvent {
  // probe: a tail loss probe; suspect: a probe about a chunk suspected lost (RACK, time-out);
  // missing: the switch lacks our data for the chunk (our loss: the data goes again);
  // resend: its data went again (value: the window then, in chunks).
  enum Kind : std::uint8_t { completed, lost, timeout, probe, poll, pending, sample, suspect,
                             missing, resend } kind;
  Nanos now = 0;
  std::uint64_t chunk = 0;
  std::int64_t value = 0;  // completed/sample: RTT; timeout: back-off; pending: 1 if first
};

struct TxPacket {
  Endpoint to;
  std::vector<std::byte> bytes;
};

// The endpoint of lane l of a switch whose lane 0 is `base`: port + l for IPv4, the next node
// numbers in the simulated network (SimCluster::add_switch_lanes).
Endpoint lane_endpoint(Endpoint base, std::uint16_t l);

class WorkerProtocol {
 public:
  explicit WorkerProtocol(const WorkerConfig& cfg);

  // The queued-op stream. Appends an op to the job's chunk stream and returns its id (0, 1,
  // 2... per instance until reset()). Ops are issued strictly in submission order and
  // pipelined: chunks of op k+1 may be in flight while op k's are. Joins first if needed.
  // Never blocks. An invalid op (buffer sizes, fx32 with min/max) fails the protocol, as does
  // any error: then every queued op fails (failed(), error()) and reset() is needed before
  // submitting again. Ops submitted after a failure are dropped.
  std::uint64_t submit(WorkerOp op, Nanos now);
  // The next finished op (ops may finish out of order: their chunks' results may arrive so).
  bool poll_completion(WorkerCompletion& c);
  // Nothing joining, queued or in flight (true after a failure too).
  bool idle() const;
  // What the stream waits for: the oldest chunk in flight and the members the switch still
  // misses, or the join in progress (for a caller's deadline error).
  std::string describe_stall(Nanos now) const;
  std::size_t queued() const;  // ops submitted and not finished

  // One op at a time (the blocking UdpWorker and older tests): submit on an idle protocol,
  // clearing report() and any unpolled completion; done() once that op finished.
  void start(WorkerOp op, Nanos now);
  void on_packet(std::span<const std::byte> bytes, Endpoint from, Nanos now);
  void on_tick(Nanos now);
  // When on_tick must next be called (max() if nothing is pending).
  Nanos next_deadline() const;

  bool poll_tx(TxPacket& out) { return out_.pop(out.to, out.bytes); }
  Outbox& outbox() { return out_; }

  bool done() const { return !failed_ && submitted_ > 0 && idle(); }
  bool failed() const { return failed_; }
  bool busy() const { return !failed_ && !idle(); }
  const WorkerError& error() const { return err_; }
  // Counters since the last start() or reset(), over every op, joins and foreign packets.
  const OpReport& report() const { return rep_; }
  bool joined() const { return joined_; }
  std::uint32_t epoch() const { return lanes_.empty() ? 0 : lanes_[0].epoch; }  // lane 0's
  // Lanes the job uses (learned at join, D1 of docs/PROTOCOL.md "Lanes"): global chunk c goes
  // to lane c mod L, whose endpoint is lane_endpoint(switch_ep, l).
  std::uint16_t lanes() const { return std::uint16_t(lanes_.size()); }
  const proto::JoinInfo& join_info() const { return info_; }
  // The group the switch sends this job's results to (docs/PROTOCOL.md, "Multicast results"):
  // JoinInfo.group at switch_ep's port; invalid for unicast. Valid once lane 0 answered the
  // join; the driver joins it before it sends what the protocol queued after that answer (a
  // result needs this member's data, so none can come earlier). Results from the group arrive
  // from the lanes' endpoints like unicast ones, and unicast still comes (answers to one member).
  Endpoint multicast_group() const;
  // The driver could not join the group: the member would miss every result, so it fails
  // (kind protocol) with `why`.
  void multicast_unavailable(const std::string& why);
  const WorkerConfig& config() const { return cfg_; }
  WorkerCcStats cc_stats() const;
  void set_trace(std::function<void(const WorkerTraceEvent&)> f) { trace_ = std::move(f); }

  // Forget the join and the queue: the next submit() joins again and begins a fresh chunk
  // stream (use after a retryable error, once every member agreed to retry).
  void reset();
  // Best-effort detach (one packet, no retransmission).
  void leave(Nanos now);

 private:
  struct Chunk {
    bool exponent = false;    // fx32 first round: block exponents, i32 max
    bool sync = false;        // barrier: one empty chunk
    std::uint32_t seg = 0;
    std::uint64_t off = 0;    // first element (of the segment) covered
    std::uint32_t n = 0;      // elements covered (blocks for an exponent chunk)
    std::uint64_t group = 0;  // fx32 group
    bool has_in = false;
    bool want = false;
  };
  // One chunk in flight, at ring position chunk mod (slots x lanes). After completion the entry
  // keeps its chunk until reused, to recognise duplicate results (proof of a spurious
  // retransmission).
  struct Entry {
    bool busy = false;
    std::uint64_t chunk = 0;  // position in the job's chunk stream
    std::uint64_t op = 0;     // id of the op it belongs to
    Chunk c{};
    Nanos first_sent = 0, last_sent = 0;
    std::uint64_t xmit_seq = 0;     // order of its last transmission among all transmissions
    std::uint64_t first_seq = 0;    // the same for its first one
    std::uint64_t timer_epoch = 0;  // time-outs before its last transmission
    std::uint32_t tries = 0;        // retransmissions (including probes and polls)
    std::uint32_t data_tries = 0;   // of those, with the data (not probes)
    std::uint32_t polls_answered = 0;  // `pending` answers to polls while held
    std::int32_t prev = -1, next = -1;  // in the transmission-order list (the pipe)
    std::int32_t lprev = -1, lnext = -1;  // in its lane's part of that list (RACK's walk)
    bool in_net = false;   // in that list: sent and neither completed nor deemed lost
    bool lost = false;     // deemed lost, waiting for the window to retransmit it
    // Its last transmission was a probe, not answered yet: out of the pipe (a header loads no
    // link), still listed so that RACK and the timer can tell when the probe went unanswered.
    bool probing = false;
    bool last_probe = false;  // its last transmission was a probe (no RTT sample from it)
    bool suspect = false;     // that probe asks about a suspected loss (RACK, time-out)
    bool fetch = false;       // probes ask for the result's payload (its result was lost)
    bool confirmed = false;   // the switch said it misses our data (`missing`): our loss
    bool result_lost = false;  // completed by a result fetched again: the first one was lost
    bool repair = false;   // its last retransmission repaired a deemed loss (not a probe)
    bool proven = false;   // a retransmission of it was already proven unnecessary
    bool acked = false;    // the window grew on a `pending` for it already
    bool awaiting_answer = false;  // retransmitted, no answer yet
    bool dup_sampled = false;      // the answer to its retransmission gave an RTT sample
    bool pending_seen = false;  // the switch answered `pending`: it holds our contribution
    bool held = false;          // out of the pipe, polled only (pending, or presumed so)
    Nanos suspect_at = 0;       // held: when a chunk after it in the stream completed
    bool awaiting_parent = false;
    // From its last `pending`: the members at the switch whose contributions it holds (one
    // word per 64 members, member m in bit m % 64 of word m / 64).
    std::vector<std::uint64_t> contributed;
    std::uint32_t members = 0;
    // The outbox generation in which a transmission of it last referenced the op's input
    // (0: never): its result must not overwrite that input before the outbox let go of it.
    std::uint64_t ref_gen = 0;
  };
  struct Group {
    std::vector<std::int32_t> exps;  // agreed exponents, one per block
    bool ready = false;
    std::uint32_t outstanding = 0;   // data chunks not yet complete
  };
  // A submitted op: its cursor over its chunks and its fx32 exponent groups.
  struct Op {
    std::uint64_t id = 0;
    WorkerOp w;
    OpReport rep;
    int headroom = 0;
    bool begun = false;       // capabilities checked, first chunk may go
    bool issued = false;      // every chunk issued
    bool finished = false;
    std::uint64_t outstanding = 0;  // chunks issued and not complete
    std::uint32_t seg = 0;
    std::uint64_t off = 0;
    std::uint32_t group_left = 0;  // fx32: data chunks left in the current group
    std::uint64_t group = 0;
    bool sync_left = false;
    std::unordered_map<std::uint64_t, Group> groups;
  };

  void fail(WorkerErrorKind k, std::string msg, std::string_view label);
  std::string_view label_for_errors() const;
  void begin_join(Nanos now);
  // A result from `lane` announcing a live resize (worker_resize.cpp).
  void note_resize(const proto::Header& h, std::size_t lane);
  // The stream reached the resize boundary: wait there, and once every chunk before it
  // completed, join again for the new mapping (true: issue nothing more now).
  bool at_resize_boundary(Nanos now);
  bool begin_op(Op& op);  // capability check when the op's first chunk is due
  Op* op_by_id(std::uint64_t id);
  const Op* op_by_id(std::uint64_t id) const;
  bool next_chunk(Op& op, Chunk& c);  // peek at the op's cursor
  void advance_cursor(Op& op, const Chunk& c);
  void op_chunk_done(Op& op);
  void pump(Nanos now);
  static constexpr Nanos kNever = std::numeric_limits<Nanos>::max();  // (a deadline unset)
  // What a transmission carries: the chunk for the first time, its data again, or a probe.
  enum class Tx : std::uint8_t { first, data, probe };
  void send_chunk(Entry& e, Tx tx);
  // An fx32 data chunk whose agreed exponent says NaN or infinity is in the block on some
  // member: it travels as f32 and the switch adds it as floats (IEEE, in arrival order).
  bool carries_f32(const Op& op, const Chunk& c) const;
  // Loss recovery and congestion control (worker_pipe.cpp, worker_recovery.cpp,
  // worker_timers.cpp).
  void transmit(Entry& e, Nanos now, Tx kind);
  void send_probe(Entry& e, Nanos now, bool suspect);
  bool loads_pipe(const Entry& e) const { return !e.held && !e.probing; }
  void net_unlink(Entry& e);
  void net_append(Entry& e);
  void net_insert_sorted(Entry& e);
  // Before the entry is freed; `resent`: the switch sent the stored result again because we
  // asked (proto::kResultResent): the one it sent at completion did not reach us.
  void on_chunk_result(Entry& e, Nanos now, bool resent);
  void on_duplicate_result(Entry& e, Nanos now);
  bool full_chunk(const Entry& e) const;  // data both ways, a whole slot's worth
  bool on_late_result(std::size_t lane, std::uint32_t wire);  // see results_taken_lost_
  void on_complete_notice(Entry& e, Nanos now);
  void on_pending(Entry& e, bool first, Nanos now);
  void rack_detect(Nanos now);
  void mark_lost(Entry& e, bool loss_event);
  void proven_spurious(Entry& e);
  void note_repair(bool needed);
  bool lossy() const;
  void note_answer(Entry& e, bool answered);
  void restore_lost();
  void arm_timers(Nanos now, bool progress);
  void on_rto(Nanos now);
  void on_probe(Nanos now);
  void on_poll(Nanos now);
  void hold(Entry& e, Nanos now);
  void unhold(Entry& e);
  Nanos poll_due(const Entry& e) const;
  void arm_polls();

  Nanos reorder_window() const;
  Nanos probe_timeout() const;
  void on_join_rtt(Nanos rtt);
  void clear_recovery();
  void handle_result(const proto::PacketView& v, std::size_t lane, std::size_t bytes, Nanos now);
  void handle_nack(const proto::PacketView& v, std::size_t lane, Nanos now);
  void on_missing(Entry& e, bool answers_probe, Nanos now);
  Entry* entry_for(const proto::Header& h, std::size_t lane);
  Entry* old_entry_for(const proto::Header& h, std::size_t lane);
  Entry* entry_at(std::size_t lane, std::uint32_t wire);  // lane chunk `wire` in flight
  std::string where(std::uint64_t chunk) const;
  // Joining (worker_join.cpp): lane 0 first, then lanes 1..L-1, each with its own nonce/epoch.
  struct Lane {
    Endpoint ep{};
    std::uint32_t epoch = 0;
    std::uint32_t nonce = 0;  // echoed by the join_ack: only our current attempt counts
    bool joined = false;
    Nanos sent = 0, resend = 0, rto = 0;
    bool retransmitted = false;
  };
  // Per lane index (kept across resets: the switch lane's sequence numbers only grow).
  struct LaneAuth {
    std::optional<proto::auth::Mac> mac;
    proto::auth::ReplayWindow window;
  };
  // Queues the packet written at the last reserve (room for the trailer included when keyed).
  void commit(Endpoint to, std::size_t size);
  std::size_t auth_room() const { return sealer_ ? proto::kAuthTrailerBytes : 0; }
  bool authentic(std::span<const std::byte> bytes, const proto::PacketView& v, std::size_t lane);
  void start_lane_join(std::size_t l, Nanos now);
  void send_join(std::size_t l, Nanos now, bool retransmit);
  void handle_join_ack(const proto::PacketView& v, std::size_t l, Nanos now);
  void join_tick(Nanos now);
  int lane_of(Endpoint from) const;
  std::uint32_t L() const { return std::uint32_t(lanes_.size()); }
  std::string stall_detail(const Entry& e, Nanos now) const;
  std::uint32_t chunk_elems(NumKind k) const;
  std::uint32_t ring_size() const { return std::uint32_t(ring_.size()); }
  // Striping (D1): global chunk c is lane chunk c / L on lane c mod L, in lane slot
  // (c / L) mod S, at ring index c mod (L S) = lane + L slot.
  std::uint32_t wire_chunk(std::uint64_t chunk) const { return std::uint32_t(chunk / L()); }
  std::uint32_t lane_of_chunk(std::uint64_t chunk) const { return std::uint32_t(chunk % L()); }

  WorkerConfig cfg_;
  std::optional<proto::auth::Sealer> sealer_;
  std::vector<LaneAuth> lane_auth_;
  bool failed_ = false;
  bool joining_ = false;
  bool joined_ = false;
  std::vector<Lane> lanes_;
  proto::JoinInfo info_{};  // lane 0's (slots per lane; every lane must agree)
  OpReport rep_;
  WorkerError err_;
  Outbox out_;
  std::deque<Op> ops_;  // submitted and not retired (front: oldest not finished)
  std::deque<WorkerCompletion> completions_;
  std::uint64_t next_id_ = 0;  // id of the next submitted op
  std::uint64_t issue_ = 0;    // id of the op whose chunks are issued next
  std::uint64_t submitted_ = 0;
  std::vector<Entry> ring_;
  std::uint64_t next_chunk_ = 0;  // stream position of the next chunk to issue
  // A live resize announced by the switch (proto::flag::resize): the stream's current mapping
  // ends at this chunk; the worker drains up to it, joins again (rejoin_) and carries on there.
  std::optional<std::uint64_t> resize_at_;
  bool rejoin_ = false;
  std::uint32_t inflight_ = 0;  // chunks issued and not complete
  // Congestion control and loss recovery.
  RttEstimator rtt_;  // the path's round trip (see on_chunk_result)
  RttEstimator lat_;  // the latency of results, waits for later members included
  std::uint64_t wait_seq_ = 0;  // chunks sent before this transmission waited for others
  bool skew_open_ = false;  // chunks went into an empty pipe and no result came back since
  ChunkWindow win_;
  std::int32_t net_head_ = -1, net_tail_ = -1;  // transmission-order list (oldest first)
  std::uint32_t listed_ = 0;                    // entries in it
  std::uint32_t pipe_ = 0;  // of those, not held by the switch: chunks loading our path
  std::uint32_t probing_ = 0;  // of those, probed and waiting for the answer (not in the pipe)
  std::deque<std::pair<std::uint32_t, std::uint64_t>> lost_q_;  // (ring index, chunk)
  std::uint64_t xmit_seq_ = 0;
  std::uint64_t timer_epoch_ = 0;   // time-outs so far
  std::uint64_t rto_unproven_ = 0;  // epoch of the last time-out not proven spurious (0: none)
  // RACK per lane: the lanes of a switch are independent threads, so results of different
  // lanes overtake each other without any loss; only within a lane is a gap a sign of loss.
  struct Rack {
    std::uint64_t seq = 0;  // xmit_seq of the latest transmission known delivered
    Nanos rtt = 0;
  };
  std::vector<Rack> rack_;
  // The transmission-order list per lane (the same entries, linked again): RACK judges a chunk
  // only by its own lane's deliveries, so it walks each lane's list only as far as that lane's
  // newest delivered transmission, not past every chunk of a lane that lags.
  struct LaneList {
    std::int32_t head = -1, tail = -1;
  };
  std::vector<LaneList> lane_net_;
  std::vector<std::int32_t> rack_cursor_;  // rack_detect's scratch, one per lane
  LaneList& lane_list(const Entry& e) {
    const std::size_t n = lanes_.empty() ? 1 : lanes_.size();
    if (lane_net_.size() < n) lane_net_.resize(n);
    return lane_net_[std::size_t(e.chunk % n)];
  }
  Rack& rack_of(std::uint64_t chunk) {
    const std::size_t n = lanes_.empty() ? 1 : lanes_.size();
    if (rack_.size() < n) rack_.resize(n);
    return rack_[std::size_t(chunk % n)];
  }
  std::uint32_t reo_mult_ = 1, recoveries_quiet_ = 0;
  Nanos rto_deadline_ = 0, probe_deadline_ = 0, reo_deadline_ = 0, poll_deadline_ = 0;
  Nanos poll_last_ = 0;             // the last background poll, or progress
  std::vector<std::uint32_t> held_;  // ring indices of held chunks
  // Chunks completed by a result fetched again (the first one taken for lost), newest last: a
  // first result arriving later proves it was only late and undoes the decrease, even once
  // the chunk's ring entry serves another chunk (a stall of the path delays results beyond
  // any reordering window; DSACK for results).
  std::deque<std::uint64_t> results_taken_lost_;
  std::vector<std::int32_t> poll_scratch_;
  std::uint32_t poll_backoff_ = 0;  // poll rounds since the last progress
  bool probe_out_ = false;
  bool rto_recovery_ = false;     // F-RTO: a timeout not yet proven real or spurious
  std::uint64_t rto_xmit_seq_ = 0;  // transmissions up to this one preceded the timeout
  std::int64_t undo_retrans_ = 0;   // chunks retransmitted this episode, not proven spurious
  bool cwnd_limited_ = false;
  Nanos last_activity_ = 0;  // the last result: the stream's last sign of life
  std::array<Nanos, 15> gaps_{};  // the last gaps between results (a floor for the timer)
  std::size_t gap_next_ = 0;
  Nanos last_heard_ = 0;     // the last result or pending from the switch
  std::uint32_t repairs_needed_ = 0, repairs_unneeded_ = 0;  // recent retransmissions' outcome
  std::uint32_t retx_answered_ = 0, retx_unanswered_ = 0;
  WorkerCcStats cc_{};
  std::function<void(const WorkerTraceEvent&)> trace_;
  void trace(WorkerTraceEvent::Kind k, Nanos now, std::uint64_t chunk, std::int64_t v) {
    if (trace_) trace_({k, now, chunk, v});
  }
  Nanos join_started_ = 0, join_deadline_ = 0;
  std::uint32_t nonce_seed_ = 0;
  proto::Reason join_refusal_ = proto::Reason::ok;
  Nanos last_progress_ = 0;
  std::vector<std::int32_t> scratch_;
  std::vector<float> fscratch_;
};

}  // namespace inc::sw
