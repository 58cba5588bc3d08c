// A deterministic simulated network for the sans-IO state machines: one seed decides loss,
// duplication, reordering and delay, so a failing run replays exactly (print the seed).
// SimCluster wires switches (SwitchDataPlane) and workers (WorkerProtocol) to it and runs
// discrete events in simulated time; the tests and the performance simulator reuse it.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <queue>
#include <random>
#include <utility>
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

// A bottleneck link: a drop-tail FIFO queue in front of a transmitter of `rate_bps`, then a
// propagation delay; optional Gilbert-Elliott bursty loss (a two-state Markov chain stepped
// per packet: good -> bad with p_good_bad, bad -> good with p_bad_good; a packet is lost with
// loss_good / loss_bad in that state). Sizes count `overhead_bytes` per datagram on the wire
// (Ethernet 14 + IPv4 20 + UDP 8 by default, as tc's tbf counts them).
struct LinkParams {
  double rate_bps = 0;              // 0: unlimited (no queueing)
  std::uint64_t queue_bytes = 0;    // queue limit (bytes waiting, not in service); 0: unlimited
  Nanos delay = 0;                  // propagation delay after the transmitter
  std::uint32_t overhead_bytes = 42;
  double p_good_bad = 0, p_bad_good = 1, loss_good = 0, loss_bad = 0;
};

struct LinkStats {
  std::uint64_t packets = 0, bytes = 0;  // carried (wire bytes)
  std::uint64_t queue_drops = 0, burst_drops = 0;
  std::uint64_t max_queue_bytes = 0;     // largest backlog seen by an arriving packet
  Nanos busy = 0;                        // time spent transmitting
};

class SimNetwork {
 public:
  using LinkId = std::uint32_t;
  static constexpr LinkId kNoLink = 0xFFFFFFFF;
  struct Delivery {
    Nanos at = 0;
    std::uint64_t seq = 0;
    Endpoint from, to;
    std::vector<std::byte> bytes;
    // Internal: links still to cross (indices into the path), and the random extra delay
    // (jitter, reordering) added after the last link.
    std::uint8_t hop = 0, hops = 0;
    LinkId path[2] = {kNoLink, kNoLink};
    Nanos extra = 0;
  };
  SimNetwork(std::uint64_t seed, const SimFaults& f) : rng_(seed), f_(f) {}
  void set_faults(const SimFaults& f) { f_ = f; }
  void send(Endpoint from, Endpoint to, std::span<const std::byte> bytes, Nanos now);
  bool empty() const { return q_.empty(); }
  Nanos next_time() const { return q_.top().at; }
  // Processes the next event: a datagram reaching its destination (true, `out` filled) or a
  // link stage (false: it moved on to the next link or was dropped by a queue or a burst).
  bool pop(Delivery& out);

  // Links. Datagrams from `e` cross `up`, datagrams to `e` cross `down` (either may be
  // kNoLink); with `only_peer` set, only datagrams exchanged with that peer do (a leaf
  // switch's uplink). Several endpoints may share link ids (workers on one host).
  LinkId add_link(const LinkParams& p);
  void attach(Endpoint e, LinkId up, LinkId down, Endpoint only_peer = {});
  // From simulated time `at` on, the link has the parameters `p` (rate changes, outages).
  void change_link(LinkId id, Nanos at, const LinkParams& p);
  const LinkStats& link_stats(LinkId id) const { return links_[id].stats; }

  // Multicast (docs/PROTOCOL.md, "Multicast results"): a datagram sent to `group` reaches
  // every subscriber as a copy of its own: each copy crosses the sender's and the subscriber's
  // links and draws its own faults (loss, duplication, delay), as a switch's replication does.
  // Subscribing twice is once. A group without subscribers delivers nothing.
  void subscribe(Endpoint group, Endpoint member);
  bool subscribed(Endpoint group, Endpoint member) const;
  std::uint64_t multicast_sent = 0;  // datagrams sent to a group (each counted once in `sent`)
  const LinkParams& link_params(LinkId id) const { return links_[id].p; }

  std::uint64_t sent = 0, lost = 0, duplicated = 0, reordered = 0, delivered = 0;
  // Sees every datagram sent, before any fault (an eavesdropper on the wire, for attack tests).
  std::function<void(Endpoint from, Endpoint to, std::span<const std::byte> bytes)> tap;

