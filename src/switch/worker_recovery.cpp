// Loss recovery and congestion control of the worker's chunk stream (docs/PROTOCOL.md,
// "Congestion control and loss recovery"):
//  - every transmission is appended to a list in transmission order (the pipe: chunks in the
//    network); a completed chunk leaves it;
//  - probes: where a chunk is only suspected lost (a gap in the results may be any member's
//    loss), the worker asks the switch with a header-only probe instead of resending 8 KiB the
//    switch may hold. The answer settles it: `pending` (held: someone else's loss), the result
//    (ours was lost on the way back), or `missing` (our data was lost: now it goes again, and
//    that is the congestion signal). A probe left unanswered is a loss on our path too;
//  - RACK: a chunk is suspected lost once a chunk transmitted after it completed and a
//    reordering margin passed; it is probed. The switch's `missing` nack (a later chunk of ours
//    arrived first) or a probe's `missing` marks it lost: retransmitted as the window allows,
//    oldest first;
//  - a tail loss probe (2 srtt without news) probes the newest chunk, so that a loss at the end
//    of a burst is found without the timer;
//  - the retransmission timer (RFC 6298, back-off) retransmits the oldest chunk, probes the
//    others it suspects, and restarts slow start; F-RTO undoes it when a result for a chunk sent
//    before the time-out and never retransmitted arrives, or the switch answers `pending` (it
//    held our contribution);
//  - a retransmission is proven unnecessary by a `pending` answer, a second result for a chunk
//    retransmitted once, or a result for a chunk deemed lost but not yet retransmitted: when
//    all of an episode's retransmissions were, the window decrease is undone (and RACK's
//    reordering window grows).
#include <algorithm>
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
  s.pipe = pipe_;
  s.lossy = lossy();
  s.repairs_needed = repairs_needed_;
  s.repairs_unneeded = repairs_unneeded_;
  s.retx_answered = retx_answered_;
  s.retx_unanswered = retx_unanswered_;
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
  lane_net_.clear();
  pipe_ = listed_ = probing_ = 0;
  lost_q_.clear();
  rto_deadline_ = probe_deadline_ = reo_deadline_ = poll_deadline_ = kNever;
  probe_out_ = false;
  rto_recovery_ = false;
  undo_retrans_ = 0;
  rack_.clear();
  rto_unproven_ = 0;
  poll_backoff_ = 0;
  gap_next_ = 0;
  held_.clear();  // (the entries themselves are reset by the caller)
  skew_open_ = false;
  results_taken_lost_.clear();
}

// ---- the transmission-order list ----------------------------------------------------------

void WorkerProtocol::net_unlink(Entry& e) {
  if (!e.in_net) return;
  if (e.prev >= 0) ring_[std::size_t(e.prev)].next = e.next;
  else net_head_ = e.next;
  if (e.next >= 0) ring_[std::size_t(e.next)].prev = e.prev;
  else net_tail_ = e.prev;
  e.prev = e.next = -1;
  LaneList& ll = lane_list(e);
  if (e.lprev >= 0) ring_[std::size_t(e.lprev)].lnext = e.lnext;
  else ll.head = e.lnext;
  if (e.lnext >= 0) ring_[std::size_t(e.lnext)].lprev = e.lprev;
  else ll.tail = e.lprev;
  e.lprev = e.lnext = -1;
  e.in_net = false;
  --listed_;
  if (loads_pipe(e)) --pipe_;
  if (e.probing) --probing_;
}

void WorkerProtocol::net_append(Entry& e) {
  const std::int32_t i = std::int32_t(&e - ring_.data());
  e.prev = net_tail_;
  e.next = -1;
  if (net_tail_ >= 0) ring_[std::size_t(net_tail_)].next = i;
  else net_head_ = i;
  net_tail_ = i;
  LaneList& ll = lane_list(e);
  e.lprev = ll.tail;
  e.lnext = -1;
  if (ll.tail >= 0) ring_[std::size_t(ll.tail)].lnext = i;
  else ll.head = i;
  ll.tail = i;
  e.in_net = true;
  ++listed_;
  if (loads_pipe(e)) ++pipe_;
  if (e.probing) ++probing_;
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
  LaneList& ll = lane_list(e);
  std::int32_t lafter = ll.tail;
  while (lafter >= 0 && ring_[std::size_t(lafter)].xmit_seq > e.xmit_seq)
    lafter = ring_[std::size_t(lafter)].lprev;
  e.lprev = lafter;
  e.lnext = lafter >= 0 ? ring_[std::size_t(lafter)].lnext : ll.head;
  if (e.lnext >= 0) ring_[std::size_t(e.lnext)].lprev = i;
  else ll.tail = i;
  if (lafter >= 0) ring_[std::size_t(lafter)].lnext = i;
  else ll.head = i;
  e.in_net = true;
  ++listed_;
  if (loads_pipe(e)) ++pipe_;
  if (e.probing) ++probing_;
}

