#include "src/switch/worker.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "src/switch/arith.hpp"
#include "src/switch/worker_internal.hpp"

namespace inc::sw {

using namespace detail;

using proto::ElemType;
using proto::Header;
using proto::PacketType;
using proto::Reason;
using proto::WireOp;

namespace {

std::string seconds(Nanos t) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f s", double(t) / 1e9);
  return b;
}

// "{0,2-5,9}": the members (of n) whose bit is `present`, runs as ranges.
std::string member_list(const std::vector<std::uint64_t>& bits, std::uint32_t n, bool present) {
  auto in = [&](std::uint32_t m) {
    const bool bit = m / 64 < bits.size() && ((bits[m / 64] >> (m % 64)) & 1);
    return bit == present;
  };
  std::string s;
  for (std::uint32_t m = 0; m < n; ++m) {
    if (!in(m)) continue;
    std::uint32_t last = m;
    while (last + 1 < n && in(last + 1)) ++last;
    if (!s.empty()) s.push_back(',');
    s.append(std::to_string(m));
    if (last > m) {
      s.push_back(last == m + 1 ? ',' : '-');
      s.append(std::to_string(last));
    }
    m = last;
  }
  s.insert(s.begin(), '{');
  s.push_back('}');
  return s;
}

}  // namespace


WorkerProtocol::WorkerProtocol(const WorkerConfig& cfg) : cfg_(cfg) {
  rtt_.configure(cfg_.rto_initial, cfg_.rto_min, cfg_.rto_max);
  lat_.configure(cfg_.rto_initial, cfg_.rto_min, cfg_.rto_max);
  clear_recovery();
  if (cfg_.key) sealer_.emplace(*cfg_.key, cfg_.instance, cfg_.seq_base);
}

void WorkerProtocol::commit(Endpoint to, std::size_t size) {
  if (sealer_) size = sealer_->seal(out_.reserve(size + proto::kAuthTrailerBytes), size);
  out_.commit(to, size);
}

bool WorkerProtocol::authentic(std::span<const std::byte> bytes, const proto::PacketView& v,
                               std::size_t lane) {
  if (!cfg_.key) return true;
  if (!v.sealed) return false;
  if (lane_auth_.size() <= lane) lane_auth_.resize(lane + 1);
  LaneAuth& a = lane_auth_[lane];
  return proto::auth::open(*cfg_.key, a.mac, a.window, bytes) == proto::auth::Verdict::ok;
}

// ---- errors and descriptions ------------------------------------------------------------------

void WorkerProtocol::fail(WorkerErrorKind k, std::string msg, std::string_view label) {
  if (failed_) return;
  failed_ = true;
  joining_ = false;
  err_.kind = k;
  err_.message = std::string(label) + ": " + msg;
  // Every queued op fails with it; completions already reported stay pollable. The caller
  // owns the ops' buffers again: packets still queued stop referencing them.
  out_.materialize_all();
  ops_.clear();
  for (auto& e : ring_) e = Entry{};
  inflight_ = 0;
  clear_recovery();
}

std::string_view WorkerProtocol::label_for_errors() const {
  for (const auto& op : ops_)
    if (!op.finished) return op.w.label;
  return "switch path";
}

std::string WorkerProtocol::where(std::uint64_t chunk) const {
  if (lanes_.empty()) return "chunk " + std::to_string(chunk) + " of job " + std::to_string(cfg_.job);
  const std::uint32_t l = lane_of_chunk(chunk);
  return "chunk " + std::to_string(wire_chunk(chunk)) + " (slot " +
         std::to_string(info_.slots ? wire_chunk(chunk) % info_.slots : 0) +
         (L() > 1 ? ", lane " + std::to_string(l) : std::string()) + ") of job " +
         std::to_string(cfg_.job) + " at switch " + lanes_[l].ep.str();
}

