// Root placement (docs/CONTROLLER.md "Trees"): through which leaf each rank of a job attaches
// when its host hangs off several (`host NAME leaf=A,B`: several NICs, rails), and so which
// switch is the tree's root. The data plane has one parent per switch, so once every rank's leaf
// is chosen the tree is fixed (sw::plan_job); the choice weighs the links the tree would use.
//
// A link is a switch's uplink (to its parent; host links are used once per rank whatever the
// choice). Its weight is 100 / rate in Gb/s (`rate=` on the switch line; a link without a rate
// weighs 1, a hop at 100 Gb/s), times 1 + the jobs whose trees use it now. For every candidate
// root R (each switch above some leaf of every rank), each rank takes, among its leaves under R,
// the one whose path up to R weighs least (ties: a leaf an earlier rank took, then the host
// line's order); the tree's cost is the sum of the weights of the distinct links it uses. The
// cheapest tree wins (ties: fewer switches, then the fabric's order of R), so a job whose hosts
// share a leaf uses that leaf alone, and a job that must cross the spine goes up fast and idle
// uplinks.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "src/switch/topology.hpp"

namespace inc::control {

// The leaves a rank may attach through, in preference order (a host line's leaves).
using LeafChoice = std::vector<std::string>;

struct Placement {
  std::vector<std::pair<std::string, std::vector<std::uint32_t>>> attach;  // leaf -> ranks
  std::string root;
  double cost = 0;
  std::size_t switches = 0;
};

// The weight of switch `sw`'s uplink (0 for a root), given the jobs using it now.
double uplink_weight(const sw::TopoSwitch& sw, unsigned jobs_using);

// Placements of ranks with these choices, cheapest first (one per candidate root; empty if no
// switch is above a leaf of every rank). `uplink_jobs(name)`: jobs using switch name's uplink.
std::vector<Placement> place_ranks(const sw::Topology& fabric, const std::vector<LeafChoice>& ranks,
                                   const std::function<unsigned(const std::string&)>& uplink_jobs);

}  // namespace inc::control
