#include "sim/topology.hpp"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include <fmt/format.h>

#include "inc/types.hpp"

namespace inc::sim {

const char* name(TopoKind k) {
  switch (k) {
    case TopoKind::single_switch:
      return "single_switch";
    case TopoKind::fat_tree2:
      return "fat_tree2";
    case TopoKind::fat_tree3:
      return "fat_tree3";
    case TopoKind::rail:
      return "rail";
  }
  return "?";
}

int AggTree::switch_count() const {
  int n = 0;
  for (const auto& x : nodes) n += x.member < 0;
  return n;
}

namespace {
[[noreturn]] void bad(const std::string& what) { throw Error(Error::Kind::config, "topology: " + what); }

std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
}  // namespace

std::uint32_t Topology::add_node(std::string n) {
  node_names_.push_back(std::move(n));
  return static_cast<std::uint32_t>(node_names_.size() - 1);
}

std::uint32_t Topology::add_cable(std::uint32_t lower, std::uint32_t upper, double bw, double lat, Tier tier) {
  const auto id = static_cast<std::uint32_t>(links_.size());
  links_.push_back(Link{lower, upper, bw, lat, tier, true, false});
  links_.push_back(Link{upper, lower, bw, lat, tier, false, false});
  return id;
}

Topology::Topology(const TopoSpec& s) : spec_(s), hosts_(s.hosts) {
  if (s.hosts < 1) bad(fmt::format("hosts = {}: need at least 1", s.hosts));
  if (!(s.link_gbps > 0)) bad("link_gbps must be > 0");
  if (!(s.hop_latency_us >= 0)) bad("hop_latency_us must be >= 0");
  if (s.kind != TopoKind::single_switch && s.radix < 2) bad(fmt::format("radix = {}: need at least 2", s.radix));
  if (!(s.oversubscription > 0)) bad("oversubscription must be > 0");
  if (!(s.uplink_gbps >= 0)) bad("uplink_gbps must be >= 0 (0 = link_gbps)");
  const double bw = s.link_gbps * 1e9 / 8, lat = s.hop_latency_us * 1e-6;
  const double ubw = s.uplink_gbps > 0 ? s.uplink_gbps * 1e9 / 8 : bw;  // switch-to-switch links
  for (int h = 0; h < hosts_; ++h) add_node(fmt::format("h{}", h));
  first_switch_ = static_cast<std::uint32_t>(hosts_);
  if (s.kind != TopoKind::single_switch) {
    d_ = static_cast<int>(std::lround(s.radix * s.oversubscription / (1 + s.oversubscription)));
    d_ = std::clamp(d_, 1, s.radix - 1);
    u_ = s.radix - d_;
    // A first-level switch splits its radix into d host ports and u up ports: only ratios d:u
    // with d + u = radix exist. Refuse the others instead of rounding silently.
    if (std::abs(static_cast<double>(d_) / u_ - s.oversubscription) > 1e-9 * s.oversubscription) {
      std::string ok;
      for (int d = 1; d < s.radix && ok.size() < 120; ++d)
        ok += fmt::format("{}{:g} ({}:{})", ok.empty() ? "" : ", ", static_cast<double>(d) / (s.radix - d), d,
                          s.radix - d);
      bad(fmt::format("oversubscription {:g} cannot be built with radix {}: the nearest is {}:{} = {:g}; a "
                      "radix-{} switch builds {}{}",
                      s.oversubscription, s.radix, d_, u_, static_cast<double>(d_) / u_, s.radix, ok,
                      ok.size() >= 120 ? ", ..." : ""));
    }
  }
  switch (s.kind) {
    case TopoKind::single_switch: {
      const auto sw = add_node("switch");
      leaf_node_.push_back(sw);
      for (int h = 0; h < hosts_; ++h) host_link_.push_back(add_cable(h, sw, bw, lat, Tier::host));
      break;
    }
    case TopoKind::fat_tree2: {
      leaves_ = (hosts_ + d_ - 1) / d_;
      spines_ = u_;
      if (leaves_ > s.radix)
        bad(fmt::format("{} hosts need {} leaf switches of {} host ports, but a spine of radix {} "
                        "connects at most {}: use fat_tree3 or a larger radix",
                        hosts_, leaves_, d_, s.radix, s.radix));
      for (int l = 0; l < leaves_; ++l) leaf_node_.push_back(add_node(fmt::format("leaf{}", l)));
      for (int k = 0; k < spines_; ++k) spine_node_.push_back(add_node(fmt::format("spine{}", k)));
      for (int h = 0; h < hosts_; ++h) host_link_.push_back(add_cable(h, leaf_node_[h / d_], bw, lat, Tier::host));
      for (int l = 0; l < leaves_; ++l)
        for (int k = 0; k < spines_; ++k)
          l1_up_.push_back(add_cable(leaf_node_[l], spine_node_[k], ubw, lat, Tier::edge_up));
      break;
    }
    case TopoKind::fat_tree3: {
      E_ = s.radix / 2;
      c_ = s.radix - E_;
      const int edges = (hosts_ + d_ - 1) / d_;
      pods_ = (edges + E_ - 1) / E_;
      if (pods_ > s.radix)
        bad(fmt::format("{} hosts need {} pods of {} edge switches x {} hosts, but a core switch of "
                        "radix {} connects at most {} pods: use a larger radix",
                        hosts_, pods_, E_, d_, s.radix, s.radix));
      for (int e = 0; e < edges; ++e) leaf_node_.push_back(add_node(fmt::format("edge{}", e)));
      for (int p = 0; p < pods_; ++p)
        for (int j = 0; j < u_; ++j) agg_node_.push_back(add_node(fmt::format("agg{}.{}", p, j)));
      for (int j = 0; j < u_; ++j)
        for (int m = 0; m < c_; ++m) core_node_.push_back(add_node(fmt::format("core{}.{}", j, m)));
      for (int h = 0; h < hosts_; ++h) host_link_.push_back(add_cable(h, leaf_node_[h / d_], bw, lat, Tier::host));
      for (int e = 0; e < edges; ++e)
        for (int j = 0; j < u_; ++j)
          l1_up_.push_back(add_cable(leaf_node_[e], agg_node_[(e / E_) * u_ + j], ubw, lat, Tier::edge_up));
      for (int p = 0; p < pods_; ++p)
        for (int j = 0; j < u_; ++j)
          for (int m = 0; m < c_; ++m)
            l2_up_.push_back(add_cable(agg_node_[p * u_ + j], core_node_[j * c_ + m], ubw, lat, Tier::core));
      break;
    }
    case TopoKind::rail: {
      const int G = s.gpus_per_server;
      if (G < 1) bad("gpus_per_server must be >= 1");
      if (hosts_ % G != 0) bad(fmt::format("hosts = {} is not a multiple of gpus_per_server = {}", hosts_, G));
      if (!(s.nvlink_gbps > 0)) bad("nvlink_gbps must be > 0");
      servers_ = hosts_ / G;
      per_leaf_ = d_;
      groups_ = (servers_ + per_leaf_ - 1) / per_leaf_;
      leaves_ = groups_ * G;
      spines_ = u_;
      if (leaves_ > s.radix)
        bad(fmt::format("{} rail leaves ({} groups x {} rails) exceed the spine radix {}", leaves_, groups_, G,
                        s.radix));
      for (int sv = 0; sv < servers_; ++sv) nv_node_.push_back(add_node(fmt::format("nv{}", sv)));
      for (int gi = 0; gi < groups_; ++gi)
        for (int g = 0; g < G; ++g) leaf_node_.push_back(add_node(fmt::format("rail{}.{}", g, gi)));
      for (int k = 0; k < spines_; ++k) spine_node_.push_back(add_node(fmt::format("spine{}", k)));
      const double nbw = s.nvlink_gbps * 1e9 / 8, nlat = s.nvlink_latency_us * 1e-6;
      for (int h = 0; h < hosts_; ++h) {
        const int sv = h / G, g = h % G;
        host_link_.push_back(add_cable(h, leaf_node_[(sv / per_leaf_) * G + g], bw, lat, Tier::host));
        nv_link_.push_back(add_cable(h, nv_node_[sv], nbw, nlat, Tier::nvlink));
      }
      for (int l = 0; l < leaves_; ++l)
        for (int k = 0; k < spines_; ++k)
          l1_up_.push_back(add_cable(leaf_node_[l], spine_node_[k], ubw, lat, Tier::edge_up));
      break;
    }
  }
  apply_failures();
}

void Topology::apply_failures() {
  if (spec_.failed_links.empty()) return;
  std::unordered_map<std::string, std::uint32_t> by_name;
  for (std::uint32_t i = 0; i < links_.size(); i += 2)
    by_name[node_names_[links_[i].from] + "-" + node_names_[links_[i].to]] = i;
  for (const auto& n : spec_.failed_links) {
    auto it = by_name.find(n);
    if (it == by_name.end())
      bad(fmt::format("failed link '{}' does not exist (cables are named lower-upper, e.g. 'h0-{}')", n,
                      node_names_[links_[0].to]));
    links_[it->second].failed = links_[it->second + 1].failed = true;
  }
}

std::string Topology::link_name(std::uint32_t id) const {
  const Link& l = links_[id];
  return node_names_[l.from] + "->" + node_names_[l.to];
}

double Topology::path_latency(const std::vector<std::uint32_t>& p) const {
  double t = 0;
  for (auto l : p) t += links_[l].latency;
  return t;
}

bool Topology::path_ok(const std::vector<std::uint32_t>& p, std::size_t from) const {
  for (std::size_t i = from; i < p.size(); ++i)
    if (links_[p[i]].failed) return false;
  return true;
}

const char* name(Routing r) {
  switch (r) {
    case Routing::ecmp: return "ecmp";
    case Routing::dmodk: return "dmodk";
    case Routing::adaptive: return "adaptive";
  }
  return "?";
}

bool parse_routing(std::string_view s, Routing& out) {
  if (s == "ecmp") out = Routing::ecmp;
  else if (s == "dmodk" || s == "d-mod-k") out = Routing::dmodk;
  else if (s == "adaptive") out = Routing::adaptive;
  else return false;
  return true;
}

bool Topology::route(int a, int b, std::vector<std::uint32_t>& out, const std::uint32_t* load) const {
  const std::size_t base = out.size();
  const std::uint64_t h = mix((static_cast<std::uint64_t>(a) << 32) ^ static_cast<std::uint64_t>(b) ^ mix(spec_.ecmp_seed));
  auto try_path = [&](std::initializer_list<std::uint32_t> links) {
    out.resize(base);
    out.insert(out.end(), links);
    return path_ok(out, base);
  };
  const bool adaptive = spec_.routing == Routing::adaptive && load != nullptr;
  // Candidates k = 0..n-1 in the routing's order; the first whose path avoids failed links wins,
  // or (adaptive) the one whose most-loaded link carries the fewest flows, the earliest on ties.
  auto choose = [&](int n, std::uint64_t first, const auto& path_of) {
    int best = -1;
    std::uint32_t best_load = ~0u;
    for (int i = 0; i < n; ++i) {
      const int k = static_cast<int>((first + static_cast<std::uint64_t>(i)) % static_cast<std::uint64_t>(n));
      if (!path_of(k)) continue;
      if (!adaptive) return true;
      std::uint32_t m = 0;
      for (std::size_t q = base; q < out.size(); ++q) m = std::max(m, load[out[q]]);
      if (m < best_load) {
        best_load = m;
        best = k;
      }
    }
    return best >= 0 && path_of(best);
  };
  const auto ub = static_cast<std::uint64_t>(b);
  const std::uint32_t ua = host_link_[a], db = host_link_[b] + 1;
  switch (spec_.kind) {
    case TopoKind::single_switch:
      return try_path({ua, db});
    case TopoKind::fat_tree2:
    case TopoKind::rail: {
      int la = 0, lb = 0;
      if (spec_.kind == TopoKind::rail) {
        const int G = spec_.gpus_per_server;
        if (a / G == b / G) return try_path({nv_link_[a], nv_link_[b] + 1});
        la = (a / G / per_leaf_) * G + a % G;
        lb = (b / G / per_leaf_) * G + b % G;
      } else {
        la = a / d_;
        lb = b / d_;
      }
      if (la == lb) return try_path({ua, db});
      const std::uint64_t first = spec_.routing == Routing::dmodk ? ub % static_cast<std::uint64_t>(u_) : h;
      return choose(u_, first, [&](int s) { return try_path({ua, l1_up_[la * u_ + s], l1_up_[lb * u_ + s] + 1, db}); });
    }
    case TopoKind::fat_tree3: {
      const int ea = a / d_, eb = b / d_, pa = ea / E_, pb = eb / E_;
      if (ea == eb) return try_path({ua, db});
      const auto u = static_cast<std::uint64_t>(u_), c = static_cast<std::uint64_t>(c_);
      if (pa == pb) {
        const std::uint64_t first = spec_.routing == Routing::dmodk ? ub % u : h;
        return choose(u_, first, [&](int j) { return try_path({ua, l1_up_[ea * u_ + j], l1_up_[eb * u_ + j] + 1, db}); });
      }
      // D-mod-k: aggregation port b mod u, core port (b / u) mod c (candidate x = j c + m).
      const std::uint64_t first = spec_.routing == Routing::dmodk ? (ub % u) * c + (ub / u) % c : h;
      return choose(u_ * c_, first, [&](int x) {
        const int j = x / c_, m = x % c_;
        return try_path({ua, l1_up_[ea * u_ + j], l2_up_[(pa * u_ + j) * c_ + m], l2_up_[(pb * u_ + j) * c_ + m] + 1,
                         l1_up_[eb * u_ + j] + 1, db});
      });
    }
  }
  return false;
}

AggTree Topology::build_tree(const std::vector<int>& members, std::uint64_t salt) const {
  if (members.empty()) bad("aggregation tree without members");
  // Candidate roots at the lowest level covering all members; each candidate gives every
  // member a unique up path (list of up links).
  std::vector<std::vector<std::vector<std::uint32_t>>> candidates;  // [candidate][member] -> up links
  auto first_leaf = [&](int h) {
    if (spec_.kind == TopoKind::rail) {
      const int G = spec_.gpus_per_server;
      return (h / G / per_leaf_) * G + h % G;
    }
    return spec_.kind == TopoKind::single_switch ? 0 : h / d_;
  };
  bool same_leaf = true, same_pod = true;
  for (int m : members) {
    same_leaf = same_leaf && first_leaf(m) == first_leaf(members[0]);
    if (spec_.kind == TopoKind::fat_tree3) same_pod = same_pod && (m / d_) / E_ == (members[0] / d_) / E_;
  }
  const std::uint64_t hs = mix(salt ^ mix(spec_.ecmp_seed));
  if (spec_.kind == TopoKind::single_switch || same_leaf) {
    std::vector<std::vector<std::uint32_t>> c;
    for (int m : members) c.push_back({host_link_[m]});
    candidates.push_back(std::move(c));
  } else if (spec_.kind == TopoKind::fat_tree3 && same_pod) {
    for (int i = 0; i < u_; ++i) {
      const int j = static_cast<int>((hs + i) % static_cast<std::uint64_t>(u_));
      std::vector<std::vector<std::uint32_t>> c;
      for (int m : members) c.push_back({host_link_[m], l1_up_[(m / d_) * u_ + j]});
      candidates.push_back(std::move(c));
    }
  } else if (spec_.kind == TopoKind::fat_tree3) {
    const int n = u_ * c_;
    for (int i = 0; i < n; ++i) {
      const int x = static_cast<int>((hs + i) % static_cast<std::uint64_t>(n)), j = x / c_, mm = x % c_;
      std::vector<std::vector<std::uint32_t>> c;
      for (int m : members) {
        const int e = m / d_, p = e / E_;
        c.push_back({host_link_[m], l1_up_[e * u_ + j], l2_up_[(p * u_ + j) * c_ + mm]});
      }
      candidates.push_back(std::move(c));
    }
  } else {  // fat_tree2 / rail: a spine
    for (int i = 0; i < u_; ++i) {
      const int s = static_cast<int>((hs + i) % static_cast<std::uint64_t>(u_));
      std::vector<std::vector<std::uint32_t>> c;
      for (int m : members) c.push_back({host_link_[m], l1_up_[first_leaf(m) * u_ + s]});
      candidates.push_back(std::move(c));
    }
  }
  for (const auto& cand : candidates) {
    bool ok = true;
    for (const auto& path : cand)
      for (auto l : path) ok = ok && !links_[l].failed && !links_[l + 1].failed;
    if (!ok) continue;
    AggTree t;
    std::unordered_map<std::uint32_t, int> index;
    const std::uint32_t root = links_[cand[0].back()].to;
    t.nodes.push_back(AggTree::Node{root, -1, 0, 0, {}, -1});
    index[root] = 0;
    t.member_node.assign(members.size(), -1);
    for (std::size_t mi = 0; mi < members.size(); ++mi) {
      const auto& path = cand[mi];
      t.depth = std::max(t.depth, static_cast<int>(path.size()));
      int child = -1;
      for (std::size_t k = 0; k < path.size(); ++k) {
        const Link& L = links_[path[k]];
        // The lower end of the link.
        int lower;
        auto it = index.find(L.from);
        bool existed = it != index.end();
        if (existed) {
          lower = it->second;
        } else {
          lower = static_cast<int>(t.nodes.size());
          t.nodes.push_back(AggTree::Node{L.from, -1, path[k], path[k] + 1, {}, -1});
          index[L.from] = lower;
        }
        if (k == 0) {
          if (existed) bad(fmt::format("host {} appears twice in a tree", members[mi]));
          t.nodes[lower].member = static_cast<int>(mi);
          t.member_node[mi] = lower;
        }
        if (child >= 0 && t.nodes[child].parent < 0) {
          t.nodes[child].parent = lower;
          t.nodes[lower].children.push_back(child);
        }
        (void)child;
        child = lower;
        if (existed && k > 0) break;  // the rest of the path is already in the tree
        if (k + 1 == path.size()) {
          const int upper = index.at(L.to);
          if (t.nodes[lower].parent < 0) {
            t.nodes[lower].parent = upper;
            t.nodes[upper].children.push_back(lower);
          }
        }
      }
    }
    return t;
  }
  bad("no Core-INC tree for this job avoids the failed links");
}

std::string Topology::describe() const {
  // Oversubscription in bandwidth: host ports' over up ports' (their ratio of ports when the
  // uplinks run at the host rate).
  const double up = spec_.uplink_gbps > 0 ? spec_.uplink_gbps / spec_.link_gbps : 1;
  const double o = d_ > 0 && u_ > 0 ? double(d_) / (u_ * up) : 1;
  const auto uplinks = [&] {
    return spec_.uplink_gbps > 0 ? fmt::format(" ({} Gb/s between switches)", spec_.uplink_gbps) : std::string();
  };
  switch (spec_.kind) {
    case TopoKind::single_switch:
      return fmt::format("single switch, {} hosts, {} Gb/s links", hosts_, spec_.link_gbps);
    case TopoKind::fat_tree2:
      return fmt::format("2-level fat tree: {} hosts, {} leaves x ({} down, {} up), {} spines, radix {}, "
                         "oversubscription {:.2g}:1, {} Gb/s links{}",
                         hosts_, leaves_, d_, u_, spines_, spec_.radix, o, spec_.link_gbps, uplinks());
    case TopoKind::fat_tree3:
      return fmt::format("3-level fat tree: {} hosts, {} pods x {} edges ({} down, {} up), {} aggs/pod, {} cores, "
                         "radix {}, oversubscription {:.2g}:1, {} Gb/s links{}",
                         hosts_, pods_, E_, d_, u_, u_, u_ * c_, spec_.radix, o, spec_.link_gbps, uplinks());
    case TopoKind::rail:
      return fmt::format("rail-optimised: {} servers x {} GPUs, {} rail leaves, {} spines, radix {}, "
                         "{} Gb/s rails, {} Gb/s NVLink",
                         servers_, spec_.gpus_per_server, leaves_, spines_, spec_.radix, spec_.link_gbps,
                         spec_.nvlink_gbps);
  }
  return "";
}

}  // namespace inc::sim
