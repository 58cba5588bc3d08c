#include "sim/flow.hpp"

#include <algorithm>
#include <cmath>
#include <queue>

#include "inc/types.hpp"

namespace inc::sim {

FlowNet::FlowNet(std::vector<double> caps) {
  res_.resize(caps.size());
  for (std::size_t i = 0; i < caps.size(); ++i) res_[i].cap = caps[i];
}

double FlowNet::finish_time(std::uint32_t f) const {
  const Flow& x = flows_[f];
  if (x.rate <= 0) return std::numeric_limits<double>::infinity();
  return x.last + x.remaining / x.rate;
}

void FlowNet::advance(std::uint32_t f, double now) {
  Flow& x = flows_[f];
  if (now > x.last) {
    x.remaining -= x.rate * (now - x.last);
    if (x.remaining < 0) x.remaining = 0;
    x.last = now;
  }
}

std::uint32_t FlowNet::start(const std::uint32_t* resources, std::size_t n, double bytes, double now, double cap,
                             double weight) {
  const std::uint32_t f = add(resources, n, bytes, now, cap, weight);
  commit(now);
  return f;
}

std::uint32_t FlowNet::add(const std::uint32_t* resources, std::size_t n, double bytes, double now, double cap,
                           double weight) {
  if (n == 0 || n > kMaxRes)
    throw Error(Error::Kind::internal, "flow: a flow needs 1..16 resources");
  std::uint32_t f;
  if (!free_flows_.empty()) {
    f = free_flows_.back();
    free_flows_.pop_back();
  } else {
    f = static_cast<std::uint32_t>(flows_.size());
    flows_.emplace_back();
    flow_stamp_.push_back(0);
    fixed_.push_back(0);
    res_pool_.resize(res_pool_.size() + kMaxRes);
    pos_pool_.resize(pos_pool_.size() + kMaxRes);
  }
  Flow& x = flows_[f];
  x.remaining = bytes;
  x.rate = 0;  // a new flow always changes rate in the commit, so it is reported in changed()
  x.last = now;
  x.cap = cap;
  x.weight = weight > 0 ? weight : 1.0;
  x.res_begin = f * kMaxRes;
  x.nres = static_cast<std::uint8_t>(n);
  x.active = true;
  ++x.version;
  ++active_count_;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint32_t r = resources[i];
    res_pool_[x.res_begin + i] = r;
    pos_pool_[x.res_begin + i] = static_cast<std::uint32_t>(res_[r].flows.size());
    res_[r].flows.push_back(f);
    seed_res_.push_back(r);
  }
  return f;
}

void FlowNet::commit(double now) {
  refill(now);
  seed_res_.clear();
}

void FlowNet::finish(std::uint32_t f, double now) {
  if (!flows_[f].active) return;
  remove(f);
  commit(now);
}

void FlowNet::remove(std::uint32_t f) {
  Flow& x = flows_[f];
  if (!x.active) return;
  for (std::uint32_t i = 0; i < x.nres; ++i) {
    const std::uint32_t r = res_pool_[x.res_begin + i];
    const std::uint32_t pos = pos_pool_[x.res_begin + i];
    auto& v = res_[r].flows;
    const std::uint32_t moved = v.back();
    v[pos] = moved;
    v.pop_back();
    if (moved != f) {
      Flow& m = flows_[moved];
      for (std::uint32_t k = 0; k < m.nres; ++k)
        if (res_pool_[m.res_begin + k] == r) {
          pos_pool_[m.res_begin + k] = pos;
          break;
        }
    }
    seed_res_.push_back(r);
  }
  x.active = false;
  x.rate = 0;
  ++x.version;
  --active_count_;
  free_flows_.push_back(f);
}

void FlowNet::set_bucket(std::uint32_t r, double rate, double peak, double bytes) {
  if (!(rate > 0) || !(peak > rate) || !(bytes > 0) || r >= res_.size() || active_count_ > 0)
    throw Error(Error::Kind::internal, "flow: a bucket needs 0 < rate < peak, bytes > 0, before any flow");
  if (bucket_of_.empty()) bucket_of_.assign(res_.size(), ~0u);
  if (bucket_of_[r] == ~0u) {
    bucket_of_[r] = static_cast<std::uint32_t>(buckets_.size());
    buckets_.emplace_back();
  }
  Bucket& b = buckets_[bucket_of_[r]];
  b = Bucket{};
  b.rate = rate;
  b.peak = peak;
  b.size = b.tokens = bytes;
  res_[r].cap = peak;
}