std::string WorkerProtocol::describe_stall(Nanos now) const {
  if (failed_) return err_.message;
  if (joining_)
    return "waiting " + seconds(now - join_started_) + " for a join_ack from switch " +
           [&] {
             for (const auto& l : lanes_)
               if (!l.joined) return l.ep.str();
             return cfg_.switch_ep.str();
           }() + " for job " + std::to_string(cfg_.job) + " member " +
           std::to_string(cfg_.member) +
           (join_refusal_ == Reason::unknown_job ? " (the switch does not know the job)"
                                                 : " (no answer)");
  const Entry* oldest = nullptr;
  for (const auto& e : ring_)
    if (e.busy && (!oldest || e.chunk < oldest->chunk)) oldest = &e;
  if (!oldest) return queued() ? "ops queued, nothing in flight" : "idle";
  const Op* op = op_by_id(oldest->op);
  std::string msg = (op ? op->w.label + ": " : std::string()) + stall_detail(*oldest, now);
  return msg;
}

std::string WorkerProtocol::stall_detail(const Entry& e, Nanos now) const {
  const Entry* oldest = &e;
  std::string msg = where(oldest->chunk) +
                    " has no result after " + std::to_string(oldest->tries + 1) +
                    " transmissions over " + seconds(now - oldest->first_sent);
  if (oldest->awaiting_parent)
    msg += "; all members of that switch contributed and it waits for its parent switch";
  else if (oldest->pending_seen && oldest->members > 0)
    msg += "; the switch has contributions from members " +
           member_list(oldest->contributed, oldest->members, true) + " of " +
           std::to_string(oldest->members) + ", missing " +
           member_list(oldest->contributed, oldest->members, false);
  else
    msg += "; the switch never answered";
  return msg;
}

std::uint32_t WorkerProtocol::chunk_elems(NumKind k) const {
  // Narrow 16-bit cells hold two elements; sum_widen needs an f32 accumulator per element.
  if (k == NumKind::f16 || k == NumKind::bf16) return info_.slot_elems * 2;
  if (k == NumKind::i8 || k == NumKind::u8 || k == NumKind::e4m3 || k == NumKind::e5m2 ||
      k == NumKind::i4)
    return info_.slot_elems * 4;  // (i4: bytes of two elements, added in place)
  // MX: whole blocks, each needing 32 f32 accumulators in the switch (0 if a slot is smaller:
  // begin_op refuses the op then). i4_widen: a byte's two i16 accumulators fill one cell.
  if (WorkerOp::is_mx(k)) return info_.slot_elems / std::uint32_t(proto::kMxBlockElems);
  return k == NumKind::raw ? info_.slot_elems * 4 : info_.slot_elems;
}

// ---- the op queue -----------------------------------------------------------------------------

WorkerProtocol::Op* WorkerProtocol::op_by_id(std::uint64_t id) {
  if (ops_.empty() || id < ops_.front().id || id - ops_.front().id >= ops_.size()) return nullptr;
  return &ops_[std::size_t(id - ops_.front().id)];
}

const WorkerProtocol::Op* WorkerProtocol::op_by_id(std::uint64_t id) const {
  if (ops_.empty() || id < ops_.front().id || id - ops_.front().id >= ops_.size()) return nullptr;
  return &ops_[std::size_t(id - ops_.front().id)];
}

std::size_t WorkerProtocol::queued() const {
  std::size_t n = 0;
  for (const auto& op : ops_) n += !op.finished;
  return n;
}

bool WorkerProtocol::idle() const { return failed_ || (!joining_ && queued() == 0); }

bool WorkerProtocol::poll_completion(WorkerCompletion& c) {
  if (completions_.empty()) return false;
  c = std::move(completions_.front());
  completions_.pop_front();
  return true;
}

std::uint64_t WorkerProtocol::submit(WorkerOp w, Nanos now) {
  const std::uint64_t id = next_id_++;
  ++submitted_;
  if (failed_) return id;  // the stream is broken: reset() first
  const std::size_t es = WorkerOp::elem_bytes(w.kind);
  for (const auto& s : w.segments) {
    if ((!s.in.empty() && s.in.size() != s.elems * es) ||
        (!s.out.empty() && s.out.size() != s.elems * es)) {
      fail(WorkerErrorKind::invalid,
           "segment buffers do not match " + std::to_string(s.elems) + " elements of " +
               std::to_string(es) + " bytes",
           w.label);
      return id;
    }
  }
  if (w.kind == NumKind::fx32 && w.op != ReduceKind::sum) {
    fail(WorkerErrorKind::invalid, "fx32 (fixed point) supports only sum", w.label);
    return id;
  }
  if ((WorkerOp::widens(w.kind) || WorkerOp::is_mx(w.kind)) && w.op != ReduceKind::sum) {
    fail(WorkerErrorKind::invalid, "a widened accumulator (and an MX block) is for sums only", w.label);
    return id;
  }
  Op& op = ops_.emplace_back();
  op.id = id;
  op.headroom = fx32_headroom(std::max<std::uint32_t>(1, w.contributors));
  std::uint64_t elems = 0;
  for (const auto& s : w.segments) elems += s.elems;
  op.sync_left = w.sync && elems == 0;
  op.w = std::move(w);
  if (!joined_ && !joining_) begin_join(now);
  if (joined_) pump(now);
  return id;
}

