// The Engine's receiver-ready large messages. A point-to-point message of more than
// eager_bytes_ (64 KiB by default, Open MPI's TCP eager limit) leaves only once its receiver
// has posted the receive: the receive op, when it becomes ready, sends the peer a ready notice
// (transport::MsgKind::ready, a header naming comm, seq and msg_index), and the send op waits
// for it. Smaller messages leave at once, as before.
//
// Why: TCP pushes a message as soon as it is written. In a schedule whose steps change peers
// (Rabenseifner, recursive doubling), a rank that finished step k early then sends step k+1's
// message to a partner still receiving step k from somebody else: the two flows share that
// partner's link, the late step (on the critical path) gets half of it, and the partner falls
// further behind, step after step. Measured on the testbed (docs/TESTBED.md, "TCP in the
// hosts"): Rabenseifner took 1.3-1.7x the ring's time where every link carries the same
// bytes. With the notice a link carries one step's message at a time, as `inc sim` (dataflow
// matching: a message moves once both ends are posted) has always assumed.
#include <fmt/format.h>

#include <limits>

#include "coll/executor.hpp"

namespace inc::coll {

using transport::WireHeader;

void Engine::set_eager_bytes(std::uint64_t bytes) {
  std::lock_guard lk(mu_);
  eager_bytes_ = bytes;
}

void Engine::set_max_early_notices(std::size_t n) {
  std::lock_guard lk(mu_);
  max_early_notices_ = n;
}

std::size_t Engine::early_notices() {
  std::lock_guard lk(mu_);
  return ready_in_.size();
}

bool Engine::send_may_leave(CollOp& op, std::uint32_t i) {
  const Op& o = op.sched.ops[i];
  const int w = (*op.members)[o.peer];
  // A dead peer: post_send reports it.
  if (!waits_for_receiver(wire_bytes(op, o.src.bytes)) || dead_[w]) return true;
  const ReadyKey key{op.comm_id, op.info_.seq, w, op.msg_index[i]};
  if (ready_in_.erase(key)) return true;
  awaiting_ready_[key] = {op.uid, i};
  return false;
}

void Engine::tell_ready(CollOp& op, std::uint32_t i) {
  const Op& o = op.sched.ops[i];
  if (!waits_for_receiver(wire_bytes(op, o.dst.bytes))) return;
  WireHeader h;
  h.comm_id = op.comm_id;
  h.seq = op.info_.seq;
  h.msg_index = op.msg_index[i];
  trace_op(TraceEvent::notice_told, op, i);
  mesh_->send_ready((*op.members)[o.peer], h);
}

void Engine::on_ready(int wpeer, const WireHeader& h) {
  auto cit = comms_.find(h.comm_id);
  if (cit != comms_.end()) {
    if (cit->second.comm_rank_of[wpeer] < 0)
      throw Error(Error::Kind::mismatch,
                  fmt::format("world rank {} sent a ready notice for a communicator it is not part of", wpeer));
    // A collective that finished here, or failed: nothing waits for the notice any more.
    if (h.seq < cit->second.next_seq && !active_.count({h.comm_id, h.seq})) return;
  }
  const ReadyKey key{h.comm_id, h.seq, wpeer, h.msg_index};
  auto it = awaiting_ready_.find(key);
  trace_msg(TraceEvent::notice_arrived, wpeer, h, it != awaiting_ready_.end() ? it->second.second : ~0u);
  if (it != awaiting_ready_.end()) {
    work_.emplace_back(it->second);  // ready() runs the send again, and now finds the notice
    awaiting_ready_.erase(it);
  } else if (ready_in_.size() >= max_early_notices_) {
    throw Error(Error::Kind::mismatch,
                fmt::format("world rank {} sent more than {} ready notices that no send op here "
                            "expects (mismatched schedules?)",
                            wpeer, max_early_notices_));
  }
  ready_in_.insert(key);
}

void Engine::forget_notices(std::uint32_t comm_id, std::uint64_t seq) {
  ready_in_.erase(ready_in_.lower_bound({comm_id, seq, std::numeric_limits<int>::min(), 0}),
                  ready_in_.lower_bound({comm_id, seq + 1, std::numeric_limits<int>::min(), 0}));
}

void Engine::forget_ready(const CollOp& op) {
  forget_notices(op.comm_id, op.info_.seq);
  for (auto it = awaiting_ready_.begin(); it != awaiting_ready_.end();)
    it = it->second.first == op.uid ? awaiting_ready_.erase(it) : std::next(it);
}

bool Engine::awaits_ready(const CollOp& op, std::uint32_t i) const {
  const Op& o = op.sched.ops[i];
  auto it = awaiting_ready_.find({op.comm_id, op.info_.seq, (*op.members)[o.peer], op.msg_index[i]});
  return it != awaiting_ready_.end() && it->second.first == op.uid && it->second.second == i;
}

}  // namespace inc::coll
