// Loss detection of the worker's chunk stream (docs/PROTOCOL.md, "Congestion control and
// loss recovery"): what each answer of the switch means.
//  - probes: where a chunk is only suspected lost (a gap in the results may be any member's
//    loss), the worker asks the switch with a header-only probe instead of resending 8 KiB the
//    switch may hold. The answer settles it: `pending` (held: someone else's loss), the result
//    (ours was lost on the way back), or `missing` (our data was lost: now it goes again, and
//    that is the congestion signal). A probe left unanswered is a loss on our path too;
//  - RACK: a chunk is suspected lost once a chunk transmitted after it completed and a
//    reordering margin passed; it is probed. The switch's `missing` nack (a later chunk of ours
//    arrived first) or a probe's `missing` marks it lost: retransmitted as the window allows,
//    oldest first;
//  - a retransmission is proven unnecessary by a `pending` answer, a second result for a chunk
//    retransmitted once, or a result for a chunk deemed lost but not yet retransmitted: when
//    all of an episode's retransmissions were, the window decrease is undone (and RACK's
//    reordering window grows).
// Timers, tail probes and polls of held chunks: worker_timers.cpp; the pipe: worker_pipe.cpp.
#include <algorithm>

#include "src/switch/worker.hpp"

namespace inc::sw {

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

}  // namespace inc::sw
