// The Engine's progress, waits and failures: the one event loop (progress_once) that wait(),
// test() and progress() drive, a collective's deadline and what it was still waiting for when
// it passed (describe_blocked), and the ways a collective fails: its own error (told to the
// peers), a dead peer it still needs, another rank's abort, an error of the whole engine.
// (executor.cpp starts collectives, runs their ops and places the messages that arrive.)
#include <fmt/format.h>

#include <sched.h>

#include <algorithm>

#include "coll/executor.hpp"

namespace inc::coll {

using clock = std::chrono::steady_clock;

void Engine::fail(CollOp& op, Error e, bool tell_peers) {
  if (op.done()) return;
  op.state_ = CollOp::State::failed;
  trace_coll(TraceEvent::coll_failed, op);
  op.error_ = e;
  op.info_.seconds = std::chrono::duration<double>(clock::now() - op.start).count();
  auto keep = by_uid_[op.uid];
  forget_ready(op);
  active_.erase({op.comm_id, op.info_.seq});
  by_uid_.erase(op.uid);
  // A tentative collective (the switch probe) fails alone; anything else leaves the ranks
  // unable to agree on what completed, so the engine becomes unusable.
  if (op.tentative) tell_peers = false;
  else if (!fatal_) fatal_ = e;
  abandon_inc(op);
  // Nothing may touch this collective's buffers once the caller sees the error.
  for (std::size_t w = 0; w < incoming_.size(); ++w) {
    Incoming& in = incoming_[w];
    if ((in.mode == Incoming::Mode::direct || in.mode == Incoming::Mode::parked) && in.uid == op.uid) {
      mesh_->discard_incoming(static_cast<int>(w));
      in.mode = Incoming::Mode::discard;
    }
  }
  if (tell_peers) mesh_->broadcast_abort(fmt::format("rank {}: {}", world_rank(), e.what()));
  if (!op.tentative) mesh_->drop_sends();
}

void Engine::fail_all(const Error& e) {
  bool first = !fatal_;
  if (!fatal_) fatal_ = e;
  std::vector<std::shared_ptr<CollOp>> ops;
  for (auto& [uid, op] : by_uid_) ops.push_back(op);
  for (auto& op : ops) {
    if (op->done()) continue;
    Error mine(e.kind(), fmt::format("{}: {}", describe(*op), e.what()));
    fail(*op, mine, false);
  }
  // Relay the reason: this rank may exit before the original message reaches everybody,
  // and its closed connection must not be mistaken for the cause.
  if (first) mesh_->broadcast_abort(fmt::format("rank {}: {}", world_rank(), e.what()));
}

void Engine::on_peer_failed(int wpeer, const std::string& why) {
  dead_[wpeer] = 1;
  dead_why_[wpeer] = why;
  newly_dead_.push_back(wpeer);
}

// Fail only the collectives that still need a dead peer: a peer that finished and exited
// normally is not an error for a collective that has everything it needs from it. Runs after
// drain(), so that messages delivered just before the connection closed count as received.
void Engine::check_dead_peers() {
  while (!newly_dead_.empty()) {
    int wpeer = newly_dead_.back();
    newly_dead_.pop_back();
    std::vector<std::shared_ptr<CollOp>> ops;
    for (auto& [uid, op] : by_uid_) ops.push_back(op);
    for (auto& op : ops) {
      if (op->done()) continue;
      const auto& comm = comms_[op->comm_id];
      int peer = comm.comm_rank_of[wpeer];
      if (peer < 0) continue;
      bool needs = false;
      for (std::size_t i = 0; i < op->sched.ops.size() && !needs; ++i) {
        const Op& o = op->sched.ops[i];
        if (op->op_state[i] == 2 || o.peer != peer) continue;
        if (o.kind == OpKind::send || (is_recv(o.kind) && !op->recv_arrived[i])) needs = true;
      }
      if (needs)
        fail(*op, Error(Error::Kind::peer_failure, fmt::format("{}: {}", describe(*op), dead_why_[wpeer])),
             true);
    }
  }
}

void Engine::on_abort(int wpeer, const std::string& reason) {
  fail_all(Error(Error::Kind::peer_failure,
                 fmt::format("rank {} aborted the job: {}", wpeer, reason)));
}

void Engine::on_error(int, const Error& e) {
  // on_header already failed the collective concerned; errors outside any collective
  // (foreign communicator, stale sequence) make the whole engine unusable.
  if (!fatal_) fail_all(e);
}

void Engine::progress_once(int timeout_ms) {
  mesh_->poll(link_wait_ms(timeout_ms));  // also wakes for the switch sockets and timers
  service_links();
  drain();
  check_dead_peers();
}

std::string Engine::describe_blocked(const CollOp& op) const {
  std::vector<int> recv_from, send_to, ready_from;
  std::size_t first = op.sched.ops.size();
  for (std::size_t i = 0; i < op.sched.ops.size(); ++i) {
    if (op.op_state[i] == 2) continue;
    if (first == op.sched.ops.size()) first = i;
    if (op.op_state[i] != 1) continue;
    const Op& o = op.sched.ops[i];
    if (is_recv(o.kind) && !op.recv_arrived[i]) recv_from.push_back(o.peer);
    if (o.kind == OpKind::send) (awaits_ready(op, i) ? ready_from : send_to).push_back(o.peer);
  }
  auto list = [](std::vector<int> v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    std::string s;
    for (int r : v) s += (s.empty() ? "" : ", ") + std::to_string(r);
    return s;
  };
  std::string s = fmt::format("{} of {} ops done", op.ops_done, op.sched.ops.size());
  if (!recv_from.empty()) s += fmt::format("; waiting for data from rank {}", list(recv_from));
  if (!send_to.empty()) s += fmt::format("; waiting to send to rank {}", list(send_to));
  if (!ready_from.empty())
    s += fmt::format("; waiting for rank {} to post the receive of a large message", list(ready_from));
  return s + describe_inc(op);
}

void Engine::wait(CollOp& op) {
  std::unique_lock lk(mu_);
  const auto spin_start = clock::now();
  while (!op.done()) {
    auto now = clock::now();
    if (now >= op.deadline) {
      Error e(Error::Kind::timeout,
              fmt::format("{} ({}): timed out after {:.1f} s: {}", describe(op),
                          describe_params(op.params),
                          std::chrono::duration<double>(now - op.start).count(), describe_blocked(op)));
      fail(op, e, true);
      break;
    }
    // Poll without sleeping for a short while first (yielding the core each time), as MPI
    // does: a small message usually arrives within microseconds, and a wake-up from
    // epoll_wait costs more than that. Then block until data or the deadline.
    if (now - spin_start < spin_) {
      progress_once(0);
      if (!op.done()) sched_yield();
      continue;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(op.deadline - now).count();
    progress_once(static_cast<int>(std::clamp<long long>(left, 1, 100)));
  }
  if (op.failed()) throw *op.error_;
}

void Engine::progress(int timeout_ms) {
  std::unique_lock lk(mu_);
  progress_once(timeout_ms);
}

void Engine::watch_fd(int fd, std::function<void()> on_readable) {
  std::lock_guard lk(mu_);
  mesh_->watch_fd(fd, std::move(on_readable));
}

void Engine::unwatch_fd(int fd) {
  std::lock_guard lk(mu_);
  mesh_->unwatch_fd(fd);
}

bool Engine::test(CollOp& op) {
  std::unique_lock lk(mu_);
  if (!op.done()) {
    progress_once(0);
    if (!op.done() && clock::now() >= op.deadline) {
      lk.unlock();
      wait(op);  // reports the time-out
      return true;
    }
  }
  if (op.failed()) throw *op.error_;
  return op.done();
}

}  // namespace inc::coll
