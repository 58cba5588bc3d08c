#include "src/switch/simnet.hpp"

#include <limits>

namespace inc::sw {

void SimNetwork::send(Endpoint from, Endpoint to, std::span<const std::byte> bytes, Nanos now) {
  ++sent;
  FaultTally t;
  datagram_fates(f_, [this] { return uniform(); }, now, t, [&](Nanos at) {
    q_.push(Delivery{at, seq_++, from, to, std::vector<std::byte>(bytes.begin(), bytes.end())});
  });
  lost += t.lost;
  duplicated += t.duplicated;
  reordered += t.reordered;
}

SimNetwork::Delivery SimNetwork::pop() {
  Delivery d = std::move(const_cast<Delivery&>(q_.top()));
  q_.pop();
  ++delivered;
  return d;
}

Endpoint SimCluster::add_switch(const SwitchConfig& cfg) {
  Endpoint ep = next_endpoint();
  nodes_.push_back({true, switches_.size()});
  switches_.push_back(std::make_unique<SwitchDataPlane>(cfg));
  switch_ep_.push_back(ep);
  return ep;
}

Endpoint SimCluster::add_worker(const WorkerConfig& cfg) {
  Endpoint ep = next_endpoint();
  nodes_.push_back({false, workers_.size()});
  workers_.push_back(std::make_unique<WorkerProtocol>(cfg));
  worker_ep_.push_back(ep);
  dead_.push_back(false);
  return ep;
}

void SimCluster::restart_switch(std::size_t i, const SwitchConfig& cfg) {
  switches_[i] = std::make_unique<SwitchDataPlane>(cfg);
}

void SimCluster::inject(Endpoint from, Endpoint to, std::span<const std::byte> bytes) {
  net_.send(from, to, bytes, now_);
}

void SimCluster::flush_switch(std::size_t i) {
  Outbox& o = switches_[i]->outbox();
  for (const auto& e : o.entries()) net_.send(switch_ep_[i], e.to, o.bytes(e), now_);
  o.clear();
}

void SimCluster::flush_worker(std::size_t i) {
  Outbox& o = workers_[i]->outbox();
  if (!dead_[i])
    for (const auto& e : o.entries()) net_.send(worker_ep_[i], e.to, o.bytes(e), now_);
  o.clear();
}

bool SimCluster::run_until(const std::function<bool()>& stop, Nanos limit) {
  constexpr Nanos kNever = std::numeric_limits<Nanos>::max();
  constexpr Nanos kSwitchTick = 10 * kMillisecond;
  if (next_switch_tick_ == 0) next_switch_tick_ = now_ + kSwitchTick;
  while (!stop()) {
    Nanos t_net = net_.empty() ? kNever : net_.next_time();
    Nanos t_worker = kNever;
    std::size_t wi = 0;
    for (std::size_t i = 0; i < workers_.size(); ++i) {
      if (dead_[i]) continue;
      Nanos d = workers_[i]->next_deadline();
      if (d < t_worker) {
        t_worker = d;
        wi = i;
      }
    }
    if (t_net == kNever && t_worker == kNever) {
      now_ = std::max(now_, limit);
      return false;
    }
    Nanos t = std::min({t_net, t_worker, next_switch_tick_});
    if (t > limit) {
      now_ = std::max(now_, limit);
      return false;
    }
    now_ = std::max(now_, t);
    if (t == next_switch_tick_ && t < t_net && t < t_worker) {
      for (std::size_t i = 0; i < switches_.size(); ++i) {
        switches_[i]->on_tick(now_);
        flush_switch(i);
      }
      next_switch_tick_ += kSwitchTick;
      continue;
    }
    if (t_net <= t_worker) {
      auto d = net_.pop();
      if (d.to.id == 0 || d.to.id > nodes_.size()) continue;  // nobody there
      const Node& n = nodes_[d.to.id - 1];
      if (n.is_switch) {
        switches_[n.index]->on_packet(d.bytes, d.from, now_);
        flush_switch(n.index);
      } else if (!dead_[n.index]) {
        workers_[n.index]->on_packet(d.bytes, d.from, now_);
        flush_worker(n.index);
      }
    } else {
      workers_[wi]->on_tick(now_);
      flush_worker(wi);
    }
  }
  return true;
}

bool SimCluster::run(Nanos limit) {
  return run_until(
      [&] {
        for (std::size_t i = 0; i < workers_.size(); ++i)
          if (!dead_[i] && workers_[i]->busy()) return false;
        return true;
      },
      limit);
}

}  // namespace inc::sw