void WorkerProtocol::start(WorkerOp op, Nanos now) {
  if (busy()) {
    fail(WorkerErrorKind::invalid, "start() while a collective is in progress", op.label);
    return;
  }
  if (failed_) reset();  // after an error, always join afresh
  rep_ = {};
  err_ = {};
  completions_.clear();
  submit(std::move(op), now);
}

void WorkerProtocol::reset() {
  out_.materialize_all();  // the ops are dropped: their buffers are the caller's again
  failed_ = false;
  joining_ = false;
  joined_ = false;
  lanes_.clear();
  ring_.clear();
  ops_.clear();
  completions_.clear();
  next_id_ = 0;
  issue_ = 0;
  submitted_ = 0;
  next_chunk_ = 0;
  inflight_ = 0;
  resize_at_.reset();
  rejoin_ = false;
  clear_recovery();
}

bool WorkerProtocol::begin_op(Op& op) {
  if (op.begun) return true;
  std::uint32_t need = 0;
  const bool mm = op.w.op != ReduceKind::sum;
  switch (op.w.kind) {
    case NumKind::i32: need = mm ? proto::cap::i32_minmax : proto::cap::i32_sum; break;
    case NumKind::f32: need = mm ? proto::cap::f32_minmax : proto::cap::f32_sum; break;
    case NumKind::fx32: need = proto::cap::i32_sum | proto::cap::i32_minmax; break;
    case NumKind::raw: need = proto::cap::raw_copy; break;
    case NumKind::f16:
    case NumKind::bf16: need = mm ? proto::cap::h16_minmax : proto::cap::h16_sum; break;
    case NumKind::f16_widen:
    case NumKind::bf16_widen: need = proto::cap::h16_widen; break;
    case NumKind::i8:
    case NumKind::u8: need = mm ? proto::cap::i8_minmax : proto::cap::i8_sum; break;
    case NumKind::i8_widen:
    case NumKind::u8_widen: need = proto::cap::i8_sum; break;
    case NumKind::e4m3:
    case NumKind::e5m2: need = mm ? proto::cap::fp8_minmax : proto::cap::fp8_sum; break;
    case NumKind::e4m3_widen:
    case NumKind::e5m2_widen: need = proto::cap::fp8_sum; break;
    case NumKind::i4: need = mm ? proto::cap::i4_minmax : proto::cap::i4_sum; break;
    case NumKind::i4_widen: need = proto::cap::i4_sum; break;
    case NumKind::mxe2m3:
    case NumKind::mxe3m2:
    case NumKind::mxe2m3_widen:
    case NumKind::mxe3m2_widen: need = proto::cap::mx6_sum; break;
    default: need = proto::cap::mx_sum; break;  // the other MX kinds
  }
  bool has_data = false;
  for (const auto& s : op.w.segments) has_data |= s.elems > 0;
  if (!has_data) need = 0;  // an empty op or a barrier's empty chunk needs no arithmetic
  if ((info_.caps & need) != need) {
    char caps[16];
    std::snprintf(caps, sizeof caps, "%x", info_.caps);
    fail(WorkerErrorKind::unsupported,
         "the switch path to the root of job " + std::to_string(cfg_.job) +
             " cannot aggregate this type/operation (capabilities 0x" + caps +
             "); use fx32 or the host algorithm",
         op.w.label);
    return false;
  }
  if (has_data && WorkerOp::is_mx(op.w.kind) && chunk_elems(op.w.kind) == 0) {
    fail(WorkerErrorKind::unsupported,
         "an MX block needs 32 accumulator cells and the switch's slots hold " +
             std::to_string(info_.slot_elems),
         op.w.label);
    return false;
  }
  op.begun = true;
  return true;
}

