// A per-rank event trace of the collective engine (INC_TRACE, read in src/api): fixed-size
// records in a vector reserved once, so that recording is a store and a clock read; when the
// vector is full further events are dropped and counted (the count is written in the files).
// The Engine records under its own lock; nothing here is thread-safe by itself.
//
// Timestamps are CLOCK_MONOTONIC in ns: comparable between the ranks of one machine (also
// across network namespaces: the testbed's hosts), but across real hosts only intervals within
// one rank mean anything unless the hosts' clocks are synchronised.
//
// Files: DIR/rank-N.csv (one line per event, '#' lines first: rank, cap, dropped) and
// DIR/rank-N.json (Chrome trace / Perfetto: a track per rank with the collectives, the sends
// and the receives as spans and the ready notices as instants). bench/testbed/trace_report.py
// reads a directory of them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <string>
#include <vector>

namespace inc::coll {

// What happened. `peer` is always the other end's world rank; on the sender's side (op_ready
// of a send, send_posted, notice_arrived, send_done) it is the receiver, on the receiver's
// side (notice_told, msg_header, msg_end) the sender. A message is named by (comm, seq,
// sender, receiver, msg_index) on both sides.
enum class TraceEvent : std::uint8_t {
  coll_start,      // bytes: the call's buffer (count x element size); op: ops in the schedule
  coll_end,        // succeeded
  coll_failed,
  op_ready,        // an op's dependencies are met; kind: its OpKind; peer, msg_index for sends/recvs
  send_posted,     // the message was handed to the transport (after its notice, if it needed one)
  notice_told,     // receiver: sent the ready notice for a message above the eager limit
  notice_arrived,  // sender: the notice came (op: the send it releases, or ~0 if not ready yet)
  msg_header,      // receiver: a message's header was read (op ~0: its collective not started)
  msg_end,         // receiver: its last byte was read
  send_done,       // sender: the transport wrote its last byte
};
const char* name(TraceEvent e);

struct TraceRecord {  // POD: 48 bytes
  std::int64_t t_ns;
  std::uint64_t seq;
  std::uint64_t bytes;
  std::uint32_t comm;
  std::uint32_t op;  // op index in the rank's schedule, ~0 if none
  std::uint32_t msg_index;
  std::int32_t peer;  // world rank, -1 if none
  TraceEvent event;
  std::uint8_t coll;  // Collective
  std::uint8_t algo;  // Algorithm
  std::uint8_t kind;  // OpKind (op_ready), 0xff if none
};

class Trace {
 public:
  static constexpr std::size_t kDefaultCap = std::size_t{1} << 20;  // 48 MiB of records
  explicit Trace(std::size_t cap = kDefaultCap);

  static std::int64_t now_ns() {
    timespec ts;
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
  }
  void add(const TraceRecord& r) {
    if (records_.size() < cap_) records_.push_back(r);
    else ++dropped_;
  }
  const std::vector<TraceRecord>& records() const { return records_; }
  std::uint64_t dropped() const { return dropped_; }
  std::size_t cap() const { return cap_; }

  // DIR/<stem>.csv and DIR/<stem>.json; throws inc::Error(config) naming the file if either
  // cannot be written.
  void write(const std::string& dir, const std::string& stem, int rank) const;
  // Whether a file can be created in `dir` (made if missing, one level): "" or why not.
  static std::string check_dir(const std::string& dir);

 private:
  std::size_t cap_;
  std::vector<TraceRecord> records_;
  std::uint64_t dropped_ = 0;
};

}  // namespace inc::coll
