// Network topologies for the simulator: single switch, 2- and 3-level fat trees with radix and
// oversubscription, rail-optimised clusters. Every cable is two directed links. Routing is a
// choice (Routing): up-links are chosen per (source, destination) pair by a hash (ECMP), by the
// destination (D-mod-k), or per flow by the least-loaded candidate (adaptive), always among the
// choices whose whole path avoids failed links; down paths in a tree are unique.
// Core-INC aggregation trees are built over the same links (AggTree).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace inc::sim {

enum class TopoKind : std::uint8_t { single_switch, fat_tree2, fat_tree3, rail };
const char* name(TopoKind k);

// How a flow picks its up-links among the equal-cost paths (docs/SIMULATOR.md, Routing).
//  ecmp:     a hash of (source, destination, seed): static, oblivious, collisions at random.
//  dmodk:    destination-based (D-mod-k): up-port = destination mod u at the first level,
//            (destination / u) mod c at the second; static, every flow to one host shares the
//            same down path, so a shift permutation is collision-free.
//  adaptive: at flow start, the candidate whose most-loaded link carries the fewest flows
//            (ties: the ECMP order); needs the simulator's current link load.
enum class Routing : std::uint8_t { ecmp, dmodk, adaptive };
const char* name(Routing r);
bool parse_routing(std::string_view s, Routing& out);

struct TopoSpec {
  TopoKind kind = TopoKind::fat_tree2;
  int hosts = 16;
  int radix = 64;                  // ports per switch
  double oversubscription = 1.0;   // host ports : up ports at the first switch level
  double link_gbps = 400;
  // Switch-to-switch links' rate, Gb/s; 0 = link_gbps. The emulated testbed's two-level shape
  // has one uplink per leaf at (hosts per leaf / oversubscription) x the host rate: one fat link
  // shared by every flow leaving the leaf, not several host-rate links that each flow is pinned
  // to (which match it only while a leaf's flows start together).
  double uplink_gbps = 0;
  double hop_latency_us = 0.6;     // per link
  // rail: servers of `gpus_per_server` GPUs; GPU g of every server is on rail g.
  int gpus_per_server = 8;
  double nvlink_gbps = 7200;
  double nvlink_latency_us = 0.3;
  std::vector<std::string> failed_links;  // names as printed by link_name ("leaf3-spine1")
  std::uint64_t ecmp_seed = 0;
  Routing routing = Routing::ecmp;
};

// Tiers of links, for reports: host links, then switch-to-switch levels.
enum class Tier : std::uint8_t { host = 0, edge_up = 1, core = 2, nvlink = 3 };

struct Link {
  std::uint32_t from = 0, to = 0;  // node ids (hosts first, then switches)
  double bw = 0;                   // bytes/s
  double latency = 0;              // s
  Tier tier = Tier::host;
  bool up = true;                  // direction: towards the core
  bool failed = false;
};

// An aggregation (or multicast) tree over switches for a set of member hosts.
struct AggTree {
  struct Node {
    std::uint32_t node = 0;      // topology node id
    int parent = -1;             // index in `nodes`, -1 for the root
    std::uint32_t up_link = 0;   // node -> parent
    std::uint32_t down_link = 0; // parent -> node
    std::vector<int> children;   // indices in `nodes`
    int member = -1;             // for hosts: index of the member (rank in the job)
  };
  std::vector<Node> nodes;       // nodes[0] is the root switch
  std::vector<int> member_node;  // member -> index in nodes
  int switch_count() const;
  int depth = 0;                 // links from a host to the root (maximum)
};

class Topology {
 public:
  explicit Topology(const TopoSpec& spec);  // throws inc::Error(config) on impossible shapes

  const TopoSpec& spec() const { return spec_; }
  int num_hosts() const { return hosts_; }
  int num_nodes() const { return static_cast<int>(node_names_.size()); }
  const std::vector<Link>& links() const { return links_; }
  const Link& link(std::uint32_t id) const { return links_[id]; }
  std::string link_name(std::uint32_t id) const;
  const std::string& node_name(std::uint32_t n) const { return node_names_[n]; }
  bool is_switch(std::uint32_t n) const { return n >= static_cast<std::uint32_t>(hosts_); }

  // Directed links from host a to host b (a != b), appended to `out`. Returns false if every
  // candidate path crosses a failed link. `load` (flows per directed link, adaptive routing
  // only) may be null: adaptive routing then takes the ECMP choice.
  bool route(int a, int b, std::vector<std::uint32_t>& out, const std::uint32_t* load = nullptr) const;
  // Sum of the latencies of a path.
  double path_latency(const std::vector<std::uint32_t>& path) const;

  // Aggregation tree for `members` (distinct hosts), rooted at their lowest common level;
  // `salt` picks among equivalent roots (different jobs spread over different spines).
  // Throws inc::Error(config) if no tree avoids the failed links.
  AggTree build_tree(const std::vector<int>& members, std::uint64_t salt) const;

  // Shape, for printing.
  std::string describe() const;

 private:
  std::uint32_t add_node(std::string name);
  std::uint32_t add_cable(std::uint32_t lower, std::uint32_t upper, double bw, double lat, Tier tier);
  void apply_failures();
  bool path_ok(const std::vector<std::uint32_t>& p, std::size_t from) const;

  TopoSpec spec_;
  int hosts_ = 0;
  std::vector<std::string> node_names_;
  std::vector<Link> links_;
  // Shapes.
  int d_ = 0, u_ = 0;           // first-level switch: host ports, up ports
  int leaves_ = 0, spines_ = 0; // fat_tree2 and rail
  int E_ = 0, pods_ = 0, c_ = 0;  // fat_tree3: edges per pod, pods, core ports per agg
  int servers_ = 0, groups_ = 0, per_leaf_ = 0;  // rail
  std::uint32_t first_switch_ = 0;
  // Link ids: cable (lower -> upper) = up, +1 = down.
  std::vector<std::uint32_t> host_link_;   // host -> first switch (up); +1 down
  std::vector<std::uint32_t> nv_link_;     // rail: host -> NVLink switch
  std::vector<std::uint32_t> l1_up_;       // fat_tree2/rail: leaf*u + s ; fat_tree3: edge*u + j
  std::vector<std::uint32_t> l2_up_;       // fat_tree3: (pod*u + j)*c + m
  std::vector<std::uint32_t> leaf_node_, spine_node_, agg_node_, core_node_, nv_node_;
};

}  // namespace inc::sim
