// `inc testbed`: per-link counters at the end of a run, read with `tc -s -j qdisc show` and
// `ip -s -j link show` in every namespace, so that a user sees how many bytes each link carried
// and where packets were dropped (a full shaper queue, or a receiver that could not keep up).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "testbed/plan.hpp"

namespace inc::testbed {

struct QdiscStats {
  std::string kind;
  std::uint64_t bytes = 0, packets = 0, drops = 0, overlimits = 0;
  std::uint64_t filtered = 0;  // dropped by a filter before the root qdisc (clsact egress)
};
struct LinkStats {
  std::uint64_t tx_bytes = 0, tx_packets = 0, tx_dropped = 0, rx_dropped = 0;
};
using DevKey = std::pair<std::string, std::string>;  // (namespace, device)

// Root qdiscs per device from `tc -s -j qdisc show` output (kind, counters), and the drops of
// a device's clsact (its egress filter: multicast kept off a leaf's uplink) as `filtered`.
std::map<std::string, QdiscStats> parse_tc_json(const std::string& text);
// Per device from `ip -s -j link show` output.
std::map<std::string, LinkStats> parse_link_json(const std::string& text);

struct DirectionCounters {
  std::string link, dir;  // "h3", "up"
  std::uint64_t bps = 0;
  std::uint64_t bytes = 0, packets = 0;
  std::uint64_t queue_drops = 0;  // dropped at the sender: shaper queue full (or tx drop)
  std::uint64_t overlimits = 0;   // times the shaper held a packet back (it was shaping)
  std::uint64_t rx_drops = 0;     // dropped by the receiving side
  std::uint64_t filtered = 0;     // kept off the link by its egress filter (multicast, uplinks)
};

// Reads the counters of every link of the plan. Commands that fail are reported in `errors`
// (the rest is still read).
std::vector<DirectionCounters> collect_counters(const Plan& p, std::vector<std::string>& errors);
std::string render_counters(const std::vector<DirectionCounters>& c);

}  // namespace inc::testbed