// ---- issuing chunks ---------------------------------------------------------------------------

void WorkerProtocol::op_chunk_done(Op& op) {
  --op.outstanding;
  if (!op.issued || op.outstanding != 0 || op.finished) return;
  op.finished = true;
  completions_.push_back({op.id, op.rep});
  while (!ops_.empty() && ops_.front().finished) ops_.pop_front();
}

void WorkerProtocol::pump(Nanos now) {
  if (!joined_ || failed_) return;
  // Repairs first, oldest first, as the window allows.
  while (!lost_q_.empty() && pipe_ < win_.cwnd()) {
    auto [i, chunk] = lost_q_.front();
    lost_q_.pop_front();
    Entry& e = ring_[i];
    if (!e.busy || e.chunk != chunk || !e.lost) continue;  // completed meanwhile
    e.repair = true;
    ++cc_.fast_retransmits;
    transmit(e, now, Tx::data);
  }
  const std::uint32_t R = ring_size();
  cwnd_limited_ = false;
  // At most kMaxBurst new chunks per event: a window opened all at once (an op submitted to an
  // empty pipe, a stall's end) would hit the link's queue as one burst; results clock the
  // rest out (they arrive one per chunk while the pipe is full).
  std::uint32_t burst = 0;
  while (joined_ && !failed_ && burst < kMaxBurst) {
    Op* op = op_by_id(issue_);
    if (!op) return;  // nothing queued
    if (!begin_op(*op)) return;
    Chunk c;
    if (!next_chunk(*op, c)) {  // every chunk of this op issued: move on to the next op
      op->issued = true;
      ++issue_;
      ++op->outstanding;  // complete it through the common path (empty ops finish here)
      op_chunk_done(*op);
      continue;
    }
    if (at_resize_boundary(now)) return;
    Entry& e = ring_[next_chunk_ % R];
    if (e.busy) return;  // the slot rule: chunk c - R has no result yet
    if (pipe_ >= win_.cwnd() || !lost_q_.empty()) {
      cwnd_limited_ = true;
      return;
    }
    if (op->w.kind == NumKind::fx32 && !c.exponent) {
      auto it = op->groups.find(c.group);
      if (it == op->groups.end() || !it->second.ready) return;  // exponents not agreed yet
    }
    e = Entry{};
    e.busy = true;
    e.chunk = next_chunk_;
    e.op = op->id;
    e.c = c;
    e.first_sent = now;
    advance_cursor(*op, c);
    ++op->outstanding;
    ++next_chunk_;
    ++burst;
    if (inflight_++ == 0) {
      last_progress_ = now;  // the progress clock starts with the first chunk
      if (last_activity_ && now - last_activity_ > rtt_.rto_base())
        win_.restart_after_idle(std::uint32_t(std::min<Nanos>((now - last_activity_) / rtt_.rto_base(), 32)),
                                kInitialWindow);
    }
    transmit(e, now, Tx::first);
  }
}

// ---- packets from the switch ------------------------------------------------------------------

