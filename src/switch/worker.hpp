// The worker side of the Core-INC protocol as a sans-IO state machine. The runtime drives it:
//
//   WorkerProtocol w(cfg);
//   w.start(WorkerOp::allreduce(...), now);            // joins the switch first if needed
//   while (!w.done() && !w.failed()) {
//     TxPacket p; while (w.poll_tx(p)) send(p.to, p.bytes);
//     wait for a datagram or until w.next_deadline();
//     datagram ? w.on_packet(bytes, from, now) : w.on_tick(now);
//   }
//   w.failed() ? w.error() (kind, message, retryable()) : w.report() (overflow, counts)
//
// Chunks of the job's stream are issued in order; chunk c uses slot c mod S and is sent only
// once the result of chunk c - S arrived (SwitchML's window), at most `window` in flight.
// A chunk without a result is retransmitted on time-out with exponential back-off. The switch's
// epoch (learned at join) guards every exchange: a switch that restarted or reset the job
// answers with a refusal, which becomes an error, never a silent wrong result.
#pragma once

#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "src/proto/packet.hpp"
#include "src/switch/common.hpp"

namespace inc::sw {

// How this worker's elements travel through the switch.
enum class NumKind : std::uint8_t {
  i32,   // switch adds i32 with wrap-around and an overflow flag
  f32,   // switch adds f32 (arrival-order dependent)
  fx32,  // f32 as i32 fixed point with a per-block shared exponent: order-independent results
  raw,   // opaque bytes, replication only (broadcast, allgather)
};
enum class ReduceKind : std::uint8_t { sum, max, min };

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

  static std::size_t elem_bytes(NumKind k) { return k == NumKind::raw ? 1 : 4; }
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
  std::uint32_t window = 0;       // chunks in flight; 0 = the job's slot count
  Nanos rto_initial = 5 * kMillisecond;
  Nanos rto_max = 200 * kMillisecond;
  Nanos progress_timeout = 5 * kSecond;  // no chunk completed for this long: error
  Nanos join_timeout = 5 * kSecond;
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
  std::uint64_t retransmissions = 0;
  std::uint64_t duplicate_results = 0;  // results for chunks already complete (ignored)
  std::uint64_t foreign = 0;            // undecodable / other job / other epoch (ignored)
  bool overflow = false;                // i32: some partial sum wrapped (see arith.hpp)
};

struct TxPacket {
  Endpoint to;
  std::vector<std::byte> bytes;
};

class WorkerProtocol {
 public:
  explicit WorkerProtocol(const WorkerConfig& cfg);

  void start(WorkerOp op, Nanos now);
  void on_packet(std::span<const std::byte> bytes, Endpoint from, Nanos now);
  void on_tick(Nanos now);
  // When on_tick must next be called (max() if nothing is pending).
  Nanos next_deadline() const;

  bool poll_tx(TxPacket& out) { return out_.pop(out.to, out.bytes); }
  Outbox& outbox() { return out_; }

  bool done() const { return state_ == State::done; }
  bool failed() const { return state_ == State::failed; }
  bool busy() const { return state_ == State::joining || state_ == State::running; }
  const WorkerError& error() const { return err_; }
  const OpReport& report() const { return rep_; }
  bool joined() const { return joined_; }
  std::uint32_t epoch() const { return epoch_; }
  const proto::JoinInfo& join_info() const { return info_; }
  const WorkerConfig& config() const { return cfg_; }

  // Forget the join: the next start() joins again and begins a fresh chunk stream (use after a
  // retryable error, once every member agreed to retry).
  void reset();
  // Best-effort detach (one packet, no retransmission).
  void leave(Nanos now);

 private:
  enum class State { idle, joining, running, done, failed };
  struct Chunk {
    bool exponent = false;    // fx32 first round: block exponents, i32 max
    std::uint32_t seg = 0;
    std::uint64_t off = 0;    // first element (of the segment) covered
    std::uint32_t n = 0;      // elements covered (blocks for an exponent chunk)
    std::uint64_t group = 0;  // fx32 group
    bool has_in = false;
    bool want = false;
  };
  struct Slot {
    bool busy = false;
    std::uint32_t chunk = 0;
    Chunk c{};
    Nanos deadline = 0;
    Nanos rto = 0;
    std::uint32_t tries = 0;
    Nanos first_sent = 0;
    bool pending_seen = false;
    bool awaiting_parent = false;
    std::uint64_t contributed = 0;
    std::uint32_t members = 0;
  };
  struct Group {
    std::vector<std::int32_t> exps;  // agreed exponents, one per block
    bool ready = false;
    std::uint32_t outstanding = 0;   // data chunks not yet complete
  };

  void fail(WorkerErrorKind k, std::string msg);
  void send_join(Nanos now, bool retransmit);
  void begin_running(Nanos now);
  bool next_chunk(Chunk& c);  // peek at the cursor
  void advance_cursor();
  void pump(Nanos now);
  void send_chunk(Slot& s, bool retransmit);
  void handle_result(const proto::PacketView& v, Nanos now);
  void handle_nack(const proto::PacketView& v);
  std::string where(std::uint32_t chunk) const;
  std::uint32_t chunk_elems() const;
  proto::ElemType wire_elem(const Chunk& c) const;
  proto::WireOp wire_op(const Chunk& c) const;

  WorkerConfig cfg_;
  State state_ = State::idle;
  bool joined_ = false;
  std::uint32_t epoch_ = 0;
  proto::JoinInfo info_{};
  WorkerOp op_;
  OpReport rep_;
  WorkerError err_;
  Outbox out_;
  std::vector<Slot> slots_;
  std::uint32_t next_chunk_ = 0;  // chunk id of the next chunk to issue (job stream position)
  std::uint32_t inflight_ = 0;
  // Cursor over the op's chunks.
  std::uint32_t cur_seg_ = 0;
  std::uint64_t cur_off_ = 0;
  std::uint32_t group_left_ = 0;  // fx32: data chunks left in the current group
  std::uint64_t cur_group_ = 0;
  bool sync_sent_ = false;
  std::unordered_map<std::uint64_t, Group> groups_;
  int headroom_ = 0;
  Nanos join_deadline_ = 0, join_resend_ = 0, join_rto_ = 0;
  std::uint32_t join_nonce_ = 0;  // echoed by the join_ack: only our current attempt counts
  proto::Reason join_refusal_ = proto::Reason::ok;
  Nanos last_progress_ = 0;
  std::vector<std::int32_t> scratch_;
};

}  // namespace inc::sw