// ---- sending --------------------------------------------------------------------------------

void WorkerProtocol::transmit(Entry& e, Nanos now, Tx kind) {
  note_answer(e, false);  // a retransmission still unanswered: it (or its answer) was lost
  e.awaiting_answer = kind != Tx::first;
  if (kind != Tx::first) {
    ++e.tries;
    net_unlink(e);
  }
  if (kind == Tx::data) {
    ++e.data_tries;
    trace(WorkerTraceEvent::resend, now, e.chunk, win_.cwnd());
  }
  e.lost = false;
  // A probed chunk leaves the pipe until the answer says whose loss it was; a held chunk is
  // out of it already and stays held (a poll).
  e.probing = kind == Tx::probe && !e.held;
  e.last_probe = kind == Tx::probe;
  if (kind != Tx::probe) e.suspect = false;
  e.last_sent = now;
  e.xmit_seq = ++xmit_seq_;
  if (kind == Tx::first) {
    e.first_seq = e.xmit_seq;
    // Chunks sent into an empty stream, up to its first result, wait at the switch for the
    // other members to arrive (their skew: the application's, or a barrier's): their round
    // trips measure the skew, not the path, and would stretch the timer of every tail loss.
    if (listed_ == 0 && held_.empty() && lost_q_.empty()) skew_open_ = true;
    if (skew_open_) wait_seq_ = std::max(wait_seq_, e.xmit_seq + 1);
  }
  e.timer_epoch = timer_epoch_;
  net_append(e);
  send_chunk(e, kind);
  if (kind == Tx::probe) ++cc_.probes_sent;
  if (rto_deadline_ == kNever && !e.held) rto_deadline_ = now + rtt_.rto();
  if (kind == Tx::first && !probe_out_) probe_deadline_ = now + probe_timeout();
}

// Asks the switch about a chunk instead of resending it: `suspect` when a gap in the results
// or a time-out suspects it lost (the answer then tells whose loss it was).
void WorkerProtocol::send_probe(Entry& e, Nanos now, bool suspect) {
  if (suspect) {
    ++cc_.gap_probes;
    trace(WorkerTraceEvent::suspect, now, e.chunk, e.tries);
  }
  e.repair = false;
  transmit(e, now, Tx::probe);
  e.suspect = suspect;
}

// ---- news from the switch -------------------------------------------------------------------