void WorkerProtocol::on_packet(std::span<const std::byte> bytes, Endpoint from, Nanos now) {
  proto::PacketView v;
  const int lane = lane_of(from);
  if (lane < 0 || proto::decode(bytes, v) != Reason::ok || v.h.job != cfg_.job) {
    ++rep_.foreign;
    return;
  }
  const auto l = std::size_t(lane);
  // A keyed job takes only sealed, valid, fresh packets: a forged refusal, result or join_ack
  // could otherwise end or corrupt the job (docs/PROTOCOL.md, "Authentication").
  if (!authentic(bytes, v, l)) {
    ++rep_.unauthenticated;
    return;
  }
  count_rx(rep_, bytes.size());
  const Header& h = v.h;
  switch (h.type) {
    case PacketType::join_ack:
      return handle_join_ack(v, l, now);
    case PacketType::result:
      if (!joined_ || failed_ || h.epoch != lanes_[l].epoch) {
        ++rep_.foreign;
        return;
      }
      // The switch answers: the network is alive, so time-outs need not back off further
      // (loss there is random, not a collapse; the window has reacted to it already).
      rtt_.reset_backoff();
      last_heard_ = now;
      return handle_result(v, l, bytes.size(), now);
    case PacketType::nack:
      return handle_nack(v, l, now);
    case PacketType::pending: {
      if (!joined_ || failed_ || h.epoch != lanes_[l].epoch) return;
      rtt_.reset_backoff();
      last_heard_ = now;
      Entry* e = entry_for(h, l);
      if (!e) return;
      count_rx(op_by_id(e->op)->rep, bytes.size());
      const bool first = !e->pending_seen;
      e->pending_seen = true;
      e->contributed.resize(v.payload.size() / 8);
      for (std::size_t w = 0; w < e->contributed.size(); ++w)
        e->contributed[w] = proto::load_u64(v.payload.data() + 8 * w);
      e->members = h.aux;
      e->awaiting_parent = h.flags & proto::flag::awaiting_parent;
      on_pending(*e, first, now);
      pump(now);
      return;
    }
    default:
      ++rep_.foreign;
      return;
  }
}

WorkerProtocol::Entry* WorkerProtocol::entry_for(const Header& h, std::size_t lane) {
  const std::uint32_t S = info_.slots;
  if (h.slot >= S || h.chunk % S != h.slot) return nullptr;
  Entry& e = ring_[lane + L() * h.slot];
  if (!e.busy || wire_chunk(e.chunk) != h.chunk) return nullptr;
  return &e;
}

WorkerProtocol::Entry* WorkerProtocol::entry_at(std::size_t lane, std::uint32_t wire) {
  Entry& e = ring_[lane + L() * (wire % info_.slots)];
  if (!e.busy || wire_chunk(e.chunk) != wire || lane_of_chunk(e.chunk) != lane) return nullptr;
  return &e;
}

WorkerProtocol::Entry* WorkerProtocol::old_entry_for(const Header& h, std::size_t lane) {
  const std::uint32_t S = info_.slots;
  if (h.slot >= S || h.chunk % S != h.slot) return nullptr;
  Entry& e = ring_[lane + L() * h.slot];
  if (e.busy || wire_chunk(e.chunk) != h.chunk) return nullptr;
  return &e;
}

