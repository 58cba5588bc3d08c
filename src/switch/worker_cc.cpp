#include "src/switch/worker_cc.hpp"

#include <cstdlib>

namespace inc::sw {

void RttEstimator::configure(Nanos initial, Nanos min, Nanos max) {
  max_ = std::max<Nanos>(max, 1);
  min_ = std::clamp<Nanos>(min, 1, max_);
  initial_ = std::clamp(initial, min_, max_);
}

void RttEstimator::sample(Nanos rtt, bool counts_for_min) {
  rtt = std::max<Nanos>(rtt, 1);
  latest_ = rtt;
  if (counts_for_min) {
    min_rtt_ = has_min_ ? std::min(min_rtt_, rtt) : rtt;
    has_min_ = true;
  }
  if (!has_) {
    has_ = true;
    srtt_ = rtt;
    rttvar_ = rtt / 2;
    return;
  }
  // RFC 6298: beta = 1/4, alpha = 1/8.
  rttvar_ = (3 * rttvar_ + std::llabs(srtt_ - rtt)) / 4;
  srtt_ = (7 * srtt_ + rtt) / 8;
}

Nanos RttEstimator::rto_base() const {
  return std::clamp(has_ ? srtt_ + 4 * rttvar_ : initial_, std::min(std::max(min_, floor_), max_),
                    max_);
}

Nanos RttEstimator::rto() const {
  Nanos base = rto_base();
  for (unsigned i = 0; i < backoff_ && base < max_; ++i) base *= 2;
  return std::min(base, max_);
}

Nanos RttEstimator::pto() const {
  const Nanos p = has_ ? std::max<Nanos>(2 * srtt_, 10'000) : initial_;
  return std::min(p, rto());
}

void ChunkWindow::configure(std::uint32_t cap, std::uint32_t fixed, std::uint32_t initial) {
  cap_ = std::max<std::uint32_t>(1, cap);
  fixed_ = fixed > 0;
  cwnd_ = fixed_ ? std::min(fixed, cap_) : std::clamp<std::uint32_t>(initial, 1, cap_);
  ssthresh_ = 1e18;
  recovery_ = false;
  undo_valid_ = false;
  round_end_ = 0;
  round_min_ = last_round_min_ = 0;
  round_samples_ = 0;
}

void ChunkWindow::on_ack(std::uint64_t chunk, bool limited) {
  timed_out_ = false;
  if (fixed_) return;
  if (recovery_) {
    if (chunk < recovery_end_) return;  // Reno: no growth while repairing this window
    recovery_ = false;
  }
  if (!limited) return;
  if (cwnd_ < ssthresh_)
    cwnd_ += 1;  // slow start: doubles per round trip
  else
    cwnd_ += 1 / cwnd_;  // congestion avoidance: one chunk per round trip
  cwnd_ = std::min(cwnd_, double(cap_));
}

void ChunkWindow::save_for_undo() {
  if (recovery_) return;  // keep the state from before this episode
  undo_cwnd_ = cwnd_;
  undo_ssthresh_ = ssthresh_;
  undo_valid_ = true;
}

void ChunkWindow::on_rtt_sample(std::uint64_t chunk, Nanos rtt, std::uint64_t next_chunk) {
  if (!in_slow_start()) return;
  if (chunk >= round_end_) {  // a new round
    last_round_min_ = round_min_;
    round_min_ = 0;
    round_samples_ = 0;
    round_end_ = next_chunk;
  }
  if (round_min_ == 0 || rtt < round_min_) round_min_ = rtt;
  constexpr std::uint32_t kSamples = 8;  // RFC 9406 N_RTT_SAMPLE
  if (++round_samples_ < kSamples || last_round_min_ == 0) return;
  // RFC 9406 clamps the threshold to [4 ms, 16 ms] for the Internet; our round trips are tens
  // of microseconds, so only the upper clamp is kept.
  const Nanos thresh = std::min<Nanos>(std::max<Nanos>(last_round_min_ / 8, 1'000), 16 * kMillisecond);
  if (round_min_ >= last_round_min_ + thresh) {
    ssthresh_ = cwnd_;  // congestion avoidance from here
    ++slow_start_exits;
  }
}

bool ChunkWindow::on_loss(std::uint64_t chunk, std::uint64_t next_chunk) {
  if (fixed_) return false;
  if (recovery_ && chunk < recovery_end_) return false;  // once per window of data
  save_for_undo();
  ssthresh_ = std::max(cwnd_ / 2, 2.0);
  cwnd_ = std::min(cwnd_, ssthresh_);
  recovery_ = true;
  recovery_end_ = next_chunk;
  ++decreases;
  return true;
}

void ChunkWindow::on_timeout(std::uint64_t next_chunk, std::uint32_t inflight) {
  if (fixed_) return;
  save_for_undo();
  // A repeated timeout (no progress since the last one) keeps ssthresh (RFC 5681).
  if (!timed_out_) ssthresh_ = std::max(std::min(cwnd_, double(inflight)) / 2, 2.0);
  timed_out_ = true;
  cwnd_ = 1;
  recovery_ = true;
  recovery_end_ = next_chunk;
  ++timeouts;
}

void ChunkWindow::restart_after_idle(std::uint32_t periods, std::uint32_t initial) {
  if (fixed_ || periods == 0) return;
  ssthresh_ = std::max(ssthresh_ < 1e17 ? ssthresh_ : 0.0, cwnd_ * 3 / 4);
  double w = cwnd_;
  for (std::uint32_t i = 0; i < periods && w > initial; ++i) w /= 2;
  cwnd_ = std::max(std::min(double(initial), cwnd_), w);
}

void ChunkWindow::undo() {
  if (fixed_ || !undo_valid_) return;
  cwnd_ = std::min(std::max(cwnd_, undo_cwnd_), double(cap_));
  timed_out_ = false;
  ssthresh_ = std::max(ssthresh_, undo_ssthresh_);
  recovery_ = false;
  undo_valid_ = false;
  ++undos;
}

}  // namespace inc::sw
