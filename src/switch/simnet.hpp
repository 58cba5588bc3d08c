// A deterministic simulated network for the sans-IO state machines: one seed decides loss,
// duplication, reordering and delay, so a failing run replays exactly (print the seed).
// SimCluster wires switches (SwitchDataPlane) and workers (WorkerProtocol) to it and runs
// discrete events in simulated time; the tests and the performance simulator reuse it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <queue>
#include <random>
#include <span>
#include <vector>

#include "src/switch/dataplane.hpp"
#include "src/switch/worker.hpp"

namespace inc::sw {

struct SimFaults {
  double loss = 0;       // probability a datagram is lost
  double dup = 0;        // probability a datagram is delivered twice
  double reorder = 0;    // probability a datagram gets an extra delay (overtaken by later ones)
  Nanos delay = 10'000;  // one-way base delay
  Nanos jitter = 10'000; // uniform extra delay in [0, jitter]
  Nanos reorder_delay = 200'000;  // extra delay of a reordered datagram, uniform in [0, this]
};

class SimNetwork {
 public:
  struct Delivery {
    Nanos at = 0;
    std::uint64_t seq = 0;
    Endpoint from, to;
    std::vector<std::byte> bytes;
  };
  SimNetwork(std::uint64_t seed, const SimFaults& f) : rng_(seed), f_(f) {}
  void set_faults(const SimFaults& f) { f_ = f; }
  void send(Endpoint from, Endpoint to, std::span<const std::byte> bytes, Nanos now);
  bool empty() const { return q_.empty(); }
  Nanos next_time() const { return q_.top().at; }
  Delivery pop();
  std::uint64_t sent = 0, lost = 0, duplicated = 0, reordered = 0, delivered = 0;

 private:
  struct Later {
    bool operator()(const Delivery& a, const Delivery& b) const {
      return a.at != b.at ? a.at > b.at : a.seq > b.seq;
    }
  };
  double uniform() { return std::uniform_real_distribution<double>(0, 1)(rng_); }
  std::mt19937_64 rng_;
  SimFaults f_;
  std::uint64_t seq_ = 0;
  std::priority_queue<Delivery, std::vector<Delivery>, Later> q_;
};

class SimCluster {
 public:
  SimCluster(std::uint64_t seed, const SimFaults& f) : net_(seed, f) {}

  // Endpoints are handed out in creation order: Endpoint::node(n) for the n-th node.
  Endpoint next_endpoint() const { return Endpoint::node(std::uint32_t(nodes_.size())); }
  Endpoint add_switch(const SwitchConfig& cfg);
  Endpoint add_worker(const WorkerConfig& cfg);
  SwitchDataPlane& sw(std::size_t i) { return *switches_[i]; }
  WorkerProtocol& worker(std::size_t i) { return *workers_[i]; }
  std::size_t num_workers() const { return workers_.size(); }
  SimNetwork& net() { return net_; }
  Nanos now() const { return now_; }

  // Replace switch i by a fresh one (all state gone) with the given config (new incarnation).
  void restart_switch(std::size_t i, const SwitchConfig& cfg);
  // A dead worker processes nothing and sends nothing from now on.
  void kill_worker(std::size_t i) { dead_[i] = true; }
  bool dead(std::size_t i) const { return dead_[i]; }
  // Deliver packets sent by anyone (e.g. hand-made) through the network.
  void inject(Endpoint from, Endpoint to, std::span<const std::byte> bytes);

  // Run events until `stop()` holds (true) or nothing is left to do / `limit` passes (false;
  // simulated time then stands at `limit`).
  bool run_until(const std::function<bool()>& stop, Nanos limit);
  // Run until every live worker is done or failed.
  bool run(Nanos limit);
  // Let the worker start an op at the current simulated time.
  void start(std::size_t worker, WorkerOp op) { workers_[worker]->start(std::move(op), now_); flush_worker(worker); }
  // Let the worker submit an op to its stream at the current simulated time; returns its id.
  std::uint64_t submit(std::size_t worker, WorkerOp op) {
    auto id = workers_[worker]->submit(std::move(op), now_);
    flush_worker(worker);
    return id;
  }

 private:
  struct Node {
    bool is_switch;
    std::size_t index;
  };
  void flush_switch(std::size_t i);
  void flush_worker(std::size_t i);
  SimNetwork net_;
  std::vector<Node> nodes_;
  std::vector<std::unique_ptr<SwitchDataPlane>> switches_;
  std::vector<Endpoint> switch_ep_;
  std::vector<std::unique_ptr<WorkerProtocol>> workers_;
  std::vector<Endpoint> worker_ep_;
  std::vector<bool> dead_;
  Nanos now_ = 0;
  Nanos next_switch_tick_ = 0;
};

}  // namespace inc::sw