void WorkerProtocol::handle_result(const proto::PacketView& v, std::size_t lane,
                                   std::size_t bytes, Nanos now) {
  const Header& h = v.h;
  if (h.slot >= info_.slots || h.chunk % info_.slots != h.slot) {
    ++rep_.foreign;
    return;
  }
  if (h.flags & proto::flag::resize) {
    note_resize(h, lane);
    if (failed_) return;
  }
  Entry* ep = entry_for(h, lane);
  if (!ep) {
    ++rep_.duplicate_results;
    if (Entry* old = old_entry_for(h, lane)) {
      on_duplicate_result(*old, now);
      pump(now);
    } else if (on_late_result(lane, h.chunk)) {
      pump(now);
    }
    return;
  }
  Entry& e = *ep;
  Op& op = *op_by_id(e.op);
  count_rx(op.rep, bytes);
  const Chunk& c = e.c;
  const bool resent = (h.aux & proto::kResultResent) != 0;
  if (resent && (h.flags & proto::flag::elided) && c.want && c.n > 0 && !c.sync) {
    // The switch answers a probe that did not ask for the payload: the chunk is complete there.
    on_complete_notice(e, now);
    pump(now);
    return;
  }
  const NumKind kind = op.w.kind;
  const std::uint64_t E = chunk_elems(kind);
  const bool as_f32 = carries_f32(op, c);
  // A retransmission of this chunk queued in the same batch still reads its input, which the
  // result may be about to overwrite (in place) and which the caller owns again once the op
  // completed: it goes out with a copy instead. (Rare: a repair crossing its result.)
  if (e.ref_gen == out_.generation()) out_.materialize(e.chunk);
  if (c.want && c.n > 0 && !c.sync) {
    const ElemType we = as_f32 ? ElemType::f32 : wire_elem(kind);
    const WireOp wo = as_f32 ? WireOp::sum : wire_op(kind, op.w.op, c.exponent);
    if ((h.flags & proto::flag::elided) || h.count != c.n || h.elem != we || h.op != wo) {
      fail(WorkerErrorKind::protocol,
           where(e.chunk) + ": result has " + std::to_string(h.count) + " x " +
               std::string(proto::name(h.elem)) + " " + std::string(proto::name(h.op)) +
               ((h.flags & proto::flag::elided) ? " (elided)" : "") + ", expected " +
               std::to_string(c.n) + " x " + std::string(proto::name(we)) + " " +
               std::string(proto::name(wo)) + " (did every member issue the same collective?)",
           op.w.label);
      return;
    }
    const Segment& seg = op.w.segments[c.seg];
    if (c.exponent) {
      Group& g = op.groups[c.group];
      g.exps.resize(c.n);
      // A block with NaN or infinity on some member (kFxNonFinite) is carried as f32 in
      // the data round (carries_f32): IEEE propagation instead of a failed job.
      for (std::uint32_t b = 0; b < c.n; ++b)
        g.exps[b] = std::int32_t(proto::load_u32(v.payload.data() + 4 * b));
      g.ready = true;
    } else if (kind == NumKind::fx32 && !as_f32) {
      const Group& g = op.groups.at(c.group);
      scratch_.resize(c.n);
      std::memcpy(scratch_.data(), v.payload.data(), v.payload.size());
      fscratch_.resize(c.n);
      fx32_decode(scratch_.data(), c.n, g.exps[(c.off / E) % E], op.headroom, fscratch_.data());
      std::memcpy(seg.out.data() + c.off * 4, fscratch_.data(), std::size_t(c.n) * 4);
    } else {
      std::memcpy(seg.out.data() + c.off * WorkerOp::elem_bytes(kind), v.payload.data(),
                  v.payload.size());
    }
  }
  if (h.flags & proto::flag::overflow) {
    if (kind == NumKind::fx32) {
      fail(WorkerErrorKind::protocol,
           where(e.chunk) +
               ": fixed-point sum overflowed (more contributors than the op declared?)",
           op.w.label);
      return;
    }
    rep_.overflow = true;
    op.rep.overflow = true;
  }
  if (!c.exponent) {  // (an exponent round is a max: no events)
    rep_.events += proto::header_events(h);
    op.rep.events += proto::header_events(h);
  }
  if (kind == NumKind::fx32 && !c.exponent && !c.sync) {
    auto it = op.groups.find(c.group);
    if (it != op.groups.end() && --it->second.outstanding == 0) op.groups.erase(it);
  }
  on_chunk_result(e, now, resent);
  e.busy = false;
  --inflight_;
  ++rep_.chunks;
  ++op.rep.chunks;
  last_progress_ = now;
  op_chunk_done(op);  // may retire `op`
  pump(now);
}

