#include "src/switch/dataplane.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

#include "src/switch/arith.hpp"

namespace inc::sw {

using proto::ElemType;
using proto::Header;
using proto::PacketType;
using proto::PacketView;
using proto::Reason;
using proto::WireOp;

namespace {
std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
}  // namespace

SwitchDataPlane::SwitchDataPlane(const SwitchConfig& cfg) : cfg_(cfg) {
  cfg_.lanes = std::clamp<std::uint16_t>(cfg_.lanes, 1, proto::kMaxLanes);
  cfg_.lane = std::min<std::uint16_t>(cfg_.lane, std::uint16_t(cfg_.lanes - 1));
  cfg_.slot_elems = std::clamp<std::uint32_t>(cfg_.slot_elems, 1, proto::kMaxPayloadBytes / 4);
  cells_.assign(std::size_t(cfg_.slots) * 2 * cfg_.slot_elems, 0);
  copies_.assign(std::size_t(cfg_.slots) * 2, Copy{});
  ref_gen_.assign(std::size_t(cfg_.slots) * 2, 0);
  owner_.assign(cfg_.slots, 0);
  seq_ = cfg_.auth_seq_base;
  if (cfg_.control_key) control_mac_.emplace(*cfg_.control_key, cfg_.auth_instance);
}

std::uint32_t SwitchDataPlane::new_epoch() {
  // Unique per (incarnation, admission): a restarted switch (new incarnation) or a reset job
  // hands out epochs that old packets cannot carry, except with probability 2^-32.
  for (;;) {
    auto e = std::uint32_t(splitmix64(cfg_.incarnation * 0x100000001B3ull + ++epochs_issued_));
    if (e != 0) return e;
  }
}

void SwitchDataPlane::init_copies(Job& j, std::uint32_t first) {
  // Before its first use, each copy looks like it completed chunk (first chunk - 2 x slots),
  // so the first contribution of its first chunk is accepted as "the next use". `first`: the
  // stream starts there (a live resize), not at 0.
  static_assert(sizeof(Copy) <= 48, "a copy's header stays within 48 bytes (docs/SWITCH.md \"Member sets\")");
  const std::uint32_t S = j.spec.slots;
  j.stream_start = first;
  for (std::uint32_t s = 0; s < S; ++s) {
    const std::uint32_t a = first + (s + S - first % S) % S;  // slot s's first chunk >= first
    for (std::uint32_t c = 0; c < 2; ++c) {
      Copy& cp = copies_[j.slot_of[s] * 2 + c];
      cp = Copy{};
      cp.seq = (((a / S) & 1) == c ? a : a + S) - 2 * S;
      cp.st = kComplete;
      cp.local = s * 2 + c;
    }
  }
  j.wide.assign(std::size_t(S) * 2 * 3 * j.wide_words, 0);
}


Reason SwitchDataPlane::admit(const JobSpec& spec, Nanos now, bool dynamic) {
  if (spec.members == 0 || spec.members > proto::kMaxMembers) return Reason::bad_member;
  if (spec.slots == 0 || spec.slots > 0xFFFF) return Reason::bad_slot;
  if (spec.parent_member != proto::kNoMember && !cfg_.parent.valid()) return Reason::bad_field;
  if (Job* j = find(spec.job)) return j->spec == spec ? Reason::ok : Reason::job_exists;
  auto where = allocate(spec.slots, spec.job);
  if (!where) return Reason::no_slots;
  Job& j = jobs_[spec.job];
  j.spec = spec;
  j.dynamic = dynamic;
  j.slot_of = std::move(*where);
  j.epoch = new_epoch();
  j.members.assign(spec.members, Member{});
  j.wide_words = (spec.members + 63u) / 64u - 1u;
  if (spec.key) {
    j.mac.emplace(*spec.key, cfg_.auth_instance);
    j.member_auth.resize(spec.members);
  }
  j.last_active = now;
  init_copies(j);
  ++c_.jobs_admitted;
  return Reason::ok;
}

bool SwitchDataPlane::release(std::uint32_t job) {
  Job* j = find(job);
  if (!j) return false;
  for (std::uint32_t s : j->slot_of) owner_[s] = 0;
  free_reserved(*j);
  jobs_.erase(job);
  ++c_.jobs_released;
  return true;
}

bool SwitchDataPlane::expire(std::uint32_t job) {
  if (!release(job)) return false;
  ++c_.jobs_expired;
  return true;
}

std::uint16_t SwitchDataPlane::joined_members(std::uint32_t job) const {
  auto it = jobs_.find(job);
  if (it == jobs_.end()) return 0;
  return std::uint16_t(std::count_if(it->second.members.begin(), it->second.members.end(),
                                     [](const Member& m) { return m.joined && !m.left; }));
}

bool SwitchDataPlane::departed(std::uint32_t job) const {
  auto it = jobs_.find(job);
  return it != jobs_.end() && std::all_of(it->second.members.begin(), it->second.members.end(),
                                          [](const Member& m) { return m.joined && m.left; });
}

void SwitchDataPlane::reset_job(Job& j) {
  j.epoch = new_epoch();
  for (auto& m : j.members) m = Member{};
  j.parent_joined = false;
  j.parent_epoch = 0;
  j.failed = false;
  j.fail_reason = Reason::ok;
  init_copies(j);
  ++c_.job_resets;
  j.rejoining = false;
  if (j.resizing) {  // a live resize under way: nobody streams now, so it moves at once
    j.resize_at = 0;
    if (j.resize_to) {
      finish_resize(j);
    } else {  // a leaf following its parent's resize only: the parent's size comes at the join
      j.resizing = j.resize_known = false;
    }
  }
}

std::uint32_t SwitchDataPlane::job_epoch(std::uint32_t job) const {
  auto it = jobs_.find(job);
  return it == jobs_.end() ? 0 : it->second.epoch;
}

// ---- input ------------------------------------------------------------------------------------

void SwitchDataPlane::on_packet(std::span<const std::byte> bytes, Endpoint from, Nanos now) {
  now_ = now;
  ++c_.packets_in;
  c_.bytes_in += bytes.size();
  PacketView v;
  Reason r = proto::decode(bytes, v);
  if (r != Reason::ok) return drop(nullptr, r);
  if (v.h.type != PacketType::admit && v.h.type != PacketType::release) {
    Job* j = find(v.h.job);
    if (j && !authentic(*j, v, bytes, from)) return;
  }
  switch (v.h.type) {
    case PacketType::data:
      if (from == cfg_.parent) return drop(nullptr, Reason::wrong_source);
      return handle_data(v, from);
    case PacketType::join:
      if (from == cfg_.parent) return drop(nullptr, Reason::wrong_source);
      return handle_join(v, from);
    case PacketType::leave:
      return handle_leave(v, from);
    case PacketType::result:
    case PacketType::join_ack:
    case PacketType::nack:
    case PacketType::pending:
    case PacketType::leave_ack:
      return handle_from_parent(v, from);
    case PacketType::admit:
    case PacketType::release:
      return handle_control(v, bytes, from, now);
    case PacketType::admit_ack:
    case PacketType::release_ack:
      return drop(nullptr, Reason::unexpected);
  }
}

bool SwitchDataPlane::authentic(Job& j, const PacketView& v, std::span<const std::byte> bytes,
                                Endpoint from) {
  // Unsealed to a keyed job; or sealed to an unkeyed one, whose sender expects authentication
  // this switch cannot give (a key for the job at the rank but not here).
  if (v.sealed != j.spec.key.has_value()) {
    drop(&j, Reason::unauthenticated);
    return false;
  }
  if (!j.spec.key) return true;
  PeerAuth* peer = nullptr;
  if (from == cfg_.parent && j.has_parent()) {
    peer = &j.parent_auth;
  } else if (v.h.member < j.member_auth.size()) {
    peer = &j.member_auth[v.h.member];
  } else {
    drop(&j, Reason::bad_member);
    return false;
  }
  switch (proto::auth::open(*j.spec.key, peer->mac, peer->window, bytes)) {
    case proto::auth::Verdict::ok: return true;
    case proto::auth::Verdict::bad_tag: drop(&j, Reason::unauthenticated); return false;
    case proto::auth::Verdict::replayed:
    case proto::auth::Verdict::stale:
    case proto::auth::Verdict::busy: drop(&j, Reason::replayed); return false;
  }
  return false;
}

void SwitchDataPlane::handle_join(const PacketView& v, Endpoint from) {
  const Header& h = v.h;
  Job* j = find(h.job);
  if (!j) {
    drop(nullptr, Reason::unknown_job);
    return nack(nullptr, from, h, Reason::unknown_job);
  }
  ++j->c.packets_in;
  j->c.bytes_in += proto::kHeaderBytes;
  j->last_active = now_;
  if (h.member >= j->spec.members) {
    drop(j, Reason::bad_member);
    return nack(j, from, h, Reason::bad_member);
  }
  // A join to a job that failed upstream is a retry: its state is useless, start afresh.
  if (j->failed) reset_job(*j);
  // A join naming a newer session starts the job afresh (new epoch, empty slots); an older
  // session is refused so that a late join of a finished run cannot disturb the current one.
  if (!j->session_set) {
    j->session = h.aux;
    j->session_set = true;
  } else if (h.aux != j->session) {
    // (While nobody of the current session is attached, any other session takes the job.)
    if (joined_members(h.job) > 0 && proto::chunk_distance(h.aux, j->session) < 0) {
      drop(j, Reason::stale_epoch);
      return nack(j, from, h, Reason::stale_epoch);
    }
    reset_job(*j);
    j->session = h.aux;
  }
  if (j->resizing && j->resize_lazy) {  // several lanes, nobody was there: it moves now
    j->resize_at = 0;
    finish_resize(*j);
  }
  Member& m = j->members[h.member];
  const bool again = m.joined && !m.left && m.ep == from;
  const bool drained = (h.flags & proto::flag::resize) != 0;  // the member drained to a boundary
  // A leaf's lane that saw no flagged result (its parent's lane took the boundary after its
  // last result, on a daemon of several lanes) learns from the member that a resize is under
  // way: it counts its members from now on and takes boundary and size from its parent's answer.
  if (!j->resizing && j->has_parent() && again && drained && h.chunk != m.join_nonce) start_following(*j);
  // (A lane other than lane 0 may see its members drain and join again before lane 0's
  // boundary reached it: it counts them, and moves when the boundary comes, take_boundary; a
  // leaf's lane moves when its parent's lane answers, follow_parent.)
  const bool lane_follower = cfg_.lanes > 1 || (j->has_parent() && drained);
  if (j->resizing && (j->resize_known || lane_follower) && again) {
    // A live resize: this member drained its stream up to the boundary and asks for the new
    // mapping. The answer waits for every member (its join is retransmitted meanwhile). A
    // join with the nonce already answered is a late copy of that one (the member did not
    // drain anything new): answered as before, never taken as a move.
    if (!m.moved && h.chunk == m.join_nonce) return send_join_ack(*j, m);
    m.moved = true;
    m.join_nonce = h.chunk;
    if (std::all_of(j->members.begin(), j->members.end(), [](const Member& x) { return x.moved; })) {
      // A leaf moves once its parent did (every leaf drained): it joins the parent again.
      if (j->has_parent()) return rejoin_parent(*j);
      if (j->resize_known) finish_resize(*j);
    }
    return;
  }
  m.ep = from;
  m.joined = true;
  m.left = false;
  m.join_nonce = h.chunk;
  if (j->has_parent() && !j->parent_joined) {
    // Join upward first; the member retries its join until the whole path is ready.
    j->parent_join_nonce = j->epoch;  // unique per (re)start of the job here
    return join_parent(*j, h.flags & proto::flag::retransmit);
  }
  send_join_ack(*j, m);
}

void SwitchDataPlane::handle_data(const PacketView& v, Endpoint from) {
  const Header& h = v.h;
  Job* j = find(h.job);
  if (!j) {
    drop(nullptr, Reason::unknown_job);
    return nack(nullptr, from, h, Reason::unknown_job);
  }
  Job& J = *j;
  ++J.c.packets_in;
  J.c.bytes_in += proto::kHeaderBytes + v.payload.size();
  J.last_active = now_;
  if (h.flags & proto::flag::probe) {
    ++c_.probes;
    ++J.c.probes;
  } else if (h.flags & proto::flag::retransmit) {
    ++c_.retransmissions;
    ++J.c.retransmissions;
  }
  if (J.failed) {
    drop(j, Reason::job_failed);
    return nack(j, from, h, Reason::job_failed, std::uint32_t(J.fail_reason));
  }
  Reason r = proto::validate(
      h, {J.spec.job, J.epoch, J.spec.slots, J.spec.members, slot_bytes()});
  if (r != Reason::ok) {
    drop(j, r);
    // (The epoch before a live resize: a late packet of a member that moved on; no answer.)
    if (r == Reason::stale_epoch && !(J.prev_epoch && h.epoch == J.prev_epoch)) nack(j, from, h, r);
    return;
  }
  const Member& mem = J.members[h.member];
  if (!mem.joined || mem.ep != from) {
    drop(j, Reason::not_joined);
    return nack(j, from, h, Reason::not_joined);
  }
  if (h.elem != ElemType::none && !(proto::required_cap(h.elem, h.op) & cfg_.caps)) {
    drop(j, Reason::unsupported);
    return nack(j, from, h, Reason::unsupported);
  }
  const std::uint32_t S = J.spec.slots;
  const std::uint32_t idx = J.slot_of[h.slot] * 2 + ((h.chunk / S) & 1);
  Copy& cp = copies_[idx];
  std::int32_t d = proto::chunk_distance(h.chunk, cp.seq);
  if (h.flags & proto::flag::probe) return answer_probe(J, h, from, idx, d);
  if (d == std::int32_t(2 * S)) {
    // Next use of this copy. Legitimate only once the previous use completed: a member sends
    // chunk c only after it holds the result of chunk c - S, which every member sent only after
    // holding the result of chunk c - 2S; so nobody can still need the old result.
    // The sender also holds the result of chunk c - S, held by the other copy of the slot.
    const Copy& other = copies_[idx ^ 1];
    if (!(cp.st & kComplete) || !(other.st & kComplete) || other.seq != h.chunk - S)
      return drop(j, Reason::out_of_window);
    cp.seq = h.chunk;
    clear(J, cp, kContrib);  // (signalled: those told before it opened, see signal_gaps)
    clear(J, cp, kWant);
    cp.n = cp.count = 0;
    cp.elem = ElemType::none;
    cp.op = WireOp::none;
    cp.st = 0;
    cp.events = 0;
    d = 0;
  }
  if (d < 0) return drop(j, Reason::stale_chunk);  // a late copy; its sender has the result
  if (d != 0) return drop(j, Reason::out_of_window);

  if (has(J, cp, kContrib, h.member)) {
    ++c_.duplicates;
    ++J.c.duplicates;
    if (cp.st & kComplete) {
      ++c_.results_resent;
      ++J.c.results_resent;
      return send_result(J, cp, idx, from, h.flags & proto::flag::want_result, true);
    }
    if (cp.st & kAwaitParent) forward_up(J, cp, idx, true);
    if (h.flags & proto::flag::retransmit) send_pending(J, cp, h, from);
    return;
  }
  if (h.elem != ElemType::none) {
    if (cp.st & kHasData) {
      // The same collective: type, operation and count; a widened accumulator (sum_widen) also
      // takes the narrow inputs of members that did not aggregate (a child with one member).
      if ((cp.elem != h.elem && cp.elem != proto::widened(h.elem)) || cp.op != h.op ||
          cp.count != h.count || h.elem == ElemType::raw) {
        drop(j, Reason::mismatch);
        return nack(j, from, h, Reason::mismatch,
                    std::uint32_t(cp.count) | std::uint32_t(cp.elem) << 16 |
                        std::uint32_t(cp.op) << 20);
      }
      // Integer and fp8 events also raise the overflow flag (its meaning since version 3);
      // other float overflows only count (an f32 block of a fixed-point sum may overflow to
      // infinity).
      if (const std::uint32_t ev = combine(cp.elem, h.elem, h.op, writable_cells(idx), v.payload.data(), h.count)) {
        if (raises_overflow_flag(cp.elem)) cp.st |= kOverflow;
        cp.events = proto::add_events(cp.events, ev);
      }
    } else if ((h.op == WireOp::sum_widen || proto::is_mx(h.elem)) && J.spec.members > 1 &&
               proto::widened(h.elem) != ElemType::none) {
      // The first hop that adds two or more inputs: f32 (i32 for i8/u8, 2 x i16 per byte of
      // i4) accumulators from here to the root. MX blocks are always added in f32 accumulators
      // (32 per block); under `sum` each aggregating hop re-quantises (complete_local).
      if (std::size_t(h.count) * proto::elem_size(proto::widened(h.elem)) > slot_bytes()) {
        drop(j, Reason::too_large);
        return nack(j, from, h, Reason::too_large);
      }
      widen_into(h.elem, reinterpret_cast<float*>(writable_cells(idx)), v.payload.data(), h.count);
      cp.elem = proto::widened(h.elem);
      cp.op = h.op;
      cp.count = h.count;
      cp.st |= kHasData;
    } else {
      std::memcpy(writable_cells(idx), v.payload.data(), v.payload.size());
      cp.elem = h.elem;
      cp.op = h.op;
      cp.count = h.count;
      cp.st |= kHasData;
    }
  }
  if (h.flags & proto::flag::overflow) cp.st |= kOverflow;  // a child's partial sum wrapped
  cp.events = proto::add_events(cp.events, proto::aux_events(h.aux));  // a child's events
  add(J, cp, kContrib, h.member);
  if (h.flags & proto::flag::want_result) add(J, cp, kWant, h.member);
  if (++cp.n == J.spec.members) complete_local(J, cp, idx);
  signal_gaps(J, h, from, h.member, proto::kHeaderBytes + v.payload.size());
}

// A probe asks what a retransmission of the member's data would learn, without the data: the
// answer is the same (the stored result, or `pending`), except where the data would have been
// added: there the switch answers `missing` and the member sends its data. So the other
// members of a chunk that one member lost ask with a header instead of resending a chunk the
// switch already holds. A probe is never a contribution and changes no slot state (nor the
// once-per-chunk gap signal); the answer goes to the member's joined address and is at most
// the result the member asked for with its own contribution (docs/PROTOCOL.md, "Probes").
void SwitchDataPlane::answer_probe(Job& J, const Header& h, Endpoint from, std::uint32_t idx,
                                   std::int32_t d) {
  const std::uint32_t S = J.spec.slots;
  const Copy& cp = copies_[idx];
  if (d == std::int32_t(2 * S)) {
    // The copy's next use, not begun: the member's data for it has not arrived. Only where
    // that data would be accepted (the previous use complete, the other copy holding c - S);
    // anything else is out of the window, as the data would be.
    const Copy& other = copies_[idx ^ 1];
    if (!(cp.st & kComplete) || !(other.st & kComplete) || other.seq != h.chunk - S)
      return drop(&J, Reason::out_of_window);
  } else if (d < 0) {
    return drop(&J, Reason::stale_chunk);
  } else if (d != 0) {
    return drop(&J, Reason::out_of_window);
  }
  if (d != 0 || !has(J, cp, kContrib, h.member)) {  // with the chunks before it that lack it as well
    return nack(&J, from, h, Reason::missing,
                proto::kMissingAnswersProbe | missing_before(J, h.chunk, h.member));
  }
  if (cp.st & kComplete) {
    ++c_.results_resent;
    ++J.c.results_resent;
    return send_result(J, cp, idx, from,
                       (h.flags & proto::flag::want_result) && has(J, cp, kWant, h.member), true);
  }
  // Complete here and waiting for the parent: our partial may be what the parent misses, so
  // it goes up again (a leaf has no timers; its members' questions drive it), as for a
  // retransmitted duplicate.
  if (cp.st & kAwaitParent) forward_up(J, cp, idx, true);
  send_pending(J, cp, h, from);
}

bool SwitchDataPlane::lacks(const Job& J, std::uint32_t q, std::uint16_t m) const {
  const std::uint32_t S = J.spec.slots;
  const Copy& qc = copies_[J.slot_of[q % S] * 2 + ((q / S) & 1)];
  if (qc.seq == q) return !(qc.st & (kComplete | kAwaitParent)) && !has(J, qc, kContrib, m);
  return qc.seq == q - 2 * S && (qc.st & kComplete);  // not begun: nobody's packet arrived
}

std::uint32_t SwitchDataPlane::missing_before(const Job& J, std::uint32_t q,
                                              std::uint16_t m) const {
  std::uint32_t mask = 0;
  const std::uint32_t span = std::min<std::uint32_t>(proto::kMissingSpan, J.spec.slots - 1);
  for (std::uint32_t i = 1; i <= span; ++i)
    if (lacks(J, q - i, m)) mask |= std::uint32_t(1) << i;
  return mask;
}

// A member sends its chunks in stream order, so when its chunk c arrives while chunks before
// c still lack its contribution, those packets were lost (or overtaken in the network): tell
// the member at once, once per chunk. Without this, the member finds the gap only when a later
// chunk completes, and so does every other member, for whom the same gap is someone else's
// loss. A chunk skipped may not even have begun here (its copy still holds the completed use
// 2S earlier: nobody's packet for it arrived, as when every member's queue dropped the tail of
// the same burst); the member misses it all the same. Only the chunks skipped since the
// member's previous newest are looked at (at most S - 1: chunk c - S has completed, the member
// holds its result), so in-order streams cost one comparison per packet. One nack names the
// newest chunk missing and, in its detail, up to kMissingSpan before it; a packet draws at
// most as many nacks as it has headers' worth of bytes (never more bytes than it brought).
void SwitchDataPlane::signal_gaps(Job& J, const Header& h, Endpoint from, std::uint16_t who,
                                  std::size_t bytes) {
  const std::uint32_t S = J.spec.slots;
  Member& m = J.members[h.member];
  const std::int32_t skipped = proto::chunk_distance(h.chunk, m.next_chunk);
  if (skipped < 0) return;  // a repair, or overtaken by a later one: nothing new
  m.next_chunk = h.chunk + 1;
  std::size_t budget = std::max<std::size_t>(1, bytes / proto::kHeaderBytes);
  const std::uint32_t back_max = std::min<std::uint32_t>(std::uint32_t(skipped), S - 1);
  std::uint32_t head = 0, mask = 0;
  bool open = false;  // a nack being filled: `head` and the chunks in `mask`
  auto emit = [&] {
    Header req = h;
    req.chunk = head;
    req.slot = std::uint16_t(head % S);
    nack(&J, from, req, Reason::missing, mask);
    open = false;
  };
  for (std::uint32_t back = 1; back <= back_max; ++back) {  // newest first
    const std::uint32_t q = h.chunk - back;
    Copy& qc = copies_[J.slot_of[q % S] * 2 + ((q / S) & 1)];
    if (has(J, qc, kSignalled, who) || !lacks(J, q, who)) continue;
    if (open && head - q > proto::kMissingSpan) emit();
    if (!open) {
      if (budget == 0) break;
      --budget;
      head = q;
      mask = 0;
      open = true;
    } else {
      mask |= std::uint32_t(1) << (head - q);
    }
    add(J, qc, kSignalled, who);
    ++c_.gaps_signalled;  // (chunks, not nacks)
    ++J.c.gaps_signalled;
  }
  if (open) emit();
}

}  // namespace inc::sw
