// Flow-level network with max-min fair bandwidth sharing.
//
// Resources (links, host memory buses) have capacities in bytes/s; a flow crosses a list of
// resources and may carry its own rate cap. Rates are the max-min fair allocation computed by
// progressive filling. When a flow starts or ends only the flows connected to it through shared
// resources (its component) can change rate, so only that component is refilled; everything
// else keeps its rate and its scheduled completion.
//
// A resource may carry a token bucket (set_bucket; the emulated testbed's tbf shapers, docs/SIMULATOR.md,
// "Token-bucket links"): shaped at rate R with a bucket of B bytes, full at time 0, it passes
// traffic at its peak P while it holds tokens. Tokens fall at (load - R) while the load (the sum
// of its flows' rates) exceeds R and rise at (R - load), up to B, while it is below R. When they
// reach 0 (bucket_empty_time: the caller schedules the event, bucket_empty handles it, stale
// versions dropped as for flows) the capacity drops to R; when they are back above 0 the capacity
// is P again at the resource's next refill.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

namespace inc::sim {

class FlowNet {
 public:
  static constexpr double kNoCap = std::numeric_limits<double>::infinity();

  explicit FlowNet(std::vector<double> capacities);

  std::size_t num_resources() const { return res_.size(); }
  void set_capacity(std::uint32_t r, double cap) { res_[r].cap = cap; }

  // Starts a flow of `bytes` (> 0) at time `now` over `resources` (distinct ids), capped at
  // `cap` bytes/s. Returns its id. Rates of the affected component are recomputed.
  // `weight` > 0 is the flow's sharing penalty: on a shared bottleneck rates are inversely
  // proportional to it (weighted max-min; 1 for all flows = plain max-min). SimGrid weights
  // flows by their route latency, as TCP's RTT unfairness does.
  std::uint32_t start(const std::uint32_t* resources, std::size_t n, double bytes, double now,
                      double cap = kNoCap, double weight = 1.0);
  // Removes a finished (or cancelled) flow; recomputes its component.
  void finish(std::uint32_t flow, double now);

  // Batched form: add and remove any number of flows at the same instant, then recompute the
  // affected components once (symmetric collectives start and finish thousands of flows at the
  // same time; one refill instead of thousands). start()/finish() are add/remove + commit.
  std::uint32_t add(const std::uint32_t* resources, std::size_t n, double bytes, double now,
                    double cap = kNoCap, double weight = 1.0);
  void remove(std::uint32_t flow);
  void commit(double now);
  bool dirty() const { return !seed_res_.empty(); }

  // Flows whose rate (and so completion time) changed in the last start/finish, including the
  // started flow. The caller re-schedules their completions.
  const std::vector<std::uint32_t>& changed() const { return changed_; }

  // Token bucket on resource r (before any flow starts): rate and peak in bytes/s (peak > rate),
  // `bytes` > 0 tokens, full at time 0; its capacity is the peak until the tokens run out.
  void set_bucket(std::uint32_t r, double rate, double peak, double bytes);
  std::size_t num_buckets() const { return buckets_.size(); }
  // Resources whose bucket's empty time moved before its earliest scheduled event in the last
  // commit; the caller schedules bucket_empty(r, bucket_version(r)) at bucket_empty_time(r). A
  // later time is not scheduled at once: the earlier event, stale by then, asks for it (again),
  // so a bucket has few events in the queue however often its load changes.
  const std::vector<std::uint32_t>& changed_buckets() const { return changed_buckets_; }
  double bucket_empty_time(std::uint32_t r) const { return buckets_[bucket_of_[r]].empty_at; }
  std::uint32_t bucket_version(std::uint32_t r) const { return buckets_[bucket_of_[r]].version; }
  // The event of r's bucket scheduled at `now` with `version`: `emptied`, it ran out of tokens,
  // its capacity drops to the rate and its component is refilled at the next commit; `stale`,
  // nothing to do; `again`, stale but the bucket's earliest event: schedule its empty time again.
  enum class BucketEvent : std::uint8_t { emptied, stale, again };
  BucketEvent bucket_empty(std::uint32_t r, std::uint32_t version, double now);
  // Tokens of r's bucket at `now` (>= the last refill of its component), and whether its
  // capacity is the peak.
  double tokens(std::uint32_t r, double now) const;
  bool at_peak(std::uint32_t r) const { return !buckets_[bucket_of_[r]].dry; }
  std::uint64_t buckets_emptied() const { return buckets_emptied_; }