namespace {
// Tokens at or below this share of the bucket count as none: the error of a drain computed to
// its empty time and back (the simulated clock's rounding times the drain rate) is far smaller.
constexpr double kTokenEps = 1e-6;
}  // namespace

double FlowNet::tokens(std::uint32_t r, double now) const {
  const Bucket& b = buckets_[bucket_of_[r]];
  const double t = b.tokens + (b.rate - b.load) * std::max(0.0, now - b.last);
  return std::clamp(t, 0.0, b.size);
}

FlowNet::BucketEvent FlowNet::bucket_empty(std::uint32_t r, std::uint32_t version, double now) {
  Bucket& b = buckets_[bucket_of_[r]];
  if (b.version != version || b.dry) {
    if (now != b.scheduled) return BucketEvent::stale;  // a later copy of an older prediction
    // Every earlier empty time was scheduled when it was predicted, so none can have passed.
    if (b.empty_at < now) throw Error(Error::Kind::internal, "flow: a bucket's empty time passed unscheduled");
    b.scheduled = b.empty_at;
    return b.empty_at < std::numeric_limits<double>::infinity() ? BucketEvent::again : BucketEvent::stale;
  }
  b.scheduled = std::numeric_limits<double>::infinity();
  b.tokens = 0;
  b.last = now;
  b.dry = true;
  ++b.version;
  b.empty_at = std::numeric_limits<double>::infinity();
  res_[r].cap = b.rate;
  seed_res_.push_back(r);
  ++buckets_emptied_;
  return BucketEvent::emptied;
}

// Before a component is refilled: each bucket's tokens brought to `now` under the load it had,
// and its capacity set by them (the peak while tokens are left, the rate once they ran out; back
// to the peak when the load fell below the rate and tokens came back).
void FlowNet::bucket_before_fill(double now) {
  for (std::uint32_t r : comp_res_) {
    if (bucket_of_[r] == ~0u) continue;
    Bucket& b = buckets_[bucket_of_[r]];
    b.tokens = tokens(r, now);
    b.last = now;
    const bool was = b.dry;
    b.dry = b.tokens <= kTokenEps * b.size;
    if (b.dry) b.tokens = 0;
    b.moved = b.dry != was;
    res_[r].cap = b.dry ? b.rate : b.peak;
  }
}

// After it: each bucket's new load and, at the peak with a load above the rate, when its tokens
// run out. An unchanged load keeps the scheduled time (it is still right).
void FlowNet::bucket_after_fill(double now) {
  for (std::uint32_t r : comp_res_) {
    if (bucket_of_[r] == ~0u) continue;
    Bucket& b = buckets_[bucket_of_[r]];
    double load = 0;
    for (std::uint32_t f : res_[r].flows) load += flows_[f].rate;
    const bool same = !b.moved && std::fabs(load - b.load) <= 1e-12 * std::max(load, b.load);
    b.load = load;
    if (same) continue;
    ++b.version;
    b.empty_at = !b.dry && load > b.rate ? now + b.tokens / (load - b.rate) : std::numeric_limits<double>::infinity();
    if (b.empty_at < b.scheduled) {
      b.scheduled = b.empty_at;
      changed_buckets_.push_back(r);
    }
  }
}

