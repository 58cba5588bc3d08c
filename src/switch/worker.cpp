#include "src/switch/worker.hpp"

#include <algorithm>
#include <cstring>

#include "src/switch/arith.hpp"

namespace inc::sw {

using proto::ElemType;
using proto::Header;
using proto::PacketType;
using proto::Reason;
using proto::WireOp;

namespace {
constexpr std::uint32_t kSyncSeg = 0xFFFFFFFF;

std::string seconds(Nanos t) {
  char b[32];
  std::snprintf(b, sizeof b, "%.3f s", double(t) / 1e9);
  return b;
}

std::string member_list(std::uint64_t bits, std::uint32_t n, bool present) {
  std::string s;
  for (std::uint32_t m = 0; m < n && m < 64; ++m)
    if (((bits >> m) & 1) == present) {
      if (!s.empty()) s.push_back(',');
      s.append(std::to_string(m));
    }
  s.insert(s.begin(), '{');
  s.push_back('}');
  return s;
}
}  // namespace

std::string_view name(WorkerErrorKind k) noexcept {
  constexpr std::string_view names[] = {"none",     "invalid",     "timeout",   "switch_restarted",
                                        "job_failed", "rejected", "unsupported", "nonfinite",
                                        "protocol"};
  return names[static_cast<unsigned>(k)];
}

// ---- op builders ------------------------------------------------------------------------------

WorkerOp WorkerOp::allreduce(NumKind k, ReduceKind op, std::span<const std::byte> in,
                             std::span<std::byte> out, std::uint64_t count, std::uint32_t nranks) {
  WorkerOp w;
  w.label = "allreduce";
  w.kind = k;
  w.op = op;
  w.contributors = nranks;
  if (count) w.segments.push_back({count, in, out});
  return w;
}

WorkerOp WorkerOp::reduce_scatter(NumKind k, ReduceKind op, std::span<const std::byte> in,
                                  std::span<std::byte> out, std::uint64_t count,
                                  std::uint32_t nranks, std::uint32_t rank) {
  WorkerOp w;
  w.label = "reduce_scatter";
  w.kind = k;
  w.op = op;
  w.contributors = nranks;
  const std::size_t bytes = count * elem_bytes(k);
  if (count)
    for (std::uint32_t r = 0; r < nranks; ++r)
      w.segments.push_back({count, in.empty() ? in : in.subspan(r * bytes, bytes),
                            r == rank ? out : std::span<std::byte>{}});
  return w;
}

WorkerOp WorkerOp::reduce(NumKind k, ReduceKind op, std::span<const std::byte> in,
                          std::span<std::byte> out, std::uint64_t count, std::uint32_t nranks,
                          bool is_root) {
  WorkerOp w = allreduce(k, op, in, is_root ? out : std::span<std::byte>{}, count, nranks);
  w.label = "reduce";
  return w;
}

WorkerOp WorkerOp::allgather(std::span<const std::byte> in, std::span<std::byte> out,
                             std::uint64_t bytes, std::uint32_t nranks, std::uint32_t rank) {
  WorkerOp w;
  w.label = "allgather";
  w.kind = NumKind::raw;
  w.op = ReduceKind::sum;
  w.contributors = 1;
  if (bytes)
    for (std::uint32_t r = 0; r < nranks; ++r)
      w.segments.push_back(
          {bytes, r == rank ? in : std::span<const std::byte>{}, out.subspan(r * bytes, bytes)});
  return w;
}

WorkerOp WorkerOp::broadcast(std::span<std::byte> buf, bool is_root) {
  WorkerOp w;
  w.label = "broadcast";
  w.kind = NumKind::raw;
  w.contributors = 1;
  if (!buf.empty())
    w.segments.push_back({buf.size(), is_root ? std::span<const std::byte>(buf) : std::span<const std::byte>{},
                          is_root ? std::span<std::byte>{} : buf});
  return w;
}

WorkerOp WorkerOp::barrier() {
  WorkerOp w;
  w.label = "barrier";
  w.kind = NumKind::raw;
  w.sync = true;
  return w;
}

// ---- state machine ----------------------------------------------------------------------------

WorkerProtocol::WorkerProtocol(const WorkerConfig& cfg) : cfg_(cfg) {}

void WorkerProtocol::fail(WorkerErrorKind k, std::string msg) {
  if (state_ == State::failed) return;
  state_ = State::failed;
  err_.kind = k;
  err_.message = op_.label + ": " + msg;
}

std::string WorkerProtocol::where(std::uint32_t chunk) const {
  return "chunk " + std::to_string(chunk) + " (slot " +
         std::to_string(info_.slots ? chunk % info_.slots : 0) + ") of job " +
         std::to_string(cfg_.job) + " at switch " + cfg_.switch_ep.str();
}

std::uint32_t WorkerProtocol::chunk_elems() const {
  return op_.kind == NumKind::raw ? info_.slot_elems * 4 : info_.slot_elems;
}

ElemType WorkerProtocol::wire_elem(const Chunk& c) const {
  switch (op_.kind) {
    case NumKind::i32:
    case NumKind::fx32: return ElemType::i32;
    case NumKind::f32: return ElemType::f32;
    case NumKind::raw: return ElemType::raw;
  }
  (void)c;
  return ElemType::none;
}

WireOp WorkerProtocol::wire_op(const Chunk& c) const {
  if (op_.kind == NumKind::raw) return WireOp::copy;
  if (op_.kind == NumKind::fx32) return c.exponent ? WireOp::max : WireOp::sum;
  switch (op_.op) {
    case ReduceKind::sum: return WireOp::sum;
    case ReduceKind::max: return WireOp::max;
    case ReduceKind::min: return WireOp::min;
  }
  return WireOp::none;
}

void WorkerProtocol::reset() {
  joined_ = false;
  epoch_ = 0;
  slots_.clear();
  next_chunk_ = 0;
  inflight_ = 0;
  if (state_ != State::idle) state_ = State::idle;
}

void WorkerProtocol::leave(Nanos) {
  if (!joined_) return;
  Header h;
  h.type = PacketType::leave;
  h.member = cfg_.member;
  h.job = cfg_.job;
  h.epoch = epoch_;
  proto::encode_header(h, out_.reserve(proto::kHeaderBytes));
  out_.commit(cfg_.switch_ep, proto::kHeaderBytes);
  ++rep_.packets_sent;
  rep_.bytes_sent += proto::kHeaderBytes;
  reset();
}

void WorkerProtocol::start(WorkerOp op, Nanos now) {
  if (busy()) {
    fail(WorkerErrorKind::invalid, "start() while a collective is in progress");
    return;
  }
  if (state_ == State::failed) reset();  // after an error, always join afresh
  op_ = std::move(op);
  rep_ = {};
  err_ = {};
  cur_seg_ = 0;
  cur_off_ = 0;
  group_left_ = 0;
  cur_group_ = 0;
  sync_sent_ = false;
  groups_.clear();
  headroom_ = fx32_headroom(std::max<std::uint32_t>(1, op_.contributors));
  last_progress_ = now;
  state_ = State::running;
  const std::size_t es = WorkerOp::elem_bytes(op_.kind);
  for (const auto& s : op_.segments) {
    if ((!s.in.empty() && s.in.size() != s.elems * es) ||
        (!s.out.empty() && s.out.size() != s.elems * es)) {
      fail(WorkerErrorKind::invalid, "segment buffers do not match " + std::to_string(s.elems) +
                                         " elements of " + std::to_string(es) + " bytes");
      return;
    }
  }
  if (op_.kind == NumKind::fx32 && op_.op != ReduceKind::sum) {
    fail(WorkerErrorKind::invalid, "fx32 (fixed point) supports only sum");
    return;
  }
  if (!joined_) {
    state_ = State::joining;
    join_deadline_ = now + cfg_.join_timeout;
    join_rto_ = cfg_.rto_initial;
    join_refusal_ = Reason::ok;
    // A fresh nonce per join: a join_ack that answers an earlier join (before a restart or a
    // reset) carries another nonce and is ignored.
    join_nonce_ = std::uint32_t(std::uint64_t(now) * 0x9E3779B1u) ^ (cfg_.member * 0x85EBCA6Bu) ^
                  (join_nonce_ + 0x632BE5ABu);
    send_join(now, false);
    return;
  }
  begin_running(now);
}

void WorkerProtocol::send_join(Nanos now, bool retransmit) {
  Header h;
  h.type = PacketType::join;
  h.flags = retransmit ? proto::flag::retransmit : 0;
  h.member = cfg_.member;
  h.job = cfg_.job;
  h.aux = cfg_.session;
  h.chunk = join_nonce_;
  proto::encode_header(h, out_.reserve(proto::kHeaderBytes));
  out_.commit(cfg_.switch_ep, proto::kHeaderBytes);
  ++rep_.packets_sent;
  rep_.bytes_sent += proto::kHeaderBytes;
  if (retransmit) {
    ++rep_.retransmissions;
    join_rto_ = std::min(join_rto_ * 2, cfg_.rto_max);
  }
  join_resend_ = now + join_rto_;
}

void WorkerProtocol::begin_running(Nanos now) {
  std::uint32_t need = 0;
  const bool mm = op_.op != ReduceKind::sum;
  switch (op_.kind) {
    case NumKind::i32: need = mm ? proto::cap::i32_minmax : proto::cap::i32_sum; break;
    case NumKind::f32: need = mm ? proto::cap::f32_minmax : proto::cap::f32_sum; break;
    case NumKind::fx32: need = proto::cap::i32_sum | proto::cap::i32_minmax; break;
    case NumKind::raw: need = proto::cap::raw_copy; break;
  }
  if (op_.segments.empty() && !op_.sync) need = 0;
  if ((info_.caps & need) != need) {
    fail(WorkerErrorKind::unsupported,
         "the switch path to the root of job " + std::to_string(cfg_.job) +
             " cannot aggregate this type/operation (capabilities 0x" +
             [&] {
               char b[16];
               std::snprintf(b, sizeof b, "%x", info_.caps);
               return std::string(b);
             }() +
             "); use fx32 or the host algorithm");
    return;
  }
  state_ = State::running;
  last_progress_ = now;
  pump(now);
}

bool WorkerProtocol::next_chunk(Chunk& c) {
  while (cur_seg_ < op_.segments.size() && cur_off_ >= op_.segments[cur_seg_].elems) {
    ++cur_seg_;
    cur_off_ = 0;
  }
  if (cur_seg_ >= op_.segments.size()) {
    if (op_.sync && !sync_sent_ && rep_.chunks == 0 && inflight_ == 0 && op_.segments.empty()) {
      c = Chunk{};
      c.seg = kSyncSeg;
      c.want = true;
      return true;
    }
    return false;
  }
  const Segment& s = op_.segments[cur_seg_];
  const std::uint64_t E = chunk_elems();
  c = Chunk{};
  c.seg = cur_seg_;
  c.off = cur_off_;
  c.group = cur_group_;
  c.has_in = !s.in.empty();
  if (op_.kind == NumKind::fx32 && group_left_ == 0) {
    std::uint64_t blocks = (s.elems - cur_off_ + E - 1) / E;
    c.exponent = true;
    c.n = std::uint32_t(std::min<std::uint64_t>(blocks, E));
    c.want = true;
    return true;
  }
  c.n = std::uint32_t(std::min<std::uint64_t>(E, s.elems - cur_off_));
  c.want = !s.out.empty();
  return true;
}

void WorkerProtocol::advance_cursor() {
  Chunk c;
  if (!next_chunk(c)) return;
  if (c.seg == kSyncSeg) {
    sync_sent_ = true;
    return;
  }
  if (c.exponent) {
    group_left_ = c.n;
    Group& g = groups_[cur_group_];
    g.outstanding = c.n;
    return;
  }
  cur_off_ += c.n;
  if (op_.kind == NumKind::fx32 && --group_left_ == 0) ++cur_group_;
}

void WorkerProtocol::pump(Nanos now) {
  const std::uint32_t S = info_.slots;
  const std::uint32_t window = cfg_.window ? std::min(cfg_.window, S) : S;
  Chunk c;
  while (state_ == State::running && next_chunk(c)) {
    Slot& s = slots_[next_chunk_ % S];
    if (s.busy || inflight_ >= window) return;
    if (op_.kind == NumKind::fx32 && !c.exponent && c.seg != kSyncSeg) {
      auto it = groups_.find(c.group);
      if (it == groups_.end() || !it->second.ready) return;  // exponents not agreed yet
    }
    s = Slot{};
    s.busy = true;
    s.chunk = next_chunk_;
    s.c = c;
    s.rto = cfg_.rto_initial;
    s.deadline = now + s.rto;
    s.first_sent = now;
    advance_cursor();
    ++next_chunk_;
    ++inflight_;
    send_chunk(s, false);
  }
  if (state_ == State::running && inflight_ == 0 && !next_chunk(c)) state_ = State::done;
}

void WorkerProtocol::send_chunk(Slot& s, bool retransmit) {
  const Chunk& c = s.c;
  Header h;
  h.type = PacketType::data;
  h.member = cfg_.member;
  h.job = cfg_.job;
  h.epoch = epoch_;
  h.chunk = s.chunk;
  h.slot = std::uint16_t(s.chunk % info_.slots);
  if (c.want) h.flags |= proto::flag::want_result;
  if (retransmit) h.flags |= proto::flag::retransmit;
  std::size_t payload = 0;
  std::byte* p = nullptr;
  if (c.has_in && c.seg != kSyncSeg) {
    const Segment& seg = op_.segments[c.seg];
    h.elem = wire_elem(c);
    h.op = wire_op(c);
    h.count = std::uint16_t(c.n);
    payload = std::size_t(c.n) * proto::elem_size(h.elem);
    p = out_.reserve(proto::kHeaderBytes + payload);
    std::byte* dst = p + proto::kHeaderBytes;
    const std::uint64_t E = chunk_elems();
    if (c.exponent) {
      std::vector<float> tmp;
      for (std::uint32_t b = 0; b < c.n; ++b) {
        std::uint64_t first = c.off + b * E;
        std::uint64_t len = std::min<std::uint64_t>(E, seg.elems - first);
        tmp.resize(len);
        std::memcpy(tmp.data(), seg.in.data() + first * 4, len * 4);
        proto::store_u32(dst + 4 * b, std::uint32_t(fx32_block_exponent(tmp.data(), len)));
      }
    } else if (op_.kind == NumKind::fx32) {
      const Group& g = groups_.at(c.group);
      std::int32_t e = g.exps[(c.off / E) % E];
      std::vector<float> tmp(c.n);
      std::memcpy(tmp.data(), seg.in.data() + c.off * 4, std::size_t(c.n) * 4);
      scratch_.resize(c.n);
      fx32_encode(tmp.data(), c.n, e, headroom_, scratch_.data());
      std::memcpy(dst, scratch_.data(), payload);
    } else {
      std::memcpy(dst, seg.in.data() + c.off * WorkerOp::elem_bytes(op_.kind), payload);
    }
  } else {
    p = out_.reserve(proto::kHeaderBytes);
  }
  proto::encode_header(h, p);
  out_.commit(cfg_.switch_ep, proto::kHeaderBytes + payload);
  ++rep_.packets_sent;
  rep_.bytes_sent += proto::kHeaderBytes + payload;
  if (retransmit) ++rep_.retransmissions;
}

void WorkerProtocol::on_packet(std::span<const std::byte> bytes, Endpoint from, Nanos now) {
  proto::PacketView v;
  if (proto::decode(bytes, v) != Reason::ok || from != cfg_.switch_ep || v.h.job != cfg_.job) {
    ++rep_.foreign;
    return;
  }
  ++rep_.packets_received;
  rep_.bytes_received += bytes.size();
  const Header& h = v.h;
  switch (h.type) {
    case PacketType::join_ack: {
      if (state_ != State::joining || h.chunk != join_nonce_) return;  // a late duplicate
      auto info = proto::read_join_info(v.payload);
      if (info.slots == 0 || info.slots > 0xFFFF || info.slot_elems == 0 ||
          info.slot_elems > proto::kMaxPayloadBytes / 4 || h.epoch == 0) {
        fail(WorkerErrorKind::protocol, "switch " + cfg_.switch_ep.str() + " sent an invalid join_ack");
        return;
      }
      info_ = info;
      epoch_ = h.epoch;
      joined_ = true;
      slots_.assign(info.slots, Slot{});
      next_chunk_ = 0;
      inflight_ = 0;
      begin_running(now);
      return;
    }
    case PacketType::result:
      if (state_ != State::running || h.epoch != epoch_) {
        ++rep_.foreign;
        return;
      }
      return handle_result(v, now);
    case PacketType::nack:
      return handle_nack(v);
    case PacketType::pending: {
      if (state_ != State::running || h.epoch != epoch_ || h.slot >= slots_.size()) return;
      Slot& s = slots_[h.slot];
      if (!s.busy || s.chunk != h.chunk) return;
      s.pending_seen = true;
      s.contributed = proto::load_u64(v.payload.data());
      s.members = h.aux;
      s.awaiting_parent = h.flags & proto::flag::awaiting_parent;
      return;
    }
    default:
      ++rep_.foreign;
      return;
  }
}

void WorkerProtocol::handle_result(const proto::PacketView& v, Nanos now) {
  const Header& h = v.h;
  const std::uint32_t S = info_.slots;
  if (h.slot >= S || h.chunk % S != h.slot) {
    ++rep_.foreign;
    return;
  }
  Slot& s = slots_[h.slot];
  if (!s.busy || s.chunk != h.chunk) {
    ++rep_.duplicate_results;
    return;
  }
  const Chunk& c = s.c;
  const std::uint64_t E = chunk_elems();
  if (c.want && c.n > 0 && c.seg != kSyncSeg) {
    if ((h.flags & proto::flag::elided) || h.count != c.n || h.elem != wire_elem(c) ||
        h.op != wire_op(c)) {
      fail(WorkerErrorKind::protocol,
           where(h.chunk) + ": result has " + std::to_string(h.count) + " x " +
               std::string(proto::name(h.elem)) + " " + std::string(proto::name(h.op)) +
               ((h.flags & proto::flag::elided) ? " (elided)" : "") + ", expected " +
               std::to_string(c.n) + " x " + std::string(proto::name(wire_elem(c))) + " " +
               std::string(proto::name(wire_op(c))) +
               " (did every member issue the same collective?)");
      return;
    }
    const Segment& seg = op_.segments[c.seg];
    if (c.exponent) {
      Group& g = groups_[c.group];
      g.exps.resize(c.n);
      for (std::uint32_t b = 0; b < c.n; ++b) {
        g.exps[b] = std::int32_t(proto::load_u32(v.payload.data() + 4 * b));
        if (g.exps[b] == kFxNonFinite) {
          fail(WorkerErrorKind::nonfinite,
               "block " + std::to_string((c.off / E) + b) + " of segment " + std::to_string(c.seg) +
                   " holds NaN or infinity on some member; fixed point cannot carry it");
          return;
        }
      }
      g.ready = true;
    } else if (op_.kind == NumKind::fx32) {
      Group& g = groups_.at(c.group);
      scratch_.resize(c.n);
      std::memcpy(scratch_.data(), v.payload.data(), v.payload.size());
      std::vector<float> tmp(c.n);
      fx32_decode(scratch_.data(), c.n, g.exps[(c.off / E) % E], headroom_, tmp.data());
      std::memcpy(seg.out.data() + c.off * 4, tmp.data(), std::size_t(c.n) * 4);
    } else {
      std::memcpy(seg.out.data() + c.off * WorkerOp::elem_bytes(op_.kind), v.payload.data(),
                  v.payload.size());
    }
  }
  if (h.flags & proto::flag::overflow) {
    if (op_.kind == NumKind::fx32) {
      fail(WorkerErrorKind::protocol, where(h.chunk) +
                                          ": fixed-point sum overflowed (more contributors than "
                                          "the op declared?)");
      return;
    }
    rep_.overflow = true;
  }
  if (op_.kind == NumKind::fx32 && !c.exponent && c.seg != kSyncSeg) {
    auto it = groups_.find(c.group);
    if (it != groups_.end() && --it->second.outstanding == 0) groups_.erase(it);
  }
  s.busy = false;
  --inflight_;
  ++rep_.chunks;
  last_progress_ = now;
  pump(now);
}

void WorkerProtocol::handle_nack(const proto::PacketView& v) {
  const Header& h = v.h;
  const auto about = PacketType(h.aux & 0xFF);
  const std::uint32_t detail = h.aux >> 8;
  if (state_ == State::joining) {
    if (about != PacketType::join) return;
    if (h.reason == Reason::unknown_job) {
      join_refusal_ = h.reason;  // not admitted yet: keep trying until the join deadline
      return;
    }
    fail(WorkerErrorKind::rejected, "switch " + cfg_.switch_ep.str() + " refused member " +
                                        std::to_string(cfg_.member) + " of job " +
                                        std::to_string(cfg_.job) + ": " +
                                        std::string(proto::name(h.reason)));
    return;
  }
  if (state_ != State::running) return;
  if (h.reason == Reason::job_failed) {
    if (h.epoch != epoch_) return;
    fail(WorkerErrorKind::job_failed,
         "job " + std::to_string(cfg_.job) + " failed upstream of switch " + cfg_.switch_ep.str() +
             ": its parent reported " + std::string(proto::name(Reason(detail & 0xFF))) +
             " (the parent switch restarted or lost the job); retry or use the host algorithm");
    return;
  }
  // Other refusals must name a chunk in flight and a packet of the current join (the nack
  // carries the switch's epoch for the job, or the refused packet's when the job is unknown),
  // else they are late answers to old packets.
  if (about != PacketType::data || h.slot >= slots_.size() || !slots_[h.slot].busy ||
      slots_[h.slot].chunk != h.chunk)
    return;
  if (h.reason != Reason::stale_epoch && h.epoch != epoch_) return;
  switch (h.reason) {
    case Reason::unknown_job:
      fail(WorkerErrorKind::switch_restarted,
           where(h.chunk) + ": the switch no longer knows the job (it restarted or released "
                            "it); partial aggregates are lost, retry or use the host algorithm");
      return;
    case Reason::stale_epoch:
      if (h.epoch == epoch_) return;
      fail(WorkerErrorKind::switch_restarted,
           where(h.chunk) + ": the switch's epoch for the job changed (restart or reset by a "
                            "newer session); retry or use the host algorithm");
      return;
    case Reason::mismatch:
      fail(WorkerErrorKind::rejected,
           where(h.chunk) + ": members disagree: the switch holds " +
               std::to_string(detail & 0xFFFF) + " x " +
               std::string(proto::name(ElemType((detail >> 16) & 0xF))) + " " +
               std::string(proto::name(WireOp((detail >> 20) & 0xF))) + ", this member sent " +
               std::to_string(slots_[h.slot].c.n) + " x " +
               std::string(proto::name(wire_elem(slots_[h.slot].c))) + " " +
               std::string(proto::name(wire_op(slots_[h.slot].c))));
      return;
    case Reason::unsupported:
      fail(WorkerErrorKind::unsupported, where(h.chunk) + ": the switch cannot aggregate it");
      return;
    default:
      fail(WorkerErrorKind::rejected,
           where(h.chunk) + ": refused by the switch: " + std::string(proto::name(h.reason)));
      return;
  }
}

void WorkerProtocol::on_tick(Nanos now) {
  if (state_ == State::joining) {
    if (now >= join_deadline_) {
      fail(WorkerErrorKind::timeout,
           "no join_ack from switch " + cfg_.switch_ep.str() + " for job " +
               std::to_string(cfg_.job) + " member " + std::to_string(cfg_.member) + " within " +
               seconds(cfg_.join_timeout) +
               (join_refusal_ == Reason::unknown_job ? " (the switch does not know the job)"
                                                     : " (no answer)"));
      return;
    }
    if (now >= join_resend_) send_join(now, true);
    return;
  }
  if (state_ != State::running) return;
  if (now - last_progress_ >= cfg_.progress_timeout) {
    const Slot* oldest = nullptr;
    for (const auto& s : slots_)
      if (s.busy && (!oldest || proto::chunk_distance(s.chunk, oldest->chunk) < 0)) oldest = &s;
    std::string msg = "no progress for " + seconds(cfg_.progress_timeout);
    if (oldest) {
      msg += ": " + where(oldest->chunk) + " has no result after " +
             std::to_string(oldest->tries + 1) + " transmissions";
      if (oldest->awaiting_parent)
        msg += "; all members of that switch contributed and it waits for its parent switch";
      else if (oldest->pending_seen)
        msg += "; the switch has contributions from members " +
               member_list(oldest->contributed, oldest->members, true) + " of " +
               std::to_string(oldest->members) + ", missing " +
               member_list(oldest->contributed, oldest->members, false);
      else
        msg += "; the switch never answered";
    }
    fail(WorkerErrorKind::timeout, msg);
    return;
  }
  for (auto& s : slots_) {
    if (!s.busy || s.deadline > now) continue;
    ++s.tries;
    s.rto = std::min(s.rto * 2, cfg_.rto_max);
    s.deadline = now + s.rto;
    send_chunk(s, true);
  }
}

Nanos WorkerProtocol::next_deadline() const {
  if (state_ == State::joining) return std::min(join_deadline_, join_resend_);
  if (state_ != State::running) return std::numeric_limits<Nanos>::max();
  Nanos t = last_progress_ + cfg_.progress_timeout;
  for (const auto& s : slots_)
    if (s.busy) t = std::min(t, s.deadline);
  return t;
}

}  // namespace inc::sw
