// Congestion control of the worker's chunk stream (docs/PROTOCOL.md, "Congestion control and
// loss recovery"): an RTT estimator with the retransmission timeout (RFC 6298; the caller
// applies Karn's rule) and a loss-based congestion window counted in chunks (Reno: slow start,
// additive increase, halving at most once per window of data, undo of decreases proven
// spurious). Both are plain value types: no clock, no I/O.
#pragma once

#include <algorithm>
#include <cstdint>

#include "src/switch/common.hpp"

namespace inc::sw {

class RttEstimator {
 public:
  // `initial`: the timeout before any sample; every timeout is clamped to [min, max].
  void configure(Nanos initial, Nanos min, Nanos max);
  // `counts_for_min`: false for samples of packets much smaller than a chunk (joins), whose
  // round trip says nothing about the shortest a chunk can take (RACK's reordering window).
  void sample(Nanos rtt, bool counts_for_min = true);
  bool has_sample() const { return has_; }
  Nanos srtt() const { return has_ ? srtt_ : initial_; }
  Nanos rttvar() const { return rttvar_; }
  Nanos min_rtt() const { return has_min_ ? min_rtt_ : srtt(); }
  bool has_min() const { return has_min_; }  // a sample counted for the minimum exists
  Nanos latest() const { return latest_; }
  // srtt + 4 rttvar within [min, max], doubled per back-off step (still at most max).
  Nanos rto() const;
  Nanos rto_base() const;  // the same without back-off
  // The probe timeout of a tail loss probe: 2 srtt, at most the RTO.
  Nanos pto() const;
  // A further lower bound on the timeout (twice the spacing of results, see the worker).
  void set_floor(Nanos f) { floor_ = f; }
  void back_off() { backoff_ = std::min(backoff_ + 1, 30u); }
  void reset_backoff() { backoff_ = 0; }
  unsigned backoff() const { return backoff_; }

 private:
  Nanos initial_ = 5 * kMillisecond, min_ = kMillisecond, max_ = 200 * kMillisecond;
  Nanos srtt_ = 0, rttvar_ = 0, min_rtt_ = 0, latest_ = 0, floor_ = 0;
  bool has_ = false, has_min_ = false;
  unsigned backoff_ = 0;
};

class ChunkWindow {
 public:
  // `cap`: the most chunks the stream may have in flight (the job's slots over all lanes);
  // `fixed` > 0: a fixed window of min(fixed, cap) chunks, no control.
  void configure(std::uint32_t cap, std::uint32_t fixed, std::uint32_t initial);
  std::uint32_t cwnd() const { return std::max<std::uint32_t>(1, std::uint32_t(cwnd_)); }
  std::uint32_t ssthresh() const { return std::uint32_t(std::min<double>(ssthresh_, 1e9)); }
  std::uint32_t cap() const { return cap_; }
  bool fixed() const { return fixed_; }
  // A chunk completed. `limited`: the window, not the application or the slots, bounded the
  // stream lately (grow only then, RFC 7661).
  void on_ack(std::uint64_t chunk, bool limited);
  // An RTT sample of a chunk (Karn-clean). In slow start, HyStart++ (RFC 9406): when the
  // smallest RTT of a round (a window of chunks) exceeds the previous round's by an eighth, a
  // queue is building: leave slow start before it overflows. `next_chunk` marks the round.
  void on_rtt_sample(std::uint64_t chunk, Nanos rtt, std::uint64_t next_chunk);
  bool in_slow_start() const { return !fixed_ && cwnd_ < ssthresh_; }
  // A chunk was deemed lost. Halves the window unless a decrease for this window of data
  // happened already (chunks issued before `recovery_end_`). `next_chunk`: the stream
  // position of the next new chunk. Returns whether it decreased.
  bool on_loss(std::uint64_t chunk, std::uint64_t next_chunk);
  // The retransmission timer fired: one chunk in flight, slow start from there.
  void on_timeout(std::uint64_t next_chunk, std::uint32_t inflight);
  // The stream was idle for `periods` timeouts: the window is no longer validated by the path
  // (RFC 7661, Linux's tcp_cwnd_restart): halve it per period, not below `initial`, keeping
  // ssthresh at 3/4 of it so slow start gets back quickly.
  void restart_after_idle(std::uint32_t periods, std::uint32_t initial);
  // The last decrease was spurious (the data had arrived): restore the window before it.
  void undo();
  bool in_recovery() const { return recovery_; }
  bool can_undo() const { return undo_valid_; }

  std::uint64_t decreases = 0, timeouts = 0, undos = 0, slow_start_exits = 0;

 private:
  void save_for_undo();
  double cwnd_ = 1, ssthresh_ = 1e18;
  std::uint32_t cap_ = 1;
  bool fixed_ = false;
  bool recovery_ = false;
  bool timed_out_ = false;  // a timeout without progress since
  std::uint64_t recovery_end_ = 0;
  double undo_cwnd_ = 0, undo_ssthresh_ = 0;
  std::uint64_t round_end_ = 0;  // HyStart++ round: ends with the result of this chunk
  Nanos round_min_ = 0, last_round_min_ = 0;  // 0: none yet
  std::uint32_t round_samples_ = 0;
  bool undo_valid_ = false;
};

}  // namespace inc::sw
