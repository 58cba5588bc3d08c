// The Engine's event trace (coll/trace.hpp): what each event records. Called only while
// tracing is on (the inline trace_* in executor.hpp test that first), under the engine's lock.
#include <algorithm>

#include "coll/executor.hpp"

namespace inc::coll {

namespace {
constexpr std::uint8_t kUnknown = 0xff;
bool point_to_point(OpKind k) { return k == OpKind::send || is_recv(k); }
TraceRecord of_call(TraceEvent e, std::uint32_t comm, std::uint64_t seq, const CollectiveParams& p) {
  TraceRecord r{};
  r.t_ns = Trace::now_ns();
  r.event = e;
  r.comm = comm;
  r.seq = seq;
  r.coll = static_cast<std::uint8_t>(p.coll);
  r.algo = static_cast<std::uint8_t>(p.algo);
  return r;
}
}  // namespace

void Engine::enable_trace(std::size_t cap) {
  std::lock_guard lk(mu_);
  trace_ = std::make_unique<Trace>(cap);
}

bool Engine::write_trace(const std::string& dir, const std::string& stem) {
  std::lock_guard lk(mu_);
  if (!trace_) return false;
  trace_->write(dir, stem, world_rank());
  return true;
}

void Engine::record_coll(TraceEvent e, const CollOp& op) {
  TraceRecord r = of_call(e, op.comm_id, op.info_.seq, op.params);
  r.kind = kUnknown;
  r.peer = -1;
  r.op = static_cast<std::uint32_t>(op.sched.ops.size());
  r.bytes = op.params.count * size_of(op.params.dtype);
  trace_->add(r);
}

void Engine::record_op(TraceEvent e, const CollOp& op, std::uint32_t i) {
  // ready() runs again for a send whose notice came and a receive whose parked payload did.
  if (e == TraceEvent::op_ready && op.op_state[i] != 0) return;
  const Op& o = op.sched.ops[i];
  TraceRecord r = of_call(e, op.comm_id, op.info_.seq, op.params);
  r.kind = static_cast<std::uint8_t>(o.kind);
  r.op = i;
  if (point_to_point(o.kind)) {
    r.peer = (*op.members)[o.peer];
    r.msg_index = op.msg_index[i];
    r.bytes = wire_bytes(op, o.kind == OpKind::send ? o.src.bytes : o.dst.bytes);
  } else {
    r.peer = -1;
    r.bytes = std::max(o.src.bytes, o.dst.bytes);
  }
  trace_->add(r);
}

void Engine::record_send_done(std::uint64_t token) {
  if (auto it = by_uid_.find(token >> 32); it != by_uid_.end())
    record_op(TraceEvent::send_done, *it->second, static_cast<std::uint32_t>(token & 0xffffffffu));
}

void Engine::record_msg(TraceEvent e, int wpeer, const transport::WireHeader& h, std::uint32_t i) {
  TraceRecord r{};
  r.t_ns = Trace::now_ns();
  r.event = e;
  r.comm = h.comm_id;
  r.seq = h.seq;
  r.msg_index = h.msg_index;
  r.peer = wpeer;
  r.bytes = h.bytes;
  r.op = i;
  r.coll = r.algo = r.kind = kUnknown;  // the collective's start names them
  if (auto it = active_.find({h.comm_id, h.seq}); it != active_.end()) {
    r.coll = static_cast<std::uint8_t>(it->second->params.coll);
    r.algo = static_cast<std::uint8_t>(it->second->params.algo);
  }
  trace_->add(r);
}

}  // namespace inc::coll
