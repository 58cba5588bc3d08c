// The runtime executor of one rank (coll::Engine): starting a collective (its schedule, the
// messages that arrived before it), running its ops as their dependencies complete, and placing
// each arriving message (the transport's header and end callbacks: copied or reduced into place,
// parked, or held for a collective not started yet). Progress, waits, deadlines and failures:
// executor_progress.cpp; in-network ops: executor_inc.cpp; ready notices: executor_ready.cpp;
// refusals: executor_refuse.cpp; the trace: executor_trace.cpp.
#include "coll/executor.hpp"

#include <fmt/format.h>

#include <cstring>

#include "coll/executor_inc.hpp"
#include "coll/numerics_hops.hpp"
#include "numerics/events.hpp"
#include "numerics/reduce.hpp"

namespace inc::coll {

using transport::RecvTarget;
using transport::WireHeader;
using clock = std::chrono::steady_clock;

namespace {
bool same_call(const CollectiveParams& a, const CollectiveParams& b) {
  if (a.coll != b.coll || a.count != b.count || a.dtype != b.dtype || a.nranks != b.nranks ||
      a.algo != b.algo || a.segment_bytes != b.segment_bytes)
    return false;
  if ((a.coll == Collective::allreduce || a.coll == Collective::reduce_scatter) && a.op != b.op)
    return false;
  if (a.coll == Collective::broadcast && a.root != b.root) return false;
  // Different schedules: reproducible, or a wide accumulator on the hosts against a narrow one.
  if (host_accumulate(a) != host_accumulate(b)) return false;
  return true;
}
}  // namespace

// ---------------------------------------------------------------------------------------------

Engine::Engine(std::unique_ptr<transport::TcpMesh> mesh, std::chrono::milliseconds timeout)
    : mesh_(std::move(mesh)), timeout_(timeout) {
  mesh_->set_sink(this);
  incoming_.resize(static_cast<std::size_t>(mesh_->size()));
  dead_.assign(static_cast<std::size_t>(mesh_->size()), 0);
  dead_why_.resize(static_cast<std::size_t>(mesh_->size()));
}

Engine::~Engine() {
  for (auto& [id, l] : links_) close_link(*l);
  links_.clear();
  mesh_->set_sink(nullptr);
}

void Engine::add_comm(std::uint32_t comm_id, std::vector<int> members) {
  std::lock_guard lk(mu_);
  Comm c;
  c.comm_rank_of.assign(static_cast<std::size_t>(mesh_->size()), -1);
  for (std::size_t i = 0; i < members.size(); ++i) c.comm_rank_of[members[i]] = static_cast<int>(i);
  c.members = std::move(members);
  // Never replace a live communicator: its collectives would go to the wrong members.
  if (!comms_.emplace(comm_id, std::move(c)).second)
    throw Error(Error::Kind::internal, fmt::format("communicator id {} is already in use", comm_id));
}

void Engine::set_recv_hook(std::shared_ptr<RecvHook> hook) {
  std::lock_guard lk(mu_);
  hook_ = std::move(hook);
}

std::uint64_t Engine::wire_bytes(const CollOp& op, std::uint64_t bytes) const {
  return hook_ ? hook_->wire_bytes(op.params, bytes) : bytes;
}

RecvMessage Engine::recv_message(CollOp& op, std::uint32_t i) {
  const Op& o = op.sched.ops[i];
  RecvMessage m;
  m.params = &op.params;
  m.kind = o.kind;
  m.peer = o.peer;
  m.dst = region_ptr(op, o.dst);
  m.operand = o.kind == OpKind::recv_reduce ? region_ptr(op, o.src) : nullptr;
  m.bytes = o.dst.bytes;
  m.wire_bytes = wire_bytes(op, o.dst.bytes);
  m.arith = o.arith;
  m.events = &op.info_.overflow_events;
  return m;
}

void Engine::remove_comm(std::uint32_t comm_id) {
  detach_switch(comm_id);
  std::lock_guard lk(mu_);
  comms_.erase(comm_id);
}

transport::TransportStats Engine::stats() {
  std::lock_guard lk(mu_);
  return mesh_->stats();
}

std::string Engine::describe(const CollOp& op) const {
  return fmt::format("{} #{}", name(op.params.coll), op.info_.seq);
}

std::byte* Engine::region_ptr(CollOp& op, const Region& r) {
  switch (r.buf) {
    case BufferId::input:
      return const_cast<std::byte*>(op.input) + r.offset;
    case BufferId::output:
      return op.output + r.offset;
    case BufferId::scratch:
      return op.scratch.data() + r.offset;
  }
  return nullptr;
}

std::shared_ptr<CollOp> Engine::start(std::uint32_t comm_id, const CollectiveParams& params,
                                      const void* input, void* output, std::string selection,
                                      const StartOptions& opts) {
  std::lock_guard lk(mu_);
  if (auto refused = take_refusal(comm_id, params.coll)) throw *refused;  // a peer refused its call of it
  if (fatal_) throw Error(fatal_->kind(), fmt::format("{} (the communicator is unusable after this error)", fatal_->what()));
  auto cit = comms_.find(comm_id);
  if (cit == comms_.end()) throw Error(Error::Kind::invalid_argument, "unknown communicator");
  Comm& comm = cit->second;

  auto op = std::make_shared<CollOp>();
  op->uid = next_uid_++;
  op->comm_id = comm_id;
  op->members = &comm.members;
  op->params = params;
  op->info_.coll = params.coll;
  op->info_.seq = comm.next_seq++;
  op->info_.algo = params.algo;
  op->info_.selection = std::move(selection);
  if ((params.coll == Collective::allreduce || params.coll == Collective::reduce_scatter) &&
      numerics::counts_events(params.op) && input != nullptr) {
    const std::uint64_t elems =
        params.coll == Collective::reduce_scatter ? params.count * static_cast<std::uint64_t>(params.nranks) : params.count;
    op->info_.nonfinite_inputs = numerics::count_nonfinite(params.dtype, input, elems);
  }
  op->input = static_cast<const std::byte*>(input);
  op->output = static_cast<std::byte*>(output);
  op->start = clock::now();
  op->deadline = op->start + (opts.timeout.count() > 0 ? opts.timeout : timeout_);
  op->tentative = opts.tentative;
  op->sched = build_schedule(params);
  op->info_.algo = op->sched.algo;
  op->params.algo = op->sched.algo;
  op->scratch.resize(op->sched.scratch_bytes);

  const auto n = static_cast<std::uint32_t>(op->sched.ops.size());
  const int p = params.nranks;
  op->remaining.resize(n);
  op->op_state.assign(n, 0);
  op->msg_index.assign(n, 0);
  op->recv_arrived.assign(n, 0);
  op->recv_by_peer.resize(static_cast<std::size_t>(p));
  std::vector<std::uint32_t> sends_to(static_cast<std::size_t>(p), 0);
  std::vector<std::uint32_t> count(n + 1, 0);
  for (std::uint32_t i = 0; i < n; ++i) {
    const Op& o = op->sched.ops[i];
    op->remaining[i] = op->sched.dep_begin[i + 1] - op->sched.dep_begin[i];
    for (auto d = op->sched.dep_begin[i]; d < op->sched.dep_begin[i + 1]; ++d) ++count[op->sched.deps[d] + 1];
    if (o.kind == OpKind::send) {
      op->msg_index[i] = sends_to[o.peer]++;
      op->info_.bytes_sent += wire_bytes(*op, o.src.bytes);
      ++op->info_.messages_sent;
    } else if (is_recv(o.kind)) {
      op->msg_index[i] = static_cast<std::uint32_t>(op->recv_by_peer[o.peer].size());
      op->recv_by_peer[o.peer].push_back(i);
      op->info_.bytes_received += wire_bytes(*op, o.dst.bytes);
    } else if (is_inc(o.kind)) {
      op->inc_ops.push_back(i);
    }
  }
  op->info_.switch_operations = op->inc_ops.size();
  if (!op->inc_ops.empty()) {
    auto lit = links_.find(comm_id);
    op->link = lit == links_.end() ? nullptr : lit->second.get();
    check_inc_call(*op);  // throws before anything is registered
    op->info_.in_network = true;
  } else if (params.coll == Collective::allreduce || params.coll == Collective::reduce_scatter) {
    op->info_.accumulate = host_accumulate(params);
    op->info_.hops = host_hops(params.dtype, params.op, op->info_.accumulate, params.coll);
  }
  for (std::uint32_t i = 0; i < n; ++i) count[i + 1] += count[i];
  op->dependents_begin = count;
  op->dependents.resize(op->sched.deps.size());
  for (std::uint32_t i = 0; i < n; ++i)
    for (auto d = op->sched.dep_begin[i]; d < op->sched.dep_begin[i + 1]; ++d)
      op->dependents[count[op->sched.deps[d]]++] = i;

  by_uid_[op->uid] = op;
  active_[{comm_id, op->info_.seq}] = op.get();
  trace_coll(TraceEvent::coll_start, *op);
  if (op->link) op->link->order.push_back(op->uid);

  // Messages that arrived before this collective started.
  if (auto eit = early_.find({comm_id, op->info_.seq}); eit != early_.end()) {
    for (EarlyMsg& m : eit->second) {
      const int wpeer = m.peer;
      m.peer = comm.comm_rank_of[wpeer];
      if (m.peer < 0) {
        Error e(Error::Kind::mismatch,
                fmt::format("{}: world rank {} sent a message for a communicator it is not part of",
                            describe(*op), wpeer));
        early_.erase(eit);
        fail(*op, e, true);
        throw e;
      }
      CollectiveParams theirs = decode_descriptor(m.h.desc);
      if (!same_call(theirs, op->params)) {
        Error e(Error::Kind::mismatch,
                fmt::format("{}: rank {} called {}, rank {} called {}", describe(*op), m.peer,
                            describe_params(theirs), params.rank, describe_params(op->params)));
        early_.erase(eit);
        fail(*op, e, true);
        throw e;
      }
      auto& list = op->recv_by_peer[m.peer];
      if (m.h.msg_index >= list.size() || wire_bytes(*op, op->sched.ops[list[m.h.msg_index]].dst.bytes) != m.h.bytes) {
        Error e(Error::Kind::mismatch,
                fmt::format("{}: rank {} sent message {} of {} B that rank {} does not expect "
                            "(mismatched calls or schedules?)",
                            describe(*op), m.peer, m.h.msg_index, m.h.bytes, params.rank));
        early_.erase(eit);
        fail(*op, e, true);
        throw e;
      }
      std::uint32_t idx = list[m.h.msg_index];
      op->parked[idx] = std::move(m.payload);  // the heap block (and any pointer into it) stays
      if (m.complete) {
        op->recv_arrived[idx] = 1;
      } else {
        Incoming& in = incoming_[static_cast<std::size_t>(wpeer)];
        in.mode = Incoming::Mode::parked;
        in.uid = op->uid;
        in.op = idx;
        in.early = nullptr;
      }
    }
    early_.erase(eit);
  }

  // Peers that already failed and that this collective needs.
  for (int r = 0; r < p; ++r) {
    int w = comm.members[r];
    if (w != world_rank() && dead_[w]) {
      Error e(Error::Kind::peer_failure, fmt::format("{}: {}", describe(*op), dead_why_[w]));
      fail(*op, e, true);  // tell the others: this rank may exit before they see the cause
      throw e;
    }
  }

  if (n == 0) {
    finish(*op);
    return op;
  }
  for (std::uint32_t i = 0; i < n; ++i)
    if (op->remaining[i] == 0) work_.emplace_back(op->uid, i);
  drain();
  return op;
}

void Engine::drain() {
  while (!work_.empty() || !deferred_.empty()) {
    while (!deferred_.empty()) {
      auto [uid, i] = deferred_.back();
      deferred_.pop_back();
      auto it = by_uid_.find(uid);
      if (it != by_uid_.end() && !it->second->done()) complete(*it->second, i);
    }
    while (!work_.empty()) {
      auto [uid, i] = work_.back();
      work_.pop_back();
      auto it = by_uid_.find(uid);
      if (it != by_uid_.end() && !it->second->done()) ready(*it->second, i);
    }
  }
}

void Engine::post_send(CollOp& op, std::uint32_t i) {
  const Op& o = op.sched.ops[i];
  int w = (*op.members)[o.peer];
  if (dead_[w]) {
    fail(op, Error(Error::Kind::peer_failure, fmt::format("{}: {}", describe(op), dead_why_[w])), true);
    return;
  }
  WireHeader h;
  h.comm_id = op.comm_id;
  h.seq = op.info_.seq;
  h.msg_index = op.msg_index[i];
  h.bytes = o.src.bytes;
  encode_descriptor(op.params, h.desc);
  const std::byte* data = region_ptr(op, o.src);
  if (hook_ && hook_->converts(op.params)) {  // a conversion handler: this payload goes on the wire in its format
    h.bytes = hook_->wire_bytes(op.params, o.src.bytes);
    auto& wire = op.encoded[i];
    wire.resize(h.bytes);
    hook_->encode(op.params, data, o.src.bytes, wire.data());
    data = wire.data();
  }
  trace_op(TraceEvent::send_posted, op, i);
  mesh_->send(w, h, data, (op.uid << 32) | i);
}

void Engine::ready(CollOp& op, std::uint32_t i) {
  const Op& o = op.sched.ops[i];
  trace_op(TraceEvent::op_ready, op, i);  // the first time only (a send again after its notice)
  op.op_state[i] = 1;
  switch (o.kind) {
    case OpKind::send:
      if (send_may_leave(op, i)) post_send(op, i);
      return;
    case OpKind::recv:
    case OpKind::recv_reduce: {
      auto pit = op.parked.find(i);
      if (pit != op.parked.end()) {
        if (op.recv_arrived[i] && hook_ && !hook_->deposits(recv_message(op, i))) {  // the handlers process the parked payload at once
          try {
            auto proc = hook_->open(recv_message(op, i));
            if (proc->consume(0, pit->second.data(), pit->second.size()) != pit->second.size())
              throw Error(Error::Kind::internal, "a handler left part of a whole message unconsumed");
            proc->finish();
          } catch (const Error& e) {
            fail(op, Error(e.kind(), fmt::format("{}: {}", describe(op), e.what())), true);
            return;
          }
          op.parked.erase(pit);
          complete(op, i);
        } else if (op.recv_arrived[i]) {
          std::byte* dst = region_ptr(op, o.dst);
          if (o.kind == OpKind::recv) {
            if (o.dst.bytes) std::memcpy(dst, pit->second.data(), o.dst.bytes);
          } else {
            const auto a = arithmetic(o, op.params.dtype, op.params.op);
            op.info_.overflow_events += numerics::reduce_counted(
                a.dtype, a.op, dst, region_ptr(op, o.src), pit->second.data(), o.dst.bytes / size_of(a.dtype));
          }
          op.parked.erase(pit);
          complete(op, i);
        }
        return;  // still streaming into the parked buffer; on_message completes it
      }
      int w = (*op.members)[o.peer];
      if (dead_[w]) {
        fail(op, Error(Error::Kind::peer_failure, fmt::format("{}: {}", describe(op), dead_why_[w])), true);
        return;
      }
      tell_ready(op, i);  // a large message waits for this notice
      return;  // on_header will target this op directly
    }
    case OpKind::copy:
      if (o.dst.bytes) std::memmove(region_ptr(op, o.dst), region_ptr(op, o.src), o.dst.bytes);
      complete(op, i);
      return;
    case OpKind::reduce: {
      std::byte* dst = region_ptr(op, o.dst);
      const auto a = arithmetic(o, op.params.dtype, op.params.op);
      op.info_.overflow_events +=
          numerics::reduce_counted(a.dtype, a.op, dst, dst, region_ptr(op, o.src), o.dst.bytes / size_of(a.dtype));
      complete(op, i);
      return;
    }
    case OpKind::repro_scan:
    case OpKind::repro_encode:
    case OpKind::repro_decode:
    case OpKind::widen:
    case OpKind::narrow:
      op.info_.overflow_events += run_local_op(o, op.params, region_ptr(op, o.src), region_ptr(op, o.dst),
                                               o.aux.bytes ? region_ptr(op, o.aux) : nullptr);
      if (o.kind == OpKind::repro_decode) note_repro_stats(op.info_, op.params, region_ptr(op, o.aux), o.aux.bytes);
      complete(op, i);
      return;
    case OpKind::inc_reduce:
    case OpKind::inc_broadcast:
    case OpKind::inc_gather:
      submit_ready_inc(*op.link);  // in order: it may have to wait for earlier inc ops
      return;
  }
}

void Engine::complete(CollOp& op, std::uint32_t i) {
  if (op.op_state[i] == 2) return;
  op.op_state[i] = 2;
  ++op.ops_done;
  for (auto d = op.dependents_begin[i]; d < op.dependents_begin[i + 1]; ++d) {
    std::uint32_t j = op.dependents[d];
    if (--op.remaining[j] == 0) work_.emplace_back(op.uid, j);
  }
  if (op.ops_done == op.sched.ops.size()) finish(op);
}

void Engine::finish(CollOp& op) {
  const auto& p = op.params;
  if (p.op == ReduceOp::avg && p.nranks > 1 &&
      (p.coll == Collective::allreduce || p.coll == Collective::reduce_scatter)) {
    Region r = result_region(p);
    numerics::divide(p.dtype, region_ptr(op, r), r.bytes / size_of(p.dtype),
                     static_cast<std::uint64_t>(p.nranks));
  }
  op.state_ = CollOp::State::succeeded;
  trace_coll(TraceEvent::coll_end, op);
  op.info_.seconds = std::chrono::duration<double>(clock::now() - op.start).count();
  forget_ready(op);
  active_.erase({op.comm_id, op.info_.seq});
  by_uid_.erase(op.uid);  // may destroy op if the caller dropped it: touch nothing after
}

void Engine::check_descriptor(const CollOp& op, int peer, const WireHeader& h) {
  CollectiveParams theirs = decode_descriptor(h.desc);
  if (!same_call(theirs, op.params))
    throw Error(Error::Kind::mismatch,
                fmt::format("{}: rank {} called {}, rank {} called {}", describe(op), peer,
                            describe_params(theirs), op.params.rank, describe_params(op.params)));
}

RecvTarget Engine::on_header(int wpeer, const WireHeader& h) {
  trace_msg(TraceEvent::msg_header, wpeer, h);
  Incoming& in = incoming_[static_cast<std::size_t>(wpeer)];
  in = Incoming{};
  in.mode = Incoming::Mode::discard;
  auto key = std::make_pair(h.comm_id, h.seq);
  auto cit = comms_.find(h.comm_id);
  auto ait = active_.find(key);
  if (cit != comms_.end() && cit->second.comm_rank_of[wpeer] < 0)
    throw Error(Error::Kind::mismatch,
                fmt::format("world rank {} sent a message for a communicator it is not part of", wpeer));
  if (ait == active_.end() && refused_here_.count(key)) return RecvTarget{};  // refused here: dropped
  if (ait == active_.end()) {
    // Not started here yet; for a new sub-communicator this rank may not even have finished
    // split() yet. Park it; start() checks it against this rank's own call.
    if (cit != comms_.end() && h.seq < cit->second.next_seq)
      throw Error(Error::Kind::mismatch,
                  fmt::format("world rank {} sent a message for {} #{}, which already completed "
                              "here (mismatched schedules?)",
                              wpeer, name(decode_descriptor(h.desc).coll), h.seq));
    auto& list = early_[key];
    list.push_back(EarlyMsg{wpeer, h, std::vector<std::byte>(h.bytes), false});
    in.mode = Incoming::Mode::early;
    in.early = &list.back();
    RecvTarget t;
    t.mode = RecvTarget::Mode::copy;
    t.dst = list.back().payload.data();
    return t;
  }
  int peer = cit->second.comm_rank_of[wpeer];
  CollOp& op = *ait->second;
  try {
    check_descriptor(op, peer, h);
    auto& list = op.recv_by_peer[peer];
    if (h.msg_index >= list.size())
      throw Error(Error::Kind::mismatch,
                  fmt::format("{}: rank {} sent message {} but rank {} expects only {} from it",
                              describe(op), peer, h.msg_index, op.params.rank, list.size()));
    std::uint32_t idx = list[h.msg_index];
    const Op& o = op.sched.ops[idx];
    if (wire_bytes(op, o.dst.bytes) != h.bytes)
      throw Error(Error::Kind::mismatch,
                  fmt::format("{}: rank {} sent {} B, rank {} expected {} B", describe(op), peer,
                              h.bytes, op.params.rank, wire_bytes(op, o.dst.bytes)));
    in.uid = op.uid;
    in.op = idx;
    RecvTarget t;
    if (op.op_state[idx] == 1) {
      in.mode = Incoming::Mode::direct;
      t.dst = region_ptr(op, o.dst);
      if (hook_ && !hook_->deposits(recv_message(op, idx))) {  // the handlers process it as it arrives
        in.proc = hook_->open(recv_message(op, idx));
        t.mode = RecvTarget::Mode::consumer;
        t.consumer = in.proc.get();
      } else if (o.kind == OpKind::recv) {
        t.mode = RecvTarget::Mode::copy;
      } else {
        t.mode = RecvTarget::Mode::reduce;
        t.operand = region_ptr(op, o.src);
        const auto a = arithmetic(o, op.params.dtype, op.params.op);
        t.dtype = a.dtype;
        t.op = a.op;
        t.events = &op.info_.overflow_events;
      }
    } else {
      in.mode = Incoming::Mode::parked;
      auto& buf = op.parked[idx];
      buf.resize(h.bytes);
      t.mode = RecvTarget::Mode::copy;
      t.dst = buf.data();
    }
    return t;
  } catch (Error& e) {
    in.mode = Incoming::Mode::discard;
    fail(op, e, true);
    throw;
  }
}

void Engine::on_message(int wpeer, const WireHeader& h) {
  Incoming in = std::move(incoming_[static_cast<std::size_t>(wpeer)]);
  trace_msg(TraceEvent::msg_end, wpeer, h, in.mode == Incoming::Mode::direct || in.mode == Incoming::Mode::parked ? in.op : ~0u);
  incoming_[static_cast<std::size_t>(wpeer)] = Incoming{};
  switch (in.mode) {
    case Incoming::Mode::direct:
      if (in.proc) {  // the completion handler
        auto it = by_uid_.find(in.uid);
        if (it == by_uid_.end() || it->second->done()) return;
        try {
          in.proc->finish();
        } catch (const Error& e) {
          fail(*it->second, Error(e.kind(), fmt::format("{}: {}", describe(*it->second), e.what())), true);
          return;
        }
      }
      deferred_.emplace_back(in.uid, in.op);
      return;
    case Incoming::Mode::parked: {
      auto it = by_uid_.find(in.uid);
      if (it == by_uid_.end()) return;
      CollOp& op = *it->second;
      op.recv_arrived[in.op] = 1;
      if (op.op_state[in.op] == 1) work_.emplace_back(in.uid, in.op);  // ready() applies it
      return;
    }
    case Incoming::Mode::early:
      in.early->complete = true;
      return;
    default:
      return;
  }
}

void Engine::on_send_done(std::uint64_t token) {
  if (trace_) [[unlikely]] record_send_done(token);
  deferred_.emplace_back(token >> 32, static_cast<std::uint32_t>(token & 0xffffffffu));
}

}  // namespace inc::coll
