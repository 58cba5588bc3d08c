// The Engine's in-network part: a schedule's inc_reduce / inc_broadcast / inc_gather ops
// become ops of the communicator's switch worker (src/switch/worker.hpp), driven from the
// engine's own progress loop. The worker's UDP socket is watched by the TCP mesh's epoll, its
// timers shorten the loop's waits, and its completions complete schedule ops like any received
// message, so host and in-network collectives of one job progress together in any wait().
//
// Every rank must hand its worker the same op stream (the k-th op of all members forms one
// switch operation). Ops are therefore submitted in (collective sequence, op index) order per
// communicator: an inc op goes to the worker only once every earlier inc op of the
// communicator did. A failure of the switch path stops the whole job with an error naming the
// switch: the ranks could not otherwise agree on who holds a result.
#include "coll/executor_inc.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "coll/numerics_hops.hpp"
#include "numerics/events.hpp"
#include "numerics/mx_type.hpp"
#include "numerics/reduce.hpp"
#include "numerics/repro.hpp"

namespace inc::coll {

void Engine::attach_switch(std::uint32_t comm_id, const SwitchAttachment& a) {
  std::lock_guard lk(mu_);
  if (!comms_.count(comm_id))
    throw Error(Error::Kind::invalid_argument, "attach_switch: unknown communicator");
  if (links_.count(comm_id))
    throw Error(Error::Kind::invalid_argument,
                "attach_switch: the communicator already has a switch tree");
  std::unique_ptr<SwitchLink> l;
  try {
    l = std::make_unique<SwitchLink>(comm_id, a);
  } catch (const std::exception& e) {
    throw Error(Error::Kind::network,
                fmt::format("{}: cannot open this rank's UDP socket: {}", a.where, e.what()));
  }
  SwitchLink* lp = l.get();
  mesh_->watch_fd(lp->port.fd(), [this, lp] { on_link_readable(*lp); });
  links_[comm_id] = std::move(l);
}

void Engine::close_link(SwitchLink& l) {
  const sw::Nanos now = sw::monotonic_now();
  l.worker.leave(now);  // best effort: one datagram, not through the fault injector
  l.port.send_all(l.worker.outbox(), nullptr, now);
  mesh_->unwatch_fd(l.port.fd());
  if (l.port.group_fd() >= 0) mesh_->unwatch_fd(l.port.group_fd());
  // Testing only (INC_FAULT_*): what the injector did, so that a lossy test can show that its
  // faults happened (tests/api/mp_inc_lossy.sh).
  if (l.inj)
    std::fprintf(stderr,
                 "inc: member %u of job %u: faults injected into the datagrams sent to the switch: "
                 "lost %llu, duplicated %llu, reordered %llu\n",
                 unsigned(l.cfg.worker.member), unsigned(l.cfg.worker.job),
                 static_cast<unsigned long long>(l.inj->lost), static_cast<unsigned long long>(l.inj->duplicated),
                 static_cast<unsigned long long>(l.inj->reordered));
}

void Engine::detach_switch(std::uint32_t comm_id) {
  std::lock_guard lk(mu_);
  auto it = links_.find(comm_id);
  if (it == links_.end()) return;
  if (!it->second->pending.empty() || !it->second->order.empty())
    link_failed(*it->second, Error::Kind::network, "the communicator left its switch tree");
  close_link(*it->second);
  links_.erase(it);
}

bool Engine::has_switch(std::uint32_t comm_id) {
  std::lock_guard lk(mu_);
  return links_.count(comm_id) != 0;
}

// What the switch ALU can do (the caller's plan normally routes the rest to the hosts).
void Engine::check_inc_call(const CollOp& op) const {
  const auto& p = op.params;
  if (!op.link)
    throw Error(
        Error::Kind::invalid_argument,
        fmt::format("{}: algorithm 'inc' needs a Core-INC switch, and this communicator has "
                    "none configured",
                    describe(op)));
  bool reduces = false;
  for (std::uint32_t i : op.inc_ops) {
    const Op& o = op.sched.ops[i];
    reduces |= o.kind == OpKind::inc_reduce && (o.src.bytes || o.dst.bytes);
  }
  if (!reduces) return;
  const bool minmax = p.op == ReduceOp::min || p.op == ReduceOp::max;
  const bool sum = p.op == ReduceOp::sum || p.op == ReduceOp::avg;
  bool ok = false;
  const bool fixed = p.accumulate == Accumulate::fixed;
  if (p.dtype == DataType::f32) ok = sum || (minmax && !fixed);
  if (p.dtype == DataType::i32) ok = sum || minmax;
  if (p.dtype == DataType::u32) ok = sum;  // i32 wrap-around adds are u32 adds; min/max are not
  if (p.dtype == DataType::f16 || p.dtype == DataType::bf16) ok = sum || minmax;
  if (p.dtype == DataType::i8 || p.dtype == DataType::u8) ok = sum || minmax;
  if (p.dtype == DataType::e4m3 || p.dtype == DataType::e5m2 || p.dtype == DataType::i4) ok = sum || minmax;
  if (mx_in_switch(p.dtype)) ok = sum;  // MX blocks: sums (and avg's sum) only
  if (!ok)
    throw Error(Error::Kind::invalid_argument,
                fmt::format("{}: the switch cannot aggregate {} {} (i32, f32, f16, bf16, i8, u8, "
                            "e4m3, e5m2 and i4 sum/min/max, u32 sum, mxfp8_e4m3, mxfp8_e5m2, "
                            "mxint8, mxfp4, mxfp6_e2m3 and mxfp6_e3m2 sum{})",
                            describe(op), name(p.dtype), name(p.op),
                            fixed ? "; fixed-point f32 sums only" : ""));
}

namespace {
// How an f16/bf16/fp8 reduction travels (docs/NUMERICS.md "In the switch"): min/max exact in
// the narrow type; sums by the accumulator policy (wide: as f32, see widen_on_host).
sw::NumKind float_kind(DataType t, sw::ReduceKind op, Accumulate acc) {
  using K = sw::NumKind;
  const int i = t == DataType::f16 ? 0 : t == DataType::bf16 ? 1 : t == DataType::e4m3 ? 2 : 3;
  constexpr K narrow[] = {K::f16, K::bf16, K::e4m3, K::e5m2};
  constexpr K widen[] = {K::f16_widen, K::bf16_widen, K::e4m3_widen, K::e5m2_widen};
  if (op == sw::ReduceKind::sum && acc == Accumulate::wide) return K::f32;
  return op == sw::ReduceKind::sum && acc != Accumulate::narrow ? widen[i] : narrow[i];
}
// How an MX sum travels (docs/NUMERICS.md "MX blocks in the switch"): narrow re-quantises at
// every aggregating hop, widen once at the root, wide sends f32 (decoded on the hosts, see
// widen_on_host) and each host re-quantises the f32 result once.
sw::NumKind mx_kind(DataType t, Accumulate acc) {
  using K = sw::NumKind;
  const int i = t == DataType::mxfp8_e4m3 ? 0 : t == DataType::mxfp8_e5m2 ? 1 : t == DataType::mxint8 ? 2
                : t == DataType::mxfp6_e2m3 ? 4 : t == DataType::mxfp6_e3m2 ? 5 : 3;
  constexpr K narrow[] = {K::mxe4m3, K::mxe5m2, K::mxint8, K::mxfp4, K::mxe2m3, K::mxe3m2};
  constexpr K widen[] = {K::mxe4m3_widen, K::mxe5m2_widen, K::mxint8_widen, K::mxfp4_widen, K::mxe2m3_widen,
                         K::mxe3m2_widen};
  if (acc == Accumulate::wide) return K::f32;
  return acc == Accumulate::narrow ? narrow[i] : widen[i];
}
}  // namespace

// Accumulate::wide: this rank's f16/bf16/fp8 input widened to f32 (exact) for the switch, and its
// f32 result staged, to be rounded once into dst when the op completes (service_links).
void Engine::widen_on_host(CollOp& op, std::uint32_t i, sw::Segment& seg) {
  const DataType t = op.params.dtype;
  const std::size_t units = std::max(seg.in.size(), seg.out.size()) / size_of(t);
  const std::size_t n = units * elements_per_unit(t);  // MX: 32 f32 values per block
  if (!seg.in.empty() && is_mx(t)) {
    auto& in = op.staging.emplace_back(n * 4);
    numerics::mx_decode_blocks(t, seg.in.data(), units, reinterpret_cast<float*>(in.data()));
    seg.in = {in.data(), in.size()};
  } else if (!seg.in.empty()) {
    auto& in = op.staging.emplace_back(n * 4);
    for (std::size_t k = 0; k < n; ++k) {
      const float x = static_cast<float>(numerics::load_as_double(t, seg.in.data(), k));
      std::memcpy(in.data() + 4 * k, &x, 4);
    }
    seg.in = {in.data(), in.size()};
  }
  if (!seg.out.empty()) {
    op.widened_out[i] = op.staging.size();
    auto& out = op.staging.emplace_back(n * 4);
    seg.out = {out.data(), out.size()};
  }
}

sw::WorkerOp Engine::make_worker_op(CollOp& op, std::uint32_t i) {
  const Op& o = op.sched.ops[i];
  const CollectiveParams& p = op.params;
  const std::uint64_t bytes = std::max(o.src.bytes, o.dst.bytes);
  sw::WorkerOp w;
  if (bytes == 0) {
    w = sw::WorkerOp::barrier();
  } else if (o.kind == OpKind::inc_gather) {
    // This rank's block in zeros, summed as wrap-around i32 words: every other rank adds 0 to
    // these bytes and this rank 0 to theirs, so each byte arrives exactly (no carries).
    const std::uint64_t words = (o.dst.bytes + 3) / 4;
    auto& padded = op.staging.emplace_back(words * 4);
    if (o.src.bytes)
      std::memcpy(padded.data() + static_cast<std::uint64_t>(p.rank) * o.src.bytes,
                  region_ptr(op, o.src), o.src.bytes);
    // Spans now: the heap blocks stay put when `staging` grows, its elements do not.
    const std::span<const std::byte> in{padded.data(), padded.size()};
    std::span<std::byte> out{region_ptr(op, o.dst), o.dst.bytes};
    if (o.dst.bytes % 4) {
      op.staged_out[i] = op.staging.size();
      out = op.staging.emplace_back(words * 4);
    }
    w = sw::WorkerOp::allreduce(sw::NumKind::i32, sw::ReduceKind::sum, in, out, words,
                                static_cast<std::uint32_t>(p.nranks));
  } else {
    sw::Segment seg;
    if (o.src.bytes) seg.in = {region_ptr(op, o.src), o.src.bytes};
    if (o.dst.bytes) seg.out = {region_ptr(op, o.dst), o.dst.bytes};
    if (o.kind == OpKind::inc_broadcast) {
      w.kind = sw::NumKind::raw;
      w.contributors = 1;
      seg.elems = bytes;
    } else {
      w.op = p.op == ReduceOp::min   ? sw::ReduceKind::min
             : p.op == ReduceOp::max ? sw::ReduceKind::max
                                     : sw::ReduceKind::sum;
      w.kind = p.dtype == DataType::f32
                   ? (p.accumulate == Accumulate::fixed ? sw::NumKind::fx32 : sw::NumKind::f32)
                   : sw::NumKind::i32;
      if (w.kind == sw::NumKind::fx32) op.info_.accumulate = Accumulate::fixed;
      if (p.dtype == DataType::f16 || p.dtype == DataType::bf16 || p.dtype == DataType::e4m3 ||
          p.dtype == DataType::e5m2) {
        w.kind = float_kind(p.dtype, w.op, p.accumulate);
        if (w.op == sw::ReduceKind::sum)  // (fixed concerns f32: 16- and 8-bit sums run as widen)
          op.info_.accumulate = p.accumulate == Accumulate::fixed ? Accumulate::widen : p.accumulate;
        if (w.kind == sw::NumKind::f32) widen_on_host(op, i, seg);  // Accumulate::wide
      }
      if (mx_in_switch(p.dtype)) {  // sums only (check_inc_call)
        w.kind = mx_kind(p.dtype, p.accumulate);
        op.info_.accumulate = p.accumulate == Accumulate::narrow || p.accumulate == Accumulate::wide
                                  ? p.accumulate
                                  : Accumulate::widen;
        if (w.kind == sw::NumKind::f32) widen_on_host(op, i, seg);  // Accumulate::wide
      }
      if (p.dtype == DataType::i8 || p.dtype == DataType::u8) {
        // Integers wrap whatever the policy; widening only makes the overflow flag exact.
        // `wide` (hosts sending i32) is not offered: it would give the same bits as widen.
        const bool widen = w.op == sw::ReduceKind::sum && p.accumulate != Accumulate::narrow;
        const bool i8 = p.dtype == DataType::i8;
        w.kind = widen ? (i8 ? sw::NumKind::i8_widen : sw::NumKind::u8_widen)
                       : (i8 ? sw::NumKind::i8 : sw::NumKind::u8);
        if (w.op == sw::ReduceKind::sum) op.info_.accumulate = widen ? Accumulate::widen : Accumulate::narrow;
      }
      if (p.dtype == DataType::i4) {
        // As i8: sums wrap modulo 16 whatever the policy; `wide` would give widen's bits.
        const bool widen = w.op == sw::ReduceKind::sum && p.accumulate != Accumulate::narrow;
        w.kind = widen ? sw::NumKind::i4_widen : sw::NumKind::i4;
        if (w.op == sw::ReduceKind::sum) op.info_.accumulate = widen ? Accumulate::widen : Accumulate::narrow;
      }
      if (o.arith != Arith::call) {  // a phase of a reproducible sum: exact i32 (repro.hpp)
        const auto a = arithmetic(o, p.dtype, p.op);
        w.kind = sw::NumKind::i32;
        w.op = a.op == ReduceOp::max ? sw::ReduceKind::max : sw::ReduceKind::sum;
        op.info_.accumulate = Accumulate::reproducible;
        if (o.arith == Arith::i32_sum)
          op.info_.link_bytes_per_element = static_cast<std::uint32_t>(4 * numerics::repro::kLimbs);
      } else {
        op.info_.link_bytes_per_element =
            static_cast<std::uint32_t>(sw::WorkerOp::elem_bytes(w.kind));
      }
      w.contributors = static_cast<std::uint32_t>(p.nranks);
      seg.elems = std::max(seg.in.size(), seg.out.size()) / sw::WorkerOp::elem_bytes(w.kind);
    }
    w.segments.push_back(seg);
  }
  w.label = describe(op);
  return w;
}

void Engine::submit_ready_inc(SwitchLink& l) {
  const sw::Nanos now = sw::monotonic_now();
  bool submitted = false;
  while (!l.order.empty() && !l.worker.failed()) {
    auto it = by_uid_.find(l.order.front());
    if (it == by_uid_.end() || it->second->done()) {
      l.order.pop_front();
      continue;
    }
    CollOp& op = *it->second;
    while (op.inc_submitted < op.inc_ops.size()) {
      const std::uint32_t i = op.inc_ops[op.inc_submitted];
      if (op.op_state[i] != 1) break;  // not ready: later inc ops wait for it, on every rank
      l.pending[l.worker.submit(make_worker_op(op, i), now)] = {op.uid, i};
      ++op.inc_submitted;
      submitted = true;
    }
    if (op.inc_submitted < op.inc_ops.size()) break;
    l.order.pop_front();
  }
  if (submitted) l.port.send_all(l.worker.outbox(), l.injector(), now);
}

void Engine::on_link_readable(SwitchLink& l) {
  // A bounded number of batches, so that the TCP peers get their turn.
  for (int round = 0; round < 64; ++round) {
    const std::size_t n = l.port.recv_batch();
    if (n == 0) break;
    const sw::Nanos now = sw::monotonic_now();
    for (std::size_t i = 0; i < n; ++i) l.worker.on_packet(l.port.datagram(i), l.port.from(i), now);
    // The job's multicast group, once the join tells it: joined before this member's data goes.
    if (sw::follow_multicast(l.worker, l.port))
      mesh_->watch_fd(l.port.group_fd(), [this, lp = &l] { on_link_readable(*lp); });
    l.port.send_all(l.worker.outbox(), l.injector(), now);
  }
}

int Engine::link_wait_ms(int timeout_ms) const {
  if (links_.empty() || timeout_ms <= 0) return timeout_ms;
  sw::Nanos next = std::numeric_limits<sw::Nanos>::max();
  for (const auto& [id, l] : links_) {
    next = std::min(next, l->worker.next_deadline());
    if (l->inj) next = std::min(next, l->inj->next_due());
  }
  if (next == std::numeric_limits<sw::Nanos>::max()) return timeout_ms;
  const sw::Nanos now = sw::monotonic_now();
  if (next <= now) return 0;
  const sw::Nanos ms = (next - now + sw::kMillisecond - 1) / sw::kMillisecond;
  return static_cast<int>(std::min<sw::Nanos>(timeout_ms, ms));
}

void Engine::service_links() {
  for (auto& [id, lp] : links_) {
    SwitchLink& l = *lp;
    sw::Nanos now = sw::monotonic_now();
    if (l.inj) l.port.send_due(*l.inj, now);
    if (now >= l.worker.next_deadline()) l.worker.on_tick(now);
    l.port.send_all(l.worker.outbox(), l.injector(), now);
    // Completions first: an op that finished before a failure has its result in place.
    sw::WorkerCompletion c;
    while (l.worker.poll_completion(c)) {
      auto pit = l.pending.find(c.id);
      if (pit == l.pending.end()) continue;
      const auto [uid, i] = pit->second;
      l.pending.erase(pit);
      auto it = by_uid_.find(uid);
      if (it == by_uid_.end() || it->second->done()) continue;
      CollOp& op = *it->second;
      op.info_.bytes_sent += c.report.bytes_sent;
      op.info_.bytes_received += c.report.bytes_received;
      op.info_.retransmissions += c.report.retransmissions;
      op.info_.bytes_resent += c.report.bytes_resent;
      // The switch's flag is about i32 (and i8/u8: the type's range) wrap-around; u32 sums
      // wrap by definition.
      if (c.report.overflow && (op.params.dtype == DataType::i32 || op.params.dtype == DataType::i8 ||
                                op.params.dtype == DataType::u8 || op.params.dtype == DataType::i4 ||
                                op.params.dtype == DataType::e4m3 || op.params.dtype == DataType::e5m2))
        op.info_.overflow = true;
      // The switch counts in its cells' type: i32 events are signed overflows, not u32 carries.
      if (!(l.worker.join_info().caps & proto::cap::events) || op.params.dtype == DataType::u32)
        op.info_.events_counted = false;
      op.info_.overflow_events += c.report.events;
      if (op.info_.hops.empty() &&
          (op.params.coll == Collective::allreduce || op.params.coll == Collective::reduce_scatter)) {
        std::vector<std::uint32_t> members = l.cfg.path_members;
        const bool known = !members.empty();
        if (members.empty()) members.push_back(l.worker.join_info().members);
        else members[0] = l.worker.join_info().members;  // what the join said
        op.info_.hops = switch_hops(op.params.dtype, op.params.op, op.info_.accumulate, members, known);
      }
      ++op.inc_completed;
      if (auto s = op.staged_out.find(i); s != op.staged_out.end()) {
        const Op& o = op.sched.ops[i];
        std::memcpy(region_ptr(op, o.dst), op.staging[s->second].data(), o.dst.bytes);
      }
      if (auto s = op.widened_out.find(i); s != op.widened_out.end()) {  // one rounding, f32 -> 16/8 bits
        const Op& o = op.sched.ops[i];
        const auto& wide = op.staging[s->second];
        std::byte* dst = region_ptr(op, o.dst);
        const std::uint64_t esz = size_of(op.params.dtype);
        if (is_mx(op.params.dtype)) {  // each host re-quantises the f32 sum once
          const float* x = reinterpret_cast<const float*>(wide.data());
          const std::uint64_t blocks = o.dst.bytes / esz;
          numerics::mx_encode_blocks(op.params.dtype, x, blocks, dst);  // saturates: no new events
        }
        for (std::uint64_t k = 0; !is_mx(op.params.dtype) && k < o.dst.bytes / esz; ++k) {
          float x;
          std::memcpy(&x, wide.data() + 4 * k, 4);
          numerics::store_from_double(op.params.dtype, dst, k, x);
          // the hosts' rounding is this path's last hop: a finite total rounded to infinity
          op.info_.overflow_events +=
              std::isfinite(x) && numerics::count_nonfinite(op.params.dtype, dst + esz * k, 1) != 0;
        }
      }
      complete(op, i);  // may finish (and free) the collective
    }
    if (l.worker.failed()) {
      const auto& e = l.worker.error();
      link_failed(l, e.kind == sw::WorkerErrorKind::mismatch ? Error::Kind::mismatch : Error::Kind::network,
                  fmt::format("the in-network path via {} failed ({}): {}{}; the job cannot "
                                 "tell which ranks got a result, so it stops here rather than "
                                 "risk a wrong one",
                                 l.cfg.where, sw::name(e.kind), e.message,
                                 closed_members(l.comm_id)));
    }
  }
}

// The worker let go of every op: fail the collectives that had ops at the switch or waiting
// for it. Outside the start-up probe this stops the job on every rank.
void Engine::link_failed(SwitchLink& l, Error::Kind kind, const std::string& why) {
  std::vector<std::shared_ptr<CollOp>> ops;
  auto add = [&](std::uint64_t uid) {
    auto it = by_uid_.find(uid);
    if (it == by_uid_.end() || it->second->done()) return;
    if (std::find(ops.begin(), ops.end(), it->second) == ops.end()) ops.push_back(it->second);
  };
  for (const auto& [id, v] : l.pending) add(v.first);
  for (std::uint64_t uid : l.order) add(uid);
  l.pending.clear();
  l.order.clear();
  l.worker.reset();
  if (ops.empty()) return;
  const bool tentative =
      std::all_of(ops.begin(), ops.end(), [](const auto& o) { return o->tentative; });
  if (!tentative) {
    fail_all(Error(kind, why));
    return;
  }
  for (auto& op : ops) fail(*op, Error(kind, fmt::format("{}: {}", describe(*op), why)), false);
}

void Engine::abandon_inc(CollOp& op) {
  if (!op.link) return;
  SwitchLink& l = *op.link;
  l.order.erase(std::remove(l.order.begin(), l.order.end(), op.uid), l.order.end());
  if (op.inc_submitted > op.inc_completed)  // the worker still reads and writes its buffers
    link_failed(l, Error::Kind::network, fmt::format("{} failed while its data was at the switch", describe(op)));
}

std::string Engine::describe_inc(const CollOp& op) const {
  if (op.inc_ops.empty() || !op.link) return "";
  const SwitchLink& l = *op.link;
  std::string s =
      fmt::format("; {} of {} switch operations done", op.inc_completed, op.inc_ops.size());
  if (op.inc_submitted < op.inc_ops.size()) {
    s += fmt::format(", {} not handed to the switch yet", op.inc_ops.size() - op.inc_submitted);
    if (!l.order.empty() && l.order.front() != op.uid)
      s += " (an earlier collective's are not either)";
  }
  s += fmt::format("; {}: {}", l.cfg.where, l.worker.describe_stall(sw::monotonic_now()));
  return s + closed_members(op.comm_id);
}

// Members of a communicator whose TCP connection closed: for the switch path, a hint at why
// the switch misses them (a member that finished and exited is no error in itself: the
// switch may hold everything it contributed, so only the deadline decides).
std::string Engine::closed_members(std::uint32_t comm_id) const {
  auto cit = comms_.find(comm_id);
  if (cit == comms_.end()) return "";
  std::string dead;
  for (std::size_t r = 0; r < cit->second.members.size(); ++r) {
    const int w = cit->second.members[r];
    if (w != world_rank() && dead_[w]) dead += fmt::format("{}{}", dead.empty() ? "" : ", ", r);
  }
  return dead.empty() ? "" : fmt::format(" (the connection to rank {} closed)", dead);
}

void note_repro_stats(RunInfo& info, const CollectiveParams& p, const std::byte* exps, std::uint64_t bytes) {
  const auto st = numerics::repro::block_stats(reinterpret_cast<const std::int32_t*>(exps), bytes / 8, p.nranks);
  info.accumulate = Accumulate::reproducible;
  info.inexact_blocks = st.inexact;
  info.nonfinite_blocks = st.nonfinite;
}

}  // namespace inc::coll
