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

void FlowNet::refill(double now) {
  changed_.clear();
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
    fill_component(now);
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