  double rate(std::uint32_t f) const { return flows_[f].rate; }
  // Completion time if nothing changes (infinity for a zero rate).
  double finish_time(std::uint32_t f) const;
  std::uint32_t version(std::uint32_t f) const { return flows_[f].version; }
  bool active(std::uint32_t f) const { return flows_[f].active; }
  std::size_t active_flows() const { return active_count_; }
  std::uint64_t refills() const { return refills_; }
  std::uint64_t refill_flows() const { return refill_flows_; }

 private:
  struct Flow {
    double remaining = 0;  // bytes at time `last`
    double rate = 0;
    double last = 0;
    double cap = kNoCap;
    double weight = 1.0;
    std::uint32_t version = 0;
    std::uint32_t res_begin = 0;  // into res_pool_/pos_pool_
    std::uint8_t nres = 0;
    bool active = false;
  };
  struct Resource {
    double cap = 0;
    std::vector<std::uint32_t> flows;  // active flows crossing it
    // Scratch for progressive filling.
    double rem = 0;
    double inv_w = 0;  // sum of 1/weight over unfixed flows
    std::uint32_t unfixed = 0;
    std::uint32_t stamp = 0;
  };

  struct Bucket {
    double rate = 0, peak = 0, size = 0;
    double tokens = 0, last = 0;  // tokens at time `last`
    double load = 0;              // sum of the resource's flow rates since `last`
    double empty_at = std::numeric_limits<double>::infinity();
    double scheduled = std::numeric_limits<double>::infinity();  // its earliest event in the queue
    std::uint32_t version = 0;
    bool dry = false;             // capacity at the rate: the tokens ran out and are not back
    bool moved = false;           // scratch: dry changed in this refill
  };
  void bucket_before_fill(double now);  // comp_res_: tokens to now, capacity by the tokens
  void bucket_after_fill(double now);   // comp_res_: new loads, empty times
  void refill(double now);  // components of seed_res_
  void fill_component(double now);  // comp_flows_ over comp_res_
  void advance(std::uint32_t f, double now);

  std::vector<Flow> flows_;
  std::vector<std::uint32_t> free_flows_;
  std::vector<std::uint32_t> res_pool_, pos_pool_;  // per flow slot: resources and positions
  std::vector<Resource> res_;
  std::vector<std::uint32_t> bucket_of_;  // per resource, ~0u: none (empty: no bucket at all)
  std::vector<Bucket> buckets_;
  std::vector<std::uint32_t> changed_buckets_;
  std::uint64_t buckets_emptied_ = 0;
  std::vector<std::uint32_t> changed_;
  std::vector<std::uint32_t> seed_res_;
  std::vector<std::uint32_t> comp_res_, comp_flows_;
  std::vector<std::uint32_t> flow_stamp_;
  // Progressive filling's min-heap of levels (std::priority_queue's algorithm on a reused vector).
  struct FillEntry {
    double share;
    std::uint32_t id;
    bool is_flow;
    bool operator>(const FillEntry& o) const { return share > o.share; }
  };
  struct FillHeap {
    std::vector<FillEntry> v;
    void clear() { v.clear(); }
    bool empty() const { return v.empty(); }
    const FillEntry& top() const { return v.front(); }
    void push(const FillEntry& e) {
      v.push_back(e);
      std::push_heap(v.begin(), v.end(), std::greater<FillEntry>());
    }
    void pop() {
      std::pop_heap(v.begin(), v.end(), std::greater<FillEntry>());
      v.pop_back();
    }
  };
  FillHeap fill_heap_;
  std::vector<std::uint8_t> fixed_;
  std::uint32_t stamp_ = 0;
  std::size_t active_count_ = 0;
  std::uint64_t refills_ = 0, refill_flows_ = 0;
  static constexpr std::uint32_t kMaxRes = 16;
};

}  // namespace inc::sim
