// The worker's pipe (docs/PROTOCOL.md, "Congestion control and loss recovery"): every
// transmission is appended to a list in transmission order (the chunks in the network); a
// completed chunk leaves it. Sending a chunk's data, its data again or a header-only probe,
// and the controller's state for reports. What the answers mean is worker_recovery.cpp's job,
// when to ask worker_timers.cpp's.
#include <algorithm>

#include "src/switch/worker.hpp"

namespace inc::sw {

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

}  // namespace inc::sw