void FlowNet::refill(double now) {
  changed_.clear();
  changed_buckets_.clear();
  ++refills_;
  ++stamp_;
  // Each component of the seeds apart: max-min rates of disjoint components are independent, and
  // a batch of flows that start or end at one instant is mostly components of one flow each.
  for (std::uint32_t seed : seed_res_) {
    if (res_[seed].stamp == stamp_) continue;
    res_[seed].stamp = stamp_;
    comp_res_.clear();
    comp_flows_.clear();
    comp_res_.push_back(seed);
    for (std::size_t i = 0; i < comp_res_.size(); ++i) {
      const std::uint32_t r = comp_res_[i];
      for (std::uint32_t f : res_[r].flows) {
        if (flow_stamp_[f] == stamp_) continue;
        flow_stamp_[f] = stamp_;
        comp_flows_.push_back(f);
        const Flow& x = flows_[f];
        for (std::uint32_t k = 0; k < x.nres; ++k) {
          const std::uint32_t r2 = res_pool_[x.res_begin + k];
          if (res_[r2].stamp != stamp_) {
            res_[r2].stamp = stamp_;
            comp_res_.push_back(r2);
          }
        }
      }
    }
    if (buckets_.empty()) {
      fill_component(now);
      continue;
    }
    bucket_before_fill(now);
    fill_component(now);
    bucket_after_fill(now);
  }
}

// Progressive filling of comp_flows_ over comp_res_ (one connected component).
void FlowNet::fill_component(double now) {
  refill_flows_ += comp_flows_.size();
  if (comp_flows_.empty()) return;
  for (std::uint32_t f : comp_flows_) {
    advance(f, now);
    fixed_[f] = 0;
  }
  for (std::uint32_t r : comp_res_) {
    res_[r].rem = res_[r].cap;
    res_[r].unfixed = static_cast<std::uint32_t>(res_[r].flows.size());
    double w = 0;
    for (std::uint32_t f : res_[r].flows) w += 1.0 / flows_[f].weight;
    res_[r].inv_w = w;
  }
  auto fix = [&](std::uint32_t f, double rate) {
    fixed_[f] = 1;
    Flow& x = flows_[f];
    const double old = x.rate;
    x.rate = rate;
    for (std::uint32_t k = 0; k < x.nres; ++k) {
      Resource& R = res_[res_pool_[x.res_begin + k]];
      R.rem -= rate;
      if (R.rem < 0) R.rem = 0;
      R.inv_w -= 1.0 / x.weight;
      if (--R.unfixed == 0 || R.inv_w < 0) R.inv_w = 0;
    }
    if (!(std::fabs(old - rate) <= 1e-12 * std::max(old, rate))) {
      ++x.version;
      changed_.push_back(f);
    }
  };
  // Small components (the common case: a flow alone on its links) need no heap.
  if (comp_flows_.size() == 1) {
    const std::uint32_t f = comp_flows_[0];
    const Flow& x = flows_[f];
    double rate = x.cap;
    for (std::uint32_t k = 0; k < x.nres; ++k) rate = std::min(rate, res_[res_pool_[x.res_begin + k]].cap);
    fix(f, rate);
    return;
  }
  auto& heap = fill_heap_;  // reused: no allocation per refill
  heap.clear();
  // Fill level lambda: an unfixed flow runs at lambda / weight; a resource saturates at
  // lambda = rem / sum(1 / weight); a capped flow stops at lambda = cap x weight.
  auto level = [&](const Resource& R) { return R.inv_w > 0 ? R.rem / R.inv_w : kNoCap; };
  for (std::uint32_t r : comp_res_)
    if (res_[r].unfixed) heap.push({level(res_[r]), r, false});
  for (std::uint32_t f : comp_flows_)
    if (flows_[f].cap < kNoCap) heap.push({flows_[f].cap * flows_[f].weight, f, true});
  std::size_t left = comp_flows_.size();
  while (left && !heap.empty()) {
    const FillEntry e = heap.top();
    heap.pop();
    if (e.is_flow) {
      if (!fixed_[e.id]) {
        fix(e.id, flows_[e.id].cap);
        --left;
      }
      continue;
    }
    Resource& R = res_[e.id];
    if (!R.unfixed) continue;
    const double lambda = level(R);
    if (lambda > e.share * (1 + 1e-12) + 1e-300) {  // stale: levels only grow while filling
      heap.push({lambda, e.id, false});
      continue;
    }
    // Bottleneck: every unfixed flow on it runs at lambda / weight. fix() edits counters only.
    for (std::uint32_t f : R.flows)
      if (!fixed_[f]) {
        fix(f, lambda / flows_[f].weight);
        --left;
      }
  }
}

}  // namespace inc::sim