void WorkerProtocol::handle_nack(const proto::PacketView& v, std::size_t lane, Nanos now) {
  const Header& h = v.h;
  const auto about = PacketType(h.aux & 0xFF);
  const std::uint32_t detail = h.aux >> 8;
  if (failed_) return;
  if (joining_) {
    if (about != PacketType::join) return;
    if (h.reason == Reason::unknown_job) {
      join_refusal_ = h.reason;  // not admitted yet: keep trying until the join deadline
      return;
    }
    fail(WorkerErrorKind::rejected,
         "switch " + lanes_[lane].ep.str() + " refused member " + std::to_string(cfg_.member) +
             " of job " + std::to_string(cfg_.job) + ": " + std::string(proto::name(h.reason)),
         label_for_errors());
    return;
  }
  if (!joined_) return;
  const std::uint32_t epoch = lanes_[lane].epoch;
  if (h.reason == Reason::job_failed) {
    if (h.epoch != epoch) return;
    fail(WorkerErrorKind::job_failed,
         "job " + std::to_string(cfg_.job) + " failed upstream of switch " +
             lanes_[lane].ep.str() + ": its parent reported " +
             std::string(proto::name(Reason(detail & 0xFF))) +
             " (the parent switch restarted or lost the job); retry or use the host algorithm",
         label_for_errors());
    return;
  }
  // Other refusals must name a chunk in flight and a packet of the current join (the nack
  // carries the switch's epoch for the job, or the refused packet's when the job is unknown),
  // else they are late answers to old packets.
  if (about != PacketType::data) return;
  if (h.reason == Reason::missing) {
    // The chunk named, and those before it on the lane flagged in the detail: oldest first.
    if (h.epoch != epoch || h.slot >= info_.slots || h.chunk % info_.slots != h.slot) return;
    for (std::uint32_t i = proto::kMissingSpan; i >= 1; --i)
      if ((detail >> i) & 1)
        if (Entry* x = entry_at(lane, h.chunk - i)) on_missing(*x, false, now);
    if (Entry* x = entry_for(h, lane)) on_missing(*x, (detail & proto::kMissingAnswersProbe) != 0, now);
    return;
  }
  Entry* e = entry_for(h, lane);
  if (!e) return;
  if (h.reason != Reason::stale_epoch && h.epoch != epoch) return;
  const Op& op = *op_by_id(e->op);
  const std::string label = op.w.label;
  switch (h.reason) {
    case Reason::unknown_job:
      fail(WorkerErrorKind::switch_restarted,
           where(e->chunk) + ": the switch no longer knows the job (it restarted or released "
                             "it); partial aggregates are lost, retry or use the host algorithm",
           label);
      return;
    case Reason::stale_epoch:
      if (h.epoch == epoch) return;
      fail(WorkerErrorKind::switch_restarted,
           where(e->chunk) + ": the switch's epoch for the job changed (restart or reset by a "
                             "newer session); retry or use the host algorithm",
           label);
      return;
    case Reason::mismatch: {
      const bool as_f32 = carries_f32(op, e->c);
      const ElemType we = as_f32 ? ElemType::f32 : wire_elem(op.w.kind);
      const WireOp wo = as_f32 ? WireOp::sum : wire_op(op.w.kind, op.w.op, e->c.exponent);
      fail(WorkerErrorKind::mismatch,
           where(e->chunk) + ": members disagree: the switch holds " +
               std::to_string(detail & 0xFFFF) + " x " +
               std::string(proto::name(ElemType((detail >> 16) & 0xF))) + " " +
               std::string(proto::name(WireOp((detail >> 20) & 0xF))) + ", this member sent " +
               std::to_string(e->c.n) + " x " + std::string(proto::name(we)) + " " +
               std::string(proto::name(wo)) + " (did every rank call the same collective with the same count?)",
           label);
      return;
    }
    case Reason::unsupported:
      fail(WorkerErrorKind::unsupported, where(e->chunk) + ": the switch cannot aggregate it",
           label);
      return;
    default:
      fail(WorkerErrorKind::rejected,
           where(e->chunk) + ": refused by the switch: " + std::string(proto::name(h.reason)),
           label);
      return;
  }
}

// ---- timers -----------------------------------------------------------------------------------

void WorkerProtocol::on_tick(Nanos now) {
  if (failed_) return;
  if (joining_) return join_tick(now);
  if (!joined_ || inflight_ == 0) return;
  if (now - last_progress_ >= cfg_.progress_timeout) {
    const Entry* oldest = nullptr;
    for (const auto& e : ring_)
      if (e.busy && (!oldest || e.chunk < oldest->chunk)) oldest = &e;
    const Op* op = op_by_id(oldest->op);
    fail(WorkerErrorKind::timeout,
         "no progress for " + seconds(cfg_.progress_timeout) + ": " + stall_detail(*oldest, now),
         op ? std::string_view(op->w.label) : label_for_errors());
    return;
  }
  if (now >= reo_deadline_) rack_detect(now);
  if (now >= poll_deadline_) on_poll(now);
  if (now >= rto_deadline_)
    on_rto(now);
  else if (now >= probe_deadline_)
    on_probe(now);
  pump(now);
}

Nanos WorkerProtocol::next_deadline() const {
  if (failed_) return std::numeric_limits<Nanos>::max();
  if (joining_) {
    Nanos t = join_deadline_;
    for (const auto& l : lanes_)
      if (!l.joined) t = std::min(t, l.resend);
    return t;
  }
  if (!joined_ || inflight_ == 0) return std::numeric_limits<Nanos>::max();
  return std::min({last_progress_ + cfg_.progress_timeout, rto_deadline_, probe_deadline_,
                   reo_deadline_, poll_deadline_});
}

}  // namespace inc::sw