void WorkerProtocol::on_chunk_result(Entry& e, Nanos now, bool resent) {
  const std::uint32_t pipe_before = pipe_;
  skew_open_ = false;  // the members are in step: results clock the next chunks
  // The timer restarts on every result, so it fires whenever results come further apart than
  // it: on a slow link (an 8 KiB chunk takes 0.7 ms to serialize at 100 Mb/s) a timer from an
  // underestimated round trip would fire between every two results, and its spurious repairs
  // would flood the link (and keep their samples out). So it never goes below twice the
  // smallest of the last 15 gaps between results while chunks were out: results cannot come
  // faster than our link serializes them, whatever the loss (a median would grow with the
  // sparse results of loss recovery, and slow it down further).
  if (last_activity_ && pipe_before + (listed_ - pipe_) > 0) {
    gaps_[gap_next_++ % gaps_.size()] = now - last_activity_;
    const std::size_t k = std::min<std::size_t>(gap_next_, gaps_.size());
    rtt_.set_floor(2 * *std::min_element(gaps_.begin(), gaps_.begin() + long(k)));
  }
  last_activity_ = now;

  // F-RTO: a chunk sent before the time-out and never retransmitted came back: the time-out
  // was spurious (a delay, not a loss).
  if (rto_recovery_ && e.tries == 0 && e.xmit_seq <= rto_xmit_seq_) {
    rto_recovery_ = false;  // (its samples stay out: it may have waited for a member's repair)
    ++cc_.spurious;
    win_.undo();
    restore_lost();
  }
  if (e.lost) {  // deemed lost, yet its result came without a retransmission: reordering
    proven_spurious(e);
    reo_mult_ = std::min<std::uint32_t>(reo_mult_ + 1, 64);
    recoveries_quiet_ = 0;
  }
  const Nanos since_last = now - e.last_sent;
  if (e.last_probe && resent) {
    // The switch answers our probe with the result it had sent before: that one was lost on
    // our path, a loss like any other (RFC 8985's TLP: only the probe's answer came back).
    // If it was only overtaken, it still comes (on_duplicate_result) and undoes this.
    if (win_.on_loss(e.chunk, next_chunk_)) undo_retrans_ = 0;
    ++undo_retrans_;
    e.repair = e.result_lost = true;
    results_taken_lost_.push_back(e.chunk);
    if (results_taken_lost_.size() > 64) results_taken_lost_.pop_front();
  } else if (e.probing && e.suspect) {
    // The result sent at completion: the suspicion was wrong (reordering, or another member's
    // loss repaired meanwhile), and no window was spent on it.
    ++cc_.spurious;
    note_repair(false);
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
  Rack& rack = rack_of(e.chunk);
  const bool overtaken = e.xmit_seq < rack.seq;
  trace(WorkerTraceEvent::completed, now, e.chunk, now - e.first_sent);
  note_answer(e, true);
  // A repair that completed and was not proven unnecessary was needed. (A poll answered with
  // the result proves nothing: the result may have been on its way.)
  if (e.tries > 0 && e.repair && !e.proven) note_repair(true);
  if (!rtt_.has_sample() && e.tries > 0 && since_last < rtt_.rto_base()) {
    // No sample yet (the join was retransmitted, and so was this chunk): the time since the
    // last transmission is ambiguous but at most an underestimate, and below the initial
    // timeout it can only make the timer sooner, which a spurious time-out reveals; staying at
    // the initial timeout would stall every repair of this member, and the job with it.
    rtt_.sample(since_last);
  }
  const bool clean = e.tries == 0 && !overtaken && e.xmit_seq >= wait_seq_ &&
                     (rto_unproven_ == 0 || e.timer_epoch >= rto_unproven_);
  // The latency of results: a chunk only probed since it was sent (never its data again) and
  // completed by the result sent at completion measures it as well; without these samples a
  // stream whose chunks are all probed (a queue building up) would keep its tail probes at
  // the join's round trip, and probe every chunk.
  if (e.data_tries == 0 && !resent && e.first_seq >= rack.seq) lat_.sample(now - e.first_sent);
  if (e.tries == 0 && !overtaken) {
    if (clean) {
      // At most twice the current timeout: one sample that slipped through the filters while
      // the chunk waited for another member's repair must not stretch the timer at once (the
      // feedback above); a path that really slowed down (a queue) still raises it within a
      // few dozen samples, geometrically. Only chunks full both ways count for the shortest
      // round trip (a barrier's header-only chunk is no measure of a chunk's, and RACK
      // trusts results of retransmitted chunks only beyond it).
      rtt_.sample(std::min(now - e.first_sent, 2 * rtt_.rto_base()), full_chunk(e));
      trace(WorkerTraceEvent::sample, now, e.chunk, now - e.first_sent);
      win_.on_rtt_sample(e.chunk, now - e.first_sent, next_chunk_);
      ++cc_.rtt_samples;
    }
  }
  // RACK: the newest transmission known delivered (a retransmission counts only if its result
  // cannot be the original's, RFC 8985 6.2: not before the shortest round trip of a chunk has
  // been measured). A chunk the switch held for us completed when another member's
  // contribution came: its timing says nothing about our transmissions.
  if (!e.held && (e.tries == 0 || (rtt_.has_min() && since_last >= rtt_.min_rtt()))) {
    if (e.xmit_seq > rack.seq) {
      rack.seq = e.xmit_seq;
      rack.rtt = since_last;
    }
  }
  net_unlink(e);
  e.lost = e.probing = false;
  if (!e.acked) win_.on_ack(e.chunk, cwnd_limited_ || 2 * pipe_before >= win_.cwnd());
  if (e.held) unhold(e);
  if (!held_.empty()) {
    // Progress: background polls wait again, from scratch; and held chunks before this one
    // in the stream are suspect: every member sends in stream order, so their results are
    // due as well (RACK in stream order); unless a member's packet was lost, ours was.
    poll_backoff_ = 0;
    poll_last_ = now;
    for (std::uint32_t i : held_) {
      Entry& x = ring_[i];
      if (x.chunk < e.chunk && x.suspect_at == 0 && &rack_of(x.chunk) == &rack) x.suspect_at = now;
    }
    arm_polls();
  }
  probe_out_ = false;
  if (!win_.in_recovery()) rto_recovery_ = false;
  rack_detect(now);
  arm_timers(now, true);
}

bool WorkerProtocol::full_chunk(const Entry& e) const {
  const Op* op = op_by_id(e.op);
  return op && e.c.has_in && e.c.want && !e.c.sync && !e.c.exponent &&
         e.c.n == chunk_elems(op->w.kind);
}

void WorkerProtocol::on_duplicate_result(Entry& e, Nanos now) {
  // The second result of a chunk sent twice answers the retransmission when that reached the
  // switch after the chunk completed there (the switch answers a duplicate at once): a path
  // sample, queueing included. This is how the timer learns a queue that made it fire
  // (Eifel), without the waits for other members' repairs that the original's result may
  // include. If the switch answered the retransmission `pending` instead, this result is a
  // network duplicate of the first one, and measures nothing. The answer to a probe counts
  // (its round trip is the queues', which is what the timer must learn), but not for the
  // shortest round trip: a header's way up is shorter than a chunk's.
  if (e.tries == 1 && !e.dup_sampled && !e.pending_seen && !e.held) {
    e.dup_sampled = true;
    rtt_.sample(rtt_.has_sample() ? std::min(now - e.last_sent, 2 * rtt_.rto_base()) : now - e.last_sent,
                !e.last_probe);
    ++cc_.rtt_samples;
  }
  // A second result for a chunk retransmitted once: the switch answered both transmissions,
  // so the first had not been lost. So does the result we took for lost, arriving after the
  // copy our probe fetched.
  if (e.result_lost) on_late_result(lane_of_chunk(e.chunk), wire_chunk(e.chunk));  // (once)
  else if (e.tries == 1 && e.repair && !e.proven) {
    reo_mult_ = std::min<std::uint32_t>(reo_mult_ + 1, 64);
    recoveries_quiet_ = 0;
    proven_spurious(e);
  }
}

void WorkerProtocol::on_complete_notice(Entry& e, Nanos now) {
  // The chunk is complete at the switch, which sent us its result before it answered this
  // probe (the answer left the payload out: the probe did not ask for it). On the same path,
  // that result would have come first: it was lost, or overtaken (reordering, a path whose
  // delay changed). It stays probed: if RACK or the timer still find no result (its verdict
  // allows for reordering), the next probe asks for the payload, and that result sent again is
  // the loss on our path (on_chunk_result).
  if (!e.last_probe) return;  // (an answer to an earlier probe: the data went since)
  note_answer(e, true);
  trace(WorkerTraceEvent::pending, now, e.chunk, 2);
  e.fetch = true;
}

void WorkerProtocol::on_missing(Entry& e, bool answers_probe, Nanos now) {
  // The switch lacks our contribution to this chunk: it saw a later chunk of ours first (the
  // gap signal), or it answers our probe. Our packet was lost (or overtaken): repair it now,
  // as a loss on our path. A chunk already answered `pending` or deemed lost cannot be meant;
  // nor can a gap signal once our data went again (it may predate the repair), nor a probe's
  // answer once the data was sent after the probe. A chunk only presumed held (after
  // a time-out, see on_pending) may well be missing: its polls are probes, and this is the
  // answer that repairs it.
  if (answers_probe && e.last_probe) note_answer(e, true);
  if (!e.in_net || e.lost || (e.held && e.pending_seen)) return;
  if (answers_probe ? !e.last_probe : e.data_tries > 0) return;
  if (answers_probe) ++cc_.probes_missing;
  trace(WorkerTraceEvent::missing, now, e.chunk, answers_probe);
  if (e.held) {
    net_unlink(e);  // (while held: it is not in the pipe)
    unhold(e);
  }
  e.confirmed = true;
  mark_lost(e, true);
  pump(now);
  arm_timers(now, false);
}

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


void WorkerProtocol::on_pending(Entry& e, bool first, Nanos now) {
  // Chunks sent before the transmission this answers waited for other members: their
  // samples would measure those members, not the path.
  wait_seq_ = std::max(wait_seq_, e.xmit_seq);
  note_answer(e, true);
  trace(WorkerTraceEvent::pending, now, e.chunk, first);
  const bool polled = e.held;  // (held already: presumed so after a time-out, and polled)
  // A suspected loss was someone else's: no window was spent on it, the suspicion counts
  // against calling our path lossy.
  if (first && e.probing && e.suspect) {
    ++cc_.spurious;
    note_repair(false);
  }
  if (first) hold(e, now);
  // The switch holds our contribution: the retransmission that drew this answer was not
  // needed on our path (another member's packet is missing, or this one is early).
  if (first && e.tries > 0 && e.repair && !e.proven) proven_spurious(e);
  // A chunk the time-out retransmitted was held by the switch: our path delivered it, so the
  // window goes back (Eifel). Unless repairs have lately been needed (a lossy path), the other
  // chunks sent before the time-out are presumed held too (a member is late): they leave the
  // pipe and are polled, so a late member costs a few polls, not a window of repairs.
  if (rto_recovery_ && e.tries > 0 && e.xmit_seq > rto_xmit_seq_) {
    rto_recovery_ = false;
    rto_unproven_ = 0;
    win_.undo();
    // (Not a chunk the switch told us it misses: presumed held, it would wait for a poll.)
    if (!lossy()) {
      poll_scratch_.clear();
      for (std::int32_t i = net_head_; i >= 0; i = ring_[std::size_t(i)].next)
        if (!ring_[std::size_t(i)].held && !ring_[std::size_t(i)].confirmed &&
            ring_[std::size_t(i)].xmit_seq <= rto_xmit_seq_)
          poll_scratch_.push_back(i);
      for (auto [i, chunk] : lost_q_)
        if (ring_[i].busy && ring_[i].chunk == chunk && ring_[i].lost && !ring_[i].confirmed &&
            ring_[i].xmit_seq <= rto_xmit_seq_)
          poll_scratch_.push_back(std::int32_t(i));
      for (std::int32_t i : poll_scratch_) hold(ring_[std::size_t(i)], now);
    }
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
  // (After a probe, not for the shortest round trip: a header's way up is not a chunk's.)
  if (e.tries == 1 && (first || !e.polls_answered)) {
    rtt_.sample(rtt_.has_sample() ? std::min(since_last, 2 * rtt_.rto_base()) : since_last,
                !e.last_probe);
    ++cc_.rtt_samples;
  }
  if (!first || polled) {
    // A poll answered `pending`: the chunk still waits for a member: polls back off (a poll
    // that drew no answer was lost, and is repeated at the same pace).
    ++e.polls_answered;
    poll_backoff_ = std::min(poll_backoff_ + 1, 30u);
    arm_polls();
  }
  if (e.repair) rtt_.reset_backoff();  // our repair reached the switch: our path works
}

void WorkerProtocol::note_repair(bool needed) {
  (needed ? repairs_needed_ : repairs_unneeded_) += 1;
  if (repairs_needed_ + repairs_unneeded_ > 32) {  // a moving estimate
    repairs_needed_ /= 2;
    repairs_unneeded_ /= 2;
  }
}

void WorkerProtocol::note_answer(Entry& e, bool answered) {
  if (!e.awaiting_answer) return;
  e.awaiting_answer = false;
  (answered ? retx_answered_ : retx_unanswered_) += 1;
  if (retx_answered_ + retx_unanswered_ > 32) {
    retx_answered_ /= 2;
    retx_unanswered_ /= 2;
  }
}

// Is our path losing packets lately? Our repairs were needed, or our retransmissions often
// drew no answer at all (neither `pending` nor a result). A member that is merely late makes
// every retransmission draw `pending`: not lossy.
bool WorkerProtocol::lossy() const {
  return (repairs_needed_ >= 2 && 4 * repairs_needed_ > repairs_needed_ + repairs_unneeded_) ||
         (retx_unanswered_ >= 2 && 8 * retx_unanswered_ > retx_answered_ + retx_unanswered_);
}

bool WorkerProtocol::on_late_result(std::size_t lane, std::uint32_t wire) {
  for (auto it = results_taken_lost_.begin(); it != results_taken_lost_.end(); ++it) {
    if (lane_of_chunk(*it) != lane || wire_chunk(*it) != wire) continue;
    results_taken_lost_.erase(it);
    ++cc_.spurious;
    note_repair(false);
    reo_mult_ = std::min<std::uint32_t>(reo_mult_ + 1, 64);
    if (--undo_retrans_ <= 0 && win_.can_undo()) {
      win_.undo();
      undo_retrans_ = 0;
    }
    return true;
  }
  return false;
}

void WorkerProtocol::proven_spurious(Entry& e) {
  e.proven = true;
  ++cc_.spurious;
  note_repair(false);
  if (--undo_retrans_ <= 0 && win_.can_undo()) {
    win_.undo();
    undo_retrans_ = 0;
  }
}

// Chunks deemed lost whose marks proved wrong (a spurious time-out): back into the pipe; not
// those the switch said it misses (`missing`), which stay queued for their repair.
void WorkerProtocol::restore_lost() {
  std::deque<std::pair<std::uint32_t, std::uint64_t>> keep;
  for (auto [i, chunk] : lost_q_) {
    Entry& e = ring_[i];
    if (!e.busy || e.chunk != chunk || !e.lost) continue;
    if (e.confirmed) {
      keep.emplace_back(i, chunk);
      continue;
    }
    e.lost = false;
    net_insert_sorted(e);
  }
  lost_q_.swap(keep);
}

// ---- loss detection -------------------------------------------------------------------------

Nanos WorkerProtocol::reorder_window() const {
  // The switch tells a member at once when a packet of its own is missing (on_missing), so a
  // gap in the results is usually another member's loss, repaired within about a round trip:
  // wait that long before calling it ours.
  (void)reo_mult_;
  return rtt_.srtt();
}

void WorkerProtocol::mark_lost(Entry& e, bool loss_event) {
  trace(WorkerTraceEvent::lost, e.last_sent, e.chunk, loss_event);
  net_unlink(e);
  e.probing = false;
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
  // The chunks sent before their lane's newest delivered transmission, in transmission order
  // over all lanes (a merge of the lanes' lists, each walked only that far): without loss and
  // reordering within a lane there are none, so a result costs O(lanes), not a walk past
  // every chunk of a lane that lags behind another.
  const std::size_t n = lane_net_.size();
  rack_cursor_.resize(n);
  for (std::size_t l = 0; l < n; ++l) rack_cursor_[l] = lane_net_[l].head;
  const Nanos reo = reorder_window();
  for (;;) {
    std::int32_t i = -1;
    std::size_t lane = 0;
    for (std::size_t l = 0; l < n; ++l) {
      const std::int32_t k = rack_cursor_[l];
      if (k < 0 || l >= rack_.size() || ring_[std::size_t(k)].xmit_seq >= rack_[l].seq) continue;
      if (i < 0 || ring_[std::size_t(k)].xmit_seq < ring_[std::size_t(i)].xmit_seq) {
        i = k;
        lane = l;
      }
    }
    if (i < 0) break;
    Entry& e = ring_[std::size_t(i)];
    rack_cursor_[lane] = e.lnext;
    const Rack& r = rack_[lane];
    // Only a later transmission of the same lane delivered is a verdict; the switch holds our
    // part of held chunks (only polls retry them). A gap may be any member's loss: ask the
    // switch (a probe). A probe unanswered by then was lost, or its answer: a loss on our path.
    if (!e.held) {
      const Nanos deadline = e.last_sent + r.rtt + reo;
      if (now < deadline) reo_deadline_ = std::min(reo_deadline_, deadline);
      else if (e.fetch) send_probe(e, now, false);  // complete there: ask for the payload
      else if (e.probing) mark_lost(e, true);
      else send_probe(e, now, true);  // (these move it to the tail: after every verdict)
    }
  }
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
