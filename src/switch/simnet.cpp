#include "src/switch/simnet.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace inc::sw {

void SimNetwork::subscribe(Endpoint group, Endpoint member) {
  if (!subscribed(group, member)) groups_.emplace_back(group, member);
}

bool SimNetwork::subscribed(Endpoint group, Endpoint member) const {
  return std::find(groups_.begin(), groups_.end(), std::pair{group, member}) != groups_.end();
}

void SimNetwork::send(Endpoint from, Endpoint to, std::span<const std::byte> bytes, Nanos now) {
  ++sent;
  if (tap) tap(from, to, bytes);
  if (to.is_ipv4() && proto::is_multicast_group(to.ipv4_addr())) {
    ++multicast_sent;
    for (const auto& [g, m] : groups_)
      if (g == to) fan_out(from, m, bytes, now);
    return;
  }
  fan_out(from, to, bytes, now);
}

void SimNetwork::fan_out(Endpoint from, Endpoint to, std::span<const std::byte> bytes, Nanos now) {
  Delivery base;
  base.from = from;
  base.to = to;
  // The sender's link, then the receiver's; an attachment for this very peer wins over a
  // general one.
  LinkId up = kNoLink, down = kNoLink;
  bool up_specific = false, down_specific = false;
  for (const auto& a : attach_) {
    if (a.e == from && a.up != kNoLink && (!a.only_peer.valid() || a.only_peer == to) &&
        !up_specific) {
      up = a.up;
      up_specific = a.only_peer.valid();
    }
    if (a.e == to && a.down != kNoLink && (!a.only_peer.valid() || a.only_peer == from) &&
        !down_specific) {
      down = a.down;
      down_specific = a.only_peer.valid();
    }
  }
  if (up != kNoLink) base.path[base.hops++] = up;
  if (down != kNoLink) base.path[base.hops++] = down;
  FaultTally t;
  datagram_fates(f_, [this] { return uniform(); }, now, t, [&](Nanos at) {
    Delivery d = base;
    d.seq = seq_++;
    d.bytes.assign(bytes.begin(), bytes.end());
    if (d.hops == 0) {
      d.at = at;
    } else {  // the random delay is added after the links
      d.extra = at - now;
      d.at = now;
    }
    q_.push(std::move(d));
  });
  lost += t.lost;
  duplicated += t.duplicated;
  reordered += t.reordered;
}

bool SimNetwork::pop(Delivery& out) {
  Delivery d = std::move(const_cast<Delivery&>(q_.top()));
  q_.pop();
  if (d.hop < d.hops) {
    Nanos leave = 0;
    if (!cross(d.path[d.hop], d.at, d.bytes.size(), leave)) return false;
    ++d.hop;
    d.at = d.hop < d.hops ? leave : leave + d.extra;
    d.seq = seq_++;
    q_.push(std::move(d));
    return false;
  }
  ++delivered;
  out = std::move(d);
  return true;
}

SimNetwork::LinkId SimNetwork::add_link(const LinkParams& p) {
  links_.push_back(Link{});
  links_.back().p = p;
  return LinkId(links_.size() - 1);
}

void SimNetwork::attach(Endpoint e, LinkId up, LinkId down, Endpoint only_peer) {
  attach_.push_back({e, only_peer, up, down});
}

