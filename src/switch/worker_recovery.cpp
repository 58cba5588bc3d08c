// Loss recovery and congestion control of the worker's chunk stream (docs/PROTOCOL.md,
// "Congestion control and loss recovery"):
//  - every transmission is appended to a list in transmission order (the pipe: chunks in the
//    network); a completed chunk leaves it;
//  - RACK: a chunk is deemed lost once a chunk transmitted after it completed and a reordering
//    margin passed; it is retransmitted as the window allows, oldest first;
//  - a tail loss probe (2 srtt without news) retransmits the newest chunk, so that a loss at
//    the end of a burst is found by RACK instead of the timer;
//  - the retransmission timer (RFC 6298, back-off) retransmits the oldest chunk and restarts
//    slow start; F-RTO undoes it when a result for a chunk sent before the time-out and never
//    retransmitted arrives, or the switch answers `pending` (it held our contribution);
//  - a retransmission is proven unnecessary by a `pending` answer, a second result for a chunk
//    retransmitted once, or a result for a chunk deemed lost but not yet retransmitted: when
//    all of an episode's retransmissions were, the window decrease is undone (and RACK's
//    reordering window grows).
#include <limits>

#include "src/switch/worker.hpp"

namespace inc::sw {

namespace {
constexpr Nanos kNever = std::numeric_limits<Nanos>::max();
}

WorkerCcStats WorkerProtocol::cc_stats() const {
  WorkerCcStats s = cc_;
  s.cwnd = win_.cwnd();
  s.ssthresh = win_.ssthresh();
  s.cap = win_.cap();
  s.srtt = rtt_.srtt();
  s.rttvar = rtt_.rttvar();
  s.min_rtt = rtt_.min_rtt();
  s.rto = rtt_.rto();
  s.reorder_window_mult = reo_mult_;
  s.decreases = win_.decreases;
  s.undos = win_.undos;
  return s;
}

void WorkerProtocol::clear_recovery() {
  net_head_ = net_tail_ = -1;
  pipe_ = listed_ = 0;
  lost_q_.clear();
  rto_deadline_ = probe_deadline_ = reo_deadline_ = poll_deadline_ = kNever;
  probe_out_ = false;
  rto_recovery_ = false;
  undo_retrans_ = 0;
  rack_seq_ = 0;
  rack_rtt_ = 0;
  rto_unproven_ = 0;
  poll_backoff_ = 0;
}

// ---- the transmission-order list ----------------------------------------------------------

void WorkerProtocol::net_unlink(Entry& e) {
  if (!e.in_net) return;
  if (e.prev >= 0) ring_[std::size_t(e.prev)].next = e.next;
  else net_head_ = e.next;
  if (e.next >= 0) ring_[std::size_t(e.next)].prev = e.prev;
  else net_tail_ = e.prev;
  e.prev = e.next = -1;
  e.in_net = false;
  --listed_;
  if (!e.pending_seen) --pipe_;
}

void WorkerProtocol::net_append(Entry& e) {
  const std::int32_t i = std::int32_t(&e - ring_.data());
  e.prev = net_tail_;
  e.next = -1;
  if (net_tail_ >= 0) ring_[std::size_t(net_tail_)].next = i;
  else net_head_ = i;
  net_tail_ = i;
  e.in_net = true;
  ++listed_;
  if (!e.pending_seen) ++pipe_;
}

// Back into the list at its transmission position (a loss mark proven wrong).
void WorkerProtocol::net_insert_sorted(Entry& e) {
  const std::int32_t i = std::int32_t(&e - ring_.data());
  std::int32_t after = net_tail_;
  while (after >= 0 && ring_[std::size_t(after)].xmit_seq > e.xmit_seq)
    after = ring_[std::size_t(after)].prev;
  e.prev = after;
  e.next = after >= 0 ? ring_[std::size_t(after)].next : net_head_;
  if (e.next >= 0) ring_[std::size_t(e.next)].prev = i;
  else net_tail_ = i;
  if (after >= 0) ring_[std::size_t(after)].next = i;
  else net_head_ = i;
  e.in_net = true;
  ++listed_;
  if (!e.pending_seen) ++pipe_;
}

// ---- sending --------------------------------------------------------------------------------

void WorkerProtocol::transmit(Entry& e, Nanos now, bool retransmit) {
  if (retransmit) {
    ++e.tries;
    net_unlink(e);
  }
  e.lost = false;
  e.last_sent = now;
  e.xmit_seq = ++xmit_seq_;
  e.timer_epoch = timer_epoch_;
  net_append(e);
  send_chunk(e, retransmit);
  if (rto_deadline_ == kNever && !e.pending_seen) rto_deadline_ = now + rtt_.rto();
  if (!retransmit && !probe_out_) probe_deadline_ = now + probe_timeout();
}

// ---- news from the switch -------------------------------------------------------------------

void WorkerProtocol::on_chunk_result(Entry& e, Nanos now) {
  const std::uint32_t pipe_before = pipe_;
  // F-RTO: a chunk sent before the time-out and never retransmitted came back: the time-out
  // was spurious (a delay, not a loss).
  if (rto_recovery_ && e.tries == 0 && e.xmit_seq <= rto_xmit_seq_) {
    rto_recovery_ = false;
    rto_unproven_ = 0;  // Eifel: the samples of chunks out during the time-out are good
    ++cc_.spurious;
    win_.undo();
    restore_lost();
  }
  if (e.lost) {  // deemed lost, yet its result came without a retransmission: reordering
    proven_spurious(e);
    reo_mult_ = std::min<std::uint32_t>(reo_mult_ + 1, 64);
    recoveries_quiet_ = 0;
  }
  // Two estimates. The path's round-trip time drives the retransmission timer, RACK's
  // reordering window and slow start: its samples must not include other members' loss
  // recovery (their timers would then grow ours, and under loss everyone's would feed on
  // everyone's). So no sample from a chunk that was retransmitted (Karn: its result may answer
  // either transmission), that completed after a chunk sent later than it (it waited for a
  // repair, ours or another member's), that the switch reported waiting for other members
  // (`pending` to a retransmission sent after it), or that was out when a time-out fired which
  // was not proven spurious. The latency of results (any Karn-clean, in-order sample, waits
  // for later members included) spaces the tail loss probes: probing a chunk the switch holds
  // while another member is merely slower only draws `pending`.
  const Nanos since_last = now - e.last_sent;
  const bool overtaken = e.xmit_seq < rack_seq_;
  if (e.tries == 0 && !overtaken) {
    lat_.sample(now - e.first_sent);
    if (e.xmit_seq >= wait_seq_ && (rto_unproven_ == 0 || e.timer_epoch >= rto_unproven_)) {
      // Clamped at 8 min_rtt: a sample that slipped through the filters while the chunk waited
      // for another member's repair must not stretch the timer (the feedback above); a slower
      // path still shows in the timer through spurious time-outs, which cost one packet.
      rtt_.sample(std::min(now - e.first_sent, 8 * rtt_.min_rtt()));
      win_.on_rtt_sample(e.chunk, now - e.first_sent, next_chunk_);
      ++cc_.rtt_samples;
    }
  }
  // RACK: the newest transmission known delivered (a retransmission counts only if its result
  // cannot be the original's, RFC 8985 6.2).
  if (e.tries == 0 || since_last >= rtt_.min_rtt()) {
    if (e.xmit_seq > rack_seq_) {
      rack_seq_ = e.xmit_seq;
      rack_rtt_ = since_last;
    }
  }
  net_unlink(e);
  e.lost = false;
  if (!e.acked) win_.on_ack(e.chunk, cwnd_limited_ || 2 * pipe_before >= win_.cwnd());
  rtt_.reset_backoff();
  if (e.pending_seen || poll_backoff_) {
    // Progress: polls go back to the base interval; a held chunk that completed may have
    // neighbours whose results were lost as well, so the next poll comes soon.
    poll_backoff_ = 0;
    if (e.pending_seen) poll_last_ = now - rtt_.rto_base() + rtt_.min_rtt();
    arm_polls();
  }
  probe_out_ = false;
  if (!win_.in_recovery()) rto_recovery_ = false;
  rack_detect(now);
  arm_timers(now, true);
}

void WorkerProtocol::on_duplicate_result(Entry& e) {
  // A second result for a chunk retransmitted once: the switch answered both transmissions,
  // so the first had not been lost.
  if (e.tries == 1 && e.repair && !e.proven) {
    reo_mult_ = std::min<std::uint32_t>(reo_mult_ + 1, 64);
    recoveries_quiet_ = 0;
    proven_spurious(e);
  }
}

Nanos WorkerProtocol::probe_timeout() const {
  const Nanos p = lat_.has_sample() ? std::max<Nanos>(2 * lat_.srtt(), 10'000) : rtt_.pto();
  return std::min(p, rtt_.rto());
}

void WorkerProtocol::on_join_rtt(Nanos rtt) {
  rtt_.sample(rtt);
  lat_.sample(rtt);
}

void WorkerProtocol::on_pending(Entry& e, bool first, Nanos now) {
  // Chunks sent before the transmission this answers waited for other members: their
  // samples would measure those members, not the path.
  wait_seq_ = std::max(wait_seq_, e.xmit_seq);
  if (first) {
    e.polls_answered = 0;
    // The switch holds our contribution: the chunk leaves the pipe (it no longer loads our
    // path; only its result will come) and is never deemed lost again; only the timer polls
    // it, in case that result is lost.
    if (e.in_net) {
      --pipe_;
    } else if (e.lost) {  // deemed lost, not yet retransmitted: no need to
      e.lost = false;
      e.pending_seen = false;
      net_insert_sorted(e);
      e.pending_seen = true;
      --pipe_;
    }
    if (listed_ - pipe_ == 1) poll_last_ = now;  // the first held chunk: polls start now
    arm_polls();
    if (pipe_ == 0) rto_deadline_ = probe_deadline_ = kNever;
  }
  // The switch holds our contribution: the retransmission that drew this answer was not
  // needed on our path (another member's packet is missing, or this one is early).
  if (first && e.tries > 0 && e.repair && !e.proven) proven_spurious(e);
  // A chunk the time-out retransmitted was held by the switch: our path delivered it, so the
  // window goes back (Eifel); the other chunks deemed lost stay so (they may be).
  if (rto_recovery_ && e.tries > 0 && e.xmit_seq > rto_xmit_seq_) {
    rto_recovery_ = false;
    rto_unproven_ = 0;
    win_.undo();
  }
  // `pending` acknowledges our data: the window may grow on it (once per chunk), and RACK
  // learns that this transmission was delivered, so chunks sent before it that neither came
  // back nor are held were lost (theirs or their results).
  if (first && !e.acked) {
    e.acked = true;
    win_.on_ack(e.chunk, true);
  }
  const Nanos since_last = now - e.last_sent;
  // Only retransmissions draw `pending`: after exactly one, the answer is unambiguous and is
  // a pure path sample (the switch answers at once; no other member is involved).
  if (e.tries == 1 && (first || !e.polls_answered)) {
    rtt_.sample(std::min(since_last, rtt_.has_sample() ? 8 * rtt_.min_rtt() : since_last));
    ++cc_.rtt_samples;
  }
  if (!first) {
    // A poll answered `pending`: the chunk still waits for a member: polls back off (a poll
    // that drew no answer was lost, and is repeated at the same pace).
    ++e.polls_answered;
    poll_backoff_ = std::min(poll_backoff_ + 1, 30u);
    arm_polls();
  }
  if (e.repair) rtt_.reset_backoff();  // our repair reached the switch: our path works
  if (since_last >= rtt_.min_rtt() && e.xmit_seq > rack_seq_) {
    rack_seq_ = e.xmit_seq;
    rack_rtt_ = since_last;
  }
  rack_detect(now);
}

void WorkerProtocol::proven_spurious(Entry& e) {
  e.proven = true;
  ++cc_.spurious;
  if (--undo_retrans_ <= 0 && win_.can_undo()) {
    win_.undo();
    undo_retrans_ = 0;
  }
}

// Chunks deemed lost whose marks proved wrong (a spurious time-out): back into the pipe.
void WorkerProtocol::restore_lost() {
  for (auto [i, chunk] : lost_q_) {
    Entry& e = ring_[i];
    if (!e.busy || e.chunk != chunk || !e.lost) continue;
    e.lost = false;
    net_insert_sorted(e);
  }
  lost_q_.clear();
}

// ---- loss detection -------------------------------------------------------------------------

Nanos WorkerProtocol::reorder_window() const {
  return std::min<Nanos>(Nanos(reo_mult_) * rtt_.min_rtt() / 4, rtt_.srtt());
}

void WorkerProtocol::mark_lost(Entry& e, bool loss_event) {
  net_unlink(e);
  e.lost = true;
  lost_q_.emplace_back(std::uint32_t(&e - ring_.data()), e.chunk);
  if (loss_event && win_.on_loss(e.chunk, next_chunk_)) {  // a new episode
    undo_retrans_ = 0;
    if (++recoveries_quiet_ >= 16) {  // RFC 8985: the reordering window decays
      reo_mult_ = 1;
      recoveries_quiet_ = 0;
    }
  }
  ++undo_retrans_;
}

void WorkerProtocol::rack_detect(Nanos now) {
  reo_deadline_ = kNever;
  if (rack_seq_ == 0) return;
  const Nanos reo = reorder_window();
  std::int32_t i = net_head_;
  while (i >= 0) {
    Entry& e = ring_[std::size_t(i)];
    const std::int32_t next = e.next;
    if (e.xmit_seq >= rack_seq_) break;  // sent after the newest delivered: no verdict
    if (!e.pending_seen) {  // the switch has our part of those: only the timer retries them
      const Nanos deadline = e.last_sent + rack_rtt_ + reo;
      if (now >= deadline) {
        mark_lost(e, true);
      } else {
        reo_deadline_ = deadline;
        break;
      }
    }
    i = next;
  }
}

// ---- timers ---------------------------------------------------------------------------------

void WorkerProtocol::arm_timers(Nanos now, bool progress) {
  if (pipe_ == 0) {
    rto_deadline_ = probe_deadline_ = kNever;
    return;
  }
  if (progress) {  // RFC 6298 5.3: restart on progress
    rto_deadline_ = now + rtt_.rto();
    probe_deadline_ = probe_out_ ? kNever : now + probe_timeout();
  }
}

// ---- chunks the switch holds for us ---------------------------------------------------------
//
// Their result comes when the members still missing (named by the `pending`) contribute; if
// it is lost on our link, only a poll (a retransmission, answered with the stored result or
// another `pending`) gets it.

// One poll per round, of the held chunk polled (or sent) longest ago, so rounds cycle through
// them; rounds go at the path's retransmission timeout while the job makes progress (the
// members missing are repairing and results are due), and back off while nothing completes
// (someone is late or dead: polls cost a packet each).
void WorkerProtocol::arm_polls() {
  if (listed_ == pipe_) {  // nothing held
    poll_deadline_ = kNever;
    return;
  }
  Nanos iv = rtt_.rto_base();
  for (std::uint32_t k = 0; k < poll_backoff_ && iv < cfg_.rto_max; ++k) iv *= 2;
  poll_deadline_ = poll_last_ + std::min(iv, std::max(cfg_.rto_max, rtt_.rto_base()));
}

void WorkerProtocol::on_poll(Nanos now) {
  std::int32_t i = net_head_;
  while (i >= 0 && !ring_[std::size_t(i)].pending_seen) i = ring_[std::size_t(i)].next;
  if (i >= 0) {
    Entry& e = ring_[std::size_t(i)];
    ++cc_.polls;
    e.repair = false;
    transmit(e, now, true);
  }
  poll_last_ = now;
  arm_polls();
}

// ---- timers of the pipe ---------------------------------------------------------------------

void WorkerProtocol::on_probe(Nanos now) {
  probe_deadline_ = kNever;
  if (pipe_ == 0 || probe_out_) return;
  std::int32_t i = net_tail_;
  while (i >= 0 && ring_[std::size_t(i)].pending_seen) i = ring_[std::size_t(i)].prev;
  if (i < 0) return;
  probe_out_ = true;
  ++cc_.probes;
  Entry& e = ring_[std::size_t(i)];
  e.repair = false;
  transmit(e, now, true);
  rto_deadline_ = std::max(rto_deadline_, now + rtt_.rto());
}

void WorkerProtocol::on_rto(Nanos now) {
  rto_deadline_ = kNever;
  std::int32_t i = net_head_;
  while (i >= 0 && ring_[std::size_t(i)].pending_seen) i = ring_[std::size_t(i)].next;
  if (i < 0) return;  // only chunks the switch holds: polls take care of them
  ++cc_.timeouts;
  rto_unproven_ = ++timer_epoch_;
  if (!rto_recovery_) {
    rto_recovery_ = true;
    rto_xmit_seq_ = xmit_seq_;
  }
  if (!win_.in_recovery()) undo_retrans_ = 0;  // a new episode
  const std::uint32_t flight = pipe_;
  // The oldest chunk not held by the switch is lost, and so is every chunk out for longer
  // than a RACK verdict needs (as Linux's tcp_timeout_mark_lost): under heavy loss every
  // member has several chunks to repair, and nothing completes to tell RACK.
  const Nanos reo = reorder_window();
  for (std::int32_t j = i; j >= 0;) {
    Entry& x = ring_[std::size_t(j)];
    j = x.next;
    if (!x.pending_seen && (&x == &ring_[std::size_t(i)] || x.last_sent + rack_rtt_ + reo <= now))
      mark_lost(x, false);
  }
  win_.on_timeout(next_chunk_, flight);  // slow start repairs them, oldest first
  rtt_.back_off();
  rto_deadline_ = now + rtt_.rto();
  probe_deadline_ = kNever;
}

}  // namespace inc::sw
