#include "src/control/placement.hpp"

#include <algorithm>
#include <set>

namespace inc::control {

double uplink_weight(const sw::TopoSwitch& sw, unsigned jobs_using) {
  if (sw.parent.empty()) return 0;
  const double w = sw.uplink_gbps > 0 ? 100.0 / sw.uplink_gbps : 1.0;
  return w * (1.0 + jobs_using);
}

std::vector<Placement> place_ranks(const sw::Topology& fabric, const std::vector<LeafChoice>& ranks,
                                   const std::function<unsigned(const std::string&)>& uplink_jobs) {
  std::map<std::string, double> weight;
  for (const auto& s : fabric.switches) weight[s.name] = uplink_weight(s, uplink_jobs(s.name));
  // The weight of the path from `leaf` up to `root` (nullopt if root is not above it).
  auto path = [&](const std::string& leaf, const std::string& root) -> std::optional<double> {
    double w = 0;
    for (const sw::TopoSwitch* s = fabric.find(leaf); s; s = s->parent.empty() ? nullptr : fabric.find(s->parent)) {
      if (s->name == root) return w;
      w += weight[s->name];
    }
    return std::nullopt;
  };
  std::vector<Placement> out;
  for (const auto& r : fabric.switches) {
    std::map<std::string, std::vector<std::uint32_t>> by_leaf;
    bool all = true;
    for (std::uint32_t i = 0; i < ranks.size() && all; ++i) {
      const std::string* best = nullptr;
      double best_w = 0;
      for (const auto& leaf : ranks[i]) {
        auto w = path(leaf, r.name);
        if (!w) continue;
        const bool shared = by_leaf.count(leaf) != 0;
        const bool best_shared = best && by_leaf.count(*best) != 0;
        if (!best || *w < best_w || (*w == best_w && shared && !best_shared)) {
          best = &leaf;
          best_w = *w;
        }
      }
      if (!best) all = false;
      else by_leaf[*best].push_back(i);
    }
    if (!all || ranks.empty()) continue;
    // The distinct switches on the paths, and the cost of their uplinks below the root.
    std::set<std::string> used;
    for (const auto& [leaf, _] : by_leaf)
      for (const sw::TopoSwitch* s = fabric.find(leaf); s; s = fabric.find(s->parent)) {
        used.insert(s->name);
        if (s->name == r.name) break;
      }
    Placement p;
    p.root = r.name;
    p.switches = used.size();
    for (const auto& n : used)
      if (n != r.name) p.cost += weight[n];
    for (auto& [leaf, rs] : by_leaf) p.attach.emplace_back(leaf, std::move(rs));
    out.push_back(std::move(p));
  }
  std::stable_sort(out.begin(), out.end(), [](const Placement& a, const Placement& b) {
    return a.cost != b.cost ? a.cost < b.cost : a.switches < b.switches;
  });
  return out;
}

}  // namespace inc::control