void SimNetwork::change_link(LinkId id, Nanos at, const LinkParams& p) {
  auto& c = links_[id].changes;
  c.emplace_back(at, p);
  std::stable_sort(c.begin() + std::ptrdiff_t(links_[id].next_change), c.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
}

bool SimNetwork::cross(LinkId id, Nanos t, std::size_t bytes, Nanos& leave) {
  Link& l = links_[id];
  while (l.next_change < l.changes.size() && l.changes[l.next_change].first <= t)
    l.p = l.changes[l.next_change++].second;
  const LinkParams& p = l.p;
  if (p.p_good_bad > 0 || p.loss_good > 0 || l.bad) {
    l.bad = l.bad ? uniform() >= p.p_bad_good : uniform() < p.p_good_bad;
    const double loss = l.bad ? p.loss_bad : p.loss_good;
    if (loss > 0 && uniform() < loss) {
      ++l.stats.burst_drops;
      return false;
    }
  }
  const double wire = double(bytes + p.overhead_bytes);
  double start = double(t);
  if (p.rate_bps > 0) {
    const double backlog = l.busy_until > start ? (l.busy_until - start) * p.rate_bps / 8e9 : 0;
    if (p.queue_bytes && backlog + wire > double(p.queue_bytes)) {
      ++l.stats.queue_drops;
      return false;
    }
    l.stats.max_queue_bytes = std::max(l.stats.max_queue_bytes, std::uint64_t(backlog));
    start = std::max(start, l.busy_until);
    const double tx = wire * 8e9 / p.rate_bps;
    l.busy_until = start + tx;
    l.stats.busy += Nanos(tx);
    start = l.busy_until;
  }
  ++l.stats.packets;
  l.stats.bytes += std::uint64_t(wire);
  leave = Nanos(std::ceil(start)) + p.delay;
  return true;
}

Endpoint SimCluster::add_switch(const SwitchConfig& cfg) {
  Endpoint ep = next_endpoint();
  nodes_.push_back({true, switches_.size()});
  switches_.push_back(std::make_unique<SwitchDataPlane>(cfg));
  switch_ep_.push_back(ep);
  return ep;
}

std::vector<std::size_t> SimCluster::add_switch_lanes(const SwitchConfig& cfg, std::uint16_t lanes,
                                                      std::uint16_t parent_lanes) {
  std::vector<std::size_t> idx;
  const Endpoint first = next_endpoint();
  for (std::uint16_t l = 0; l < lanes; ++l) {
    SwitchConfig c = cfg;
    c.lanes = lanes;
    c.lane = l;
    c.incarnation = cfg.incarnation + 7919ull * l;
    c.auth_instance[0] ^= std::uint8_t(l + 1);  // every lane seals as a sender of its own
    if (cfg.parent.valid()) c.parent = l < parent_lanes ? lane_endpoint(cfg.parent, l) : Endpoint{};
    idx.push_back(switches_.size());
    Endpoint ep = add_switch(c);
    if (ep != lane_endpoint(first, l)) std::abort();  // lanes must be consecutive nodes
  }
  return idx;
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
  if (batch_ > 0) return defer_flush();
  Outbox& o = switches_[i]->outbox();
  for (const auto& e : o.entries()) net_.send(switch_ep_[i], e.to, o.bytes(e), now_);
  o.clear();
}

void SimCluster::flush_worker(std::size_t i) {
  // A driver joins the job's group before it sends what the worker queued after its join
  // (as the UDP drivers do).
  if (const Endpoint g = workers_[i]->multicast_group(); g.valid()) net_.subscribe(g, worker_ep_[i]);
  if (batch_ > 0) return defer_flush();
  Outbox& o = workers_[i]->outbox();
  if (!dead_[i])
    for (const auto& e : o.entries()) net_.send(worker_ep_[i], e.to, o.bytes(e), now_);
  o.clear();
}

void SimCluster::defer_flush() {
  if (next_flush_ == std::numeric_limits<Nanos>::max()) next_flush_ = now_ + batch_;
}

void SimCluster::flush_all() {
  const Nanos batch = batch_;
  batch_ = 0;
  next_flush_ = std::numeric_limits<Nanos>::max();
  for (std::size_t i = 0; i < switches_.size(); ++i) flush_switch(i);
  for (std::size_t i = 0; i < workers_.size(); ++i) flush_worker(i);
  batch_ = batch;
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
    if (t_net == kNever && t_worker == kNever && next_flush_ == kNever) {
      now_ = std::max(now_, limit);
      return false;
    }
    Nanos t = std::min({t_net, t_worker, next_switch_tick_, next_flush_});
    if (t > limit) {
      now_ = std::max(now_, limit);
      return false;
    }
    now_ = std::max(now_, t);
    if (t == next_flush_) {  // batched sending: everything queued since the last flush leaves
      flush_all();
      continue;
    }
    if (t == next_switch_tick_ && t < t_net && t < t_worker) {
      for (std::size_t i = 0; i < switches_.size(); ++i) {
        switches_[i]->on_tick(now_);
        flush_switch(i);
      }
      next_switch_tick_ += kSwitchTick;
      continue;
    }
    if (t_net <= t_worker) {
      SimNetwork::Delivery d;
      if (!net_.pop(d)) continue;  // a datagram crossed a link (or was dropped there)
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