 private:
  struct Later {
    bool operator()(const Delivery& a, const Delivery& b) const {
      return a.at != b.at ? a.at > b.at : a.seq > b.seq;
    }
  };
  struct Link {
    LinkParams p;
    std::vector<std::pair<Nanos, LinkParams>> changes;  // sorted by time, applied in order
    std::size_t next_change = 0;
    double busy_until = 0;  // ns, when the transmitter finishes the last accepted datagram
    bool bad = false;       // Gilbert-Elliott state
    LinkStats stats;
  };
  struct Attachment {
    Endpoint e, only_peer;
    LinkId up = kNoLink, down = kNoLink;
  };
  // One copy of a datagram to one receiver: its links and its faults.
  void fan_out(Endpoint from, Endpoint to, std::span<const std::byte> bytes, Nanos now);
  // Crosses link `id` arriving at `t`: false if dropped, else the time it leaves the link.
  bool cross(LinkId id, Nanos t, std::size_t bytes, Nanos& leave);
  double uniform() { return std::uniform_real_distribution<double>(0, 1)(rng_); }
  std::mt19937_64 rng_;
  SimFaults f_;
  std::uint64_t seq_ = 0;
  std::priority_queue<Delivery, std::vector<Delivery>, Later> q_;
  std::vector<Link> links_;
  std::vector<Attachment> attach_;
  std::vector<std::pair<Endpoint, Endpoint>> groups_;  // (group, subscriber)
};

class SimCluster {
 public:
  SimCluster(std::uint64_t seed, const SimFaults& f) : net_(seed, f) {}

  // Endpoints are handed out in creation order: Endpoint::node(n) for the n-th node.
  Endpoint next_endpoint() const { return Endpoint::node(std::uint32_t(nodes_.size())); }
  Endpoint add_switch(const SwitchConfig& cfg);
  // A switch daemon with `lanes` lanes: as many data planes at consecutive endpoints (lane l at
  // lane_endpoint(first, l)), each with cfg.lanes = lanes and cfg.lane = l. With cfg.parent set,
  // lane l's parent is the parent's lane l (lane_endpoint(cfg.parent, l)) for l < parent_lanes;
  // lanes beyond the parent's have none (a job uses min(lanes, parent_lanes) of them).
  // Returns the switch indices (for sw()) of lanes 0..lanes-1; lane 0's endpoint is the daemon's.
  std::vector<std::size_t> add_switch_lanes(const SwitchConfig& cfg, std::uint16_t lanes,
                                            std::uint16_t parent_lanes = 0xFFFF);
  Endpoint switch_endpoint(std::size_t i) const { return switch_ep_[i]; }
  Endpoint add_worker(const WorkerConfig& cfg);
  SwitchDataPlane& sw(std::size_t i) { return *switches_[i]; }
  WorkerProtocol& worker(std::size_t i) { return *workers_[i]; }
  std::size_t num_workers() const { return workers_.size(); }
  SimNetwork& net() { return net_; }
  // A host link for endpoint `e`: `up` carries what `e` sends, `down` what it receives (both
  // through drop-tail queues, see LinkParams). Returns the two link ids.
  std::pair<SimNetwork::LinkId, SimNetwork::LinkId> shape(Endpoint e, const LinkParams& up,
                                                          const LinkParams& down) {
    auto u = net_.add_link(up), d = net_.add_link(down);
    net_.attach(e, u, d);
    return {u, d};
  }
  Nanos now() const { return now_; }

  // Replace switch i by a fresh one (all state gone) with the given config (new incarnation).
  void restart_switch(std::size_t i, const SwitchConfig& cfg);
  // A dead worker processes nothing and sends nothing from now on.
  void kill_worker(std::size_t i) { dead_[i] = true; }
  bool dead(std::size_t i) const { return dead_[i]; }
  // Deliver packets sent by anyone (e.g. hand-made) through the network.
  void inject(Endpoint from, Endpoint to, std::span<const std::byte> bytes);

  // Batched sending, as the UDP loops do (they send what a recvmmsg batch produced after the
  // whole batch): with `window` > 0 the state machines' outboxes are sent every `window` of
  // simulated time instead of after each event, so packets wait in an outbox while later
  // events change the state they were queued from: payloads an outbox references (a worker's
  // buffers, a switch's slots) must survive that (docs/ARCHITECTURE.md, "The data path").
  // 0 (default): after every event.
  void set_batch(Nanos window) { batch_ = window; }

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
  void defer_flush();
  void flush_all();
  SimNetwork net_;
  std::vector<Node> nodes_;
  std::vector<std::unique_ptr<SwitchDataPlane>> switches_;
  std::vector<Endpoint> switch_ep_;
  std::vector<std::unique_ptr<WorkerProtocol>> workers_;
  std::vector<Endpoint> worker_ep_;
  std::vector<bool> dead_;
  Nanos now_ = 0;
  Nanos next_switch_tick_ = 0;
  Nanos batch_ = 0;
  Nanos next_flush_ = std::numeric_limits<Nanos>::max();
};

}  // namespace inc::sw
