// Timers of the worker's chunk stream (docs/PROTOCOL.md, "Congestion control and loss
// recovery"):
//  - a tail loss probe (2 x the latency of results without news) probes the newest chunk, so
//    that a loss at the end of a burst is found without the timer;
//  - the retransmission timer (RFC 6298, back-off) retransmits the oldest chunk, probes the
//    others it suspects, and restarts slow start; F-RTO undoes it when a result for a chunk sent
//    before the time-out and never retransmitted arrives, or the switch answers `pending` (it
//    held our contribution);
//  - chunks the switch holds for us (`pending`) are polled: when a later chunk completed, and
//    in background rounds that back off while the polls draw `pending`.
// What the answers mean: worker_recovery.cpp.
#include <algorithm>

#include "src/switch/worker.hpp"

namespace inc::sw {

void WorkerProtocol::on_join_rtt(Nanos rtt) {
  // A join is a header: its round trip seeds the timers, not the shortest round trip of a
  // chunk (an unloaded path answers a join in microseconds, a chunk takes its serialization
  // both ways at least; a reordering window from the join's would call every jitter a loss).
  rtt_.sample(rtt, false);
  lat_.sample(rtt, false);
}

Nanos WorkerProtocol::probe_timeout() const {
  const Nanos p = lat_.has_sample() ? std::max<Nanos>(2 * lat_.srtt(), 10'000) : rtt_.pto();
  return std::min(p, rtt_.rto());
}



// ---- timers ---------------------------------------------------------------------------------

void WorkerProtocol::arm_timers(Nanos now, bool progress) {
  if (pipe_ + probing_ == 0) {  // (a probe unanswered needs the timer too)
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
// A `pending` answer says the switch holds our contribution: the chunk is held, out of the
// pipe (it no longer loads our path), never deemed lost again. Its result comes when the
// members still missing contribute; if it is lost on our link, only a poll (a retransmission,
// answered with the stored result or another `pending`) gets it. Two kinds of polls:
//  - suspect: once a chunk after it in the stream completed (every member sends in stream
//    order, so its result is due unless someone's packet was lost), a poll after srtt plus the
//    reordering window, then every timeout while it stays incomplete;
//  - background: when nothing completes for a timeout, the held chunk polled (or sent)
//    longest ago, one per round, backing off while polls draw `pending` (a member is late or
//    dead: polls cost a packet each).

void WorkerProtocol::hold(Entry& e, Nanos now) {
  if (e.held) return;
  if (e.in_net) {
    if (e.probing) --probing_;  // (a probed chunk is out of the pipe already)
    else --pipe_;
  } else if (e.lost) {  // deemed lost, not yet retransmitted: no need to
    e.lost = false;
    net_insert_sorted(e);  // counts it in the pipe...
    --pipe_;               // ...which it leaves
  }
  e.probing = false;
  e.held = true;
  e.suspect_at = 0;
  e.polls_answered = 0;
  if (held_.empty()) poll_last_ = now;
  held_.push_back(std::uint32_t(&e - ring_.data()));
  arm_polls();
  if (pipe_ + probing_ == 0) rto_deadline_ = probe_deadline_ = kNever;
}

void WorkerProtocol::unhold(Entry& e) {
  const auto i = std::uint32_t(&e - ring_.data());
  for (auto& h : held_)
    if (h == i) {
      h = held_.back();
      held_.pop_back();
      break;
    }
  e.held = false;
  if (held_.empty()) poll_deadline_ = kNever;
}

Nanos WorkerProtocol::poll_due(const Entry& e) const {
  if (e.suspect_at == 0) return kNever;
  if (e.last_sent >= e.suspect_at) return e.last_sent + rtt_.rto_base();  // polled: again later
  return e.suspect_at + rtt_.srtt() + reorder_window();
}

void WorkerProtocol::arm_polls() {
  if (held_.empty()) {
    poll_deadline_ = kNever;
    return;
  }
  Nanos iv = rtt_.rto_base();
  for (std::uint32_t k = 0; k < poll_backoff_ && iv < cfg_.rto_max; ++k) iv *= 2;
  poll_deadline_ = poll_last_ + std::min(iv, std::max(cfg_.rto_max, rtt_.rto_base()));
  for (std::uint32_t i : held_) poll_deadline_ = std::min(poll_deadline_, poll_due(ring_[i]));
}

void WorkerProtocol::on_poll(Nanos now) {
  poll_scratch_.clear();
  // On a lossy path (our repairs lately needed, or retransmissions unanswered), results are
  // lost often: every held chunk not polled for a timeout is polled in a background round.
  Nanos iv = rtt_.rto_base();
  for (std::uint32_t k = 0; k < poll_backoff_ && iv < cfg_.rto_max; ++k) iv *= 2;
  const bool background = poll_last_ + std::min(iv, std::max(cfg_.rto_max, rtt_.rto_base())) <= now;
  const bool all = background && lossy();
  for (std::uint32_t i : held_)
    if (poll_due(ring_[i]) <= now || (all && ring_[i].last_sent + rtt_.rto_base() <= now))
      poll_scratch_.push_back(std::int32_t(i));
  if (background) {
    std::int32_t i = net_head_;  // the held chunk polled or sent longest ago
    while (i >= 0 && !ring_[std::size_t(i)].held) i = ring_[std::size_t(i)].next;
    if (i >= 0 && std::find(poll_scratch_.begin(), poll_scratch_.end(), i) == poll_scratch_.end())
      poll_scratch_.push_back(i);
    poll_last_ = now;
  }
  for (std::int32_t i : poll_scratch_) {
    Entry& e = ring_[std::size_t(i)];
    ++cc_.polls;
    trace(WorkerTraceEvent::poll, now, e.chunk, poll_backoff_);
    send_probe(e, now, false);  // the switch holds our data: a question is enough
  }
  arm_polls();
}

// ---- timers of the pipe ---------------------------------------------------------------------

void WorkerProtocol::on_probe(Nanos now) {
  probe_deadline_ = kNever;
  if (pipe_ == 0 || probe_out_) return;
  std::int32_t i = net_tail_;
  while (i >= 0 && !loads_pipe(ring_[std::size_t(i)])) i = ring_[std::size_t(i)].prev;
  if (i < 0) return;
  probe_out_ = true;
  ++cc_.tail_probes;
  trace(WorkerTraceEvent::probe, now, ring_[std::size_t(i)].chunk, 0);
  send_probe(ring_[std::size_t(i)], now, false);
  rto_deadline_ = std::max(rto_deadline_, now + rtt_.rto());
}

void WorkerProtocol::on_rto(Nanos now) {
  rto_deadline_ = kNever;
  // The oldest chunk not held by the switch: the head of the pipe, or one deemed lost that
  // still waits for the window (in stream order).
  std::int32_t i = net_head_;
  while (i >= 0 && ring_[std::size_t(i)].held) i = ring_[std::size_t(i)].next;
  Entry* oldest = i >= 0 ? &ring_[std::size_t(i)] : nullptr;
  for (auto [k, chunk] : lost_q_) {
    Entry& x = ring_[k];
    if (x.busy && x.chunk == chunk && x.lost && (!oldest || x.chunk < oldest->chunk)) oldest = &x;
  }
  if (!oldest) return;  // only chunks the switch holds: polls take care of them
  ++cc_.timeouts;
  trace(WorkerTraceEvent::timeout, now, oldest->chunk, rtt_.backoff());
  rto_unproven_ = ++timer_epoch_;
  if (!rto_recovery_) {
    rto_recovery_ = true;
    rto_xmit_seq_ = xmit_seq_;
  }
  if (!win_.in_recovery()) undo_retrans_ = 0;  // a new episode
  const std::uint32_t flight = pipe_;
  // The oldest chunk not held by the switch is lost (its data goes again), and every chunk out
  // for longer than a RACK verdict needs is suspect (as Linux's tcp_timeout_mark_lost):
  // under heavy loss every member has several chunks to repair, and nothing completes to tell
  // RACK. A suspect is probed (the switch may hold it: the stall may be another member's
  // loss); one whose probe went unanswered that long is lost on our path: its data goes again.
  const Nanos reo = reorder_window();
  const bool all = lossy();
  poll_scratch_.clear();
  for (std::int32_t j = i; j >= 0;) {
    Entry& x = ring_[std::size_t(j)];
    const std::int32_t at = j;
    j = x.next;
    // On a path that lately needed repairs, every chunk out long enough; else the oldest only
    // (F-RTO: its answer tells whether our path or a late member is the cause).
    if (x.held || &x == oldest || !all || x.last_sent + rack_of(x.chunk).rtt + reo > now) continue;
    if (x.probing && !x.fetch) mark_lost(x, false);
    else poll_scratch_.push_back(at);
  }
  for (std::int32_t at : poll_scratch_) send_probe(ring_[std::size_t(at)], now, !ring_[std::size_t(at)].fetch);
  win_.on_timeout(next_chunk_, flight);  // slow start repairs the others, oldest first
  // The first time-out leaves the oldest to slow start (the window may still be full of
  // chunks on their way: no need to add to a queue); a repeated one sends it at once, or a
  // pipe of chunks that cannot complete (waiting at the switch for a member that waits for
  // this very repair) would hold it back for good.
  if (oldest->fetch) {  // complete at the switch: its result is what we miss
    send_probe(*oldest, now, false);
  } else {
    if (!oldest->lost) mark_lost(*oldest, false);
    if (rtt_.backoff() > 0) {
      oldest->repair = true;
      transmit(*oldest, now, Tx::data);
    }
  }
  // Exponential back-off protects a path that died or collapsed. While the switch keeps
  // answering (heard from within rto_max) and our retransmissions are lost now and then (a
  // lossy path, see lossy()), losses are random, not a collapse (the window has reacted
  // already): the back-off stops at 4x, or a few unlucky losses in a row would idle the
  // member, and the job that waits for it, for a long time. (A member that is merely late
  // makes our retransmissions draw `pending`: not lossy, full back-off.)
  if (rtt_.backoff() < 2 || !lossy() || now - last_heard_ >= cfg_.rto_max) rtt_.back_off();
  rto_deadline_ = now + rtt_.rto();
  probe_deadline_ = kNever;
}

}  // namespace inc::sw
