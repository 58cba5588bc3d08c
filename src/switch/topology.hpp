// Topology files: which switches exist, who is whose parent, and where each job's ranks attach.
// A small line-oriented text format (docs/SWITCH.md):
//
//   # comment
//   switch spine 127.0.0.1:7100
//   switch leaf0 127.0.0.1:7102 parent=spine slots=512 slot-elements=256 types=i32,f32 lanes=2
//   switch leaf1 127.0.0.1:7104 parent=spine ports=128
//   job 7 slots=32 leaf0=0-3 leaf1=4-7
//   host node3 leaf=leaf1            (the controller's fabric: which leaf a host hangs off)
//
// `rate=GBPS` on a switch line is the rate of its link to the parent (the controller's fabric;
// 0 = not given).
//
// plan_job turns a job line into the admission (JobSpec) of every switch on the job's tree and
// the attachment (switch, member id) of every rank. The controller issue will compute trees;
// until then this is how trees are configured.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/switch/dataplane.hpp"

namespace inc::sw {

struct TopoSwitch {
  std::string name;
  Endpoint addr;
  std::string parent;  // empty: a root
  std::uint32_t slots = 1024;      // the whole pool, split evenly over the lanes
  std::uint32_t slot_elems = 256;
  std::uint32_t caps = proto::cap::all;
  std::uint16_t lanes = 1;         // lane l serves addr port + l (default 1 in files)
  // ports=N: members one job may have here (ranks and child switches; the switch's radix);
  // default and upper bound: what the data plane takes (proto::kMaxMembers).
  std::uint32_t ports = proto::kMaxMembers;
  double uplink_gbps = 0;          // rate= of the link to the parent (0: not given)
  int line = 0;
};

// A host of the controller's fabric and the leaf switch it hangs off (`leaf=A` or, for a host
// with several NICs on several leaves, `leaf=A,B,...`: the controller chooses per job).
struct TopoHost {
  std::string name;
  std::string leaf;                 // the first of `leaves`
  int line = 0;
  std::vector<std::string> leaves;  // every leaf it hangs off, in the line's order
};

struct TopoJob {
  std::uint32_t id = 0;
  std::uint32_t slots = 16;  // per lane, at every switch of the job's tree
  std::vector<std::pair<std::string, std::vector<std::uint32_t>>> attach;  // switch -> ranks
  std::uint32_t nranks = 0;
  int line = 0;
};

struct Topology {
  std::vector<TopoSwitch> switches;
  std::vector<TopoJob> jobs;
  std::vector<TopoHost> hosts;
  const TopoSwitch* find(std::string_view name) const;
  const TopoHost* find_host(std::string_view name) const;
  const TopoJob* find_job(std::uint32_t id) const;
};

// Parses and checks the file (unknown keys, duplicate names, unknown or cyclic parents, rank
// sets that are not exactly 0..n-1). On error returns nullopt and sets `err` ("line N: ...").
std::optional<Topology> parse_topology(std::string_view text, std::string& err);
std::optional<Topology> load_topology(const std::string& path, std::string& err);

// "i32,f32" -> capability bits (raw replication is always there). nullopt on unknown names.
std::optional<std::uint32_t> parse_types(std::string_view list);

struct JobPlan {
  std::map<std::string, JobSpec> specs;  // per switch on the job's tree
  std::string root;
  struct Attachment {
    std::string sw;
    Endpoint addr;
    std::uint16_t member = 0;
  };
  std::vector<Attachment> ranks;  // per rank
};
std::optional<JobPlan> plan_job(const Topology& t, const TopoJob& job, std::string& err);

// The data-plane configuration of switch `name` (parent endpoint resolved; slots = its whole
// pool, lanes = its lanes; the daemon splits the pool over the lanes).
SwitchConfig switch_config(const Topology& t, const TopoSwitch& s);

}  // namespace inc::sw
