// Internal to src/api: the state behind inc::Communicator and inc::Request, shared by
// communicator.cpp (joining the job: init, split, dup, the switch and controller trees) and
// comm_calls.cpp (validating and starting collectives, completing requests).
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "api/controller_tree.hpp"
#include "api/edge_path.hpp"
#include "api/inc_path.hpp"
#include "api/tuning.hpp"
#include "coll/executor.hpp"
#include "coll/numerics_hops.hpp"
#include "inc/inc.hpp"
#include "transport/store.hpp"

namespace inc::detail {

using coll::Algorithm;

// The rendezvous store as this process sees it (hosted here or not).
struct StoreHandle {
  std::unique_ptr<transport::StoreServer> server;
  std::unique_ptr<transport::StoreClient> client;
};

// What all communicators of one job generation share: the store and the engine.
struct World {
  std::shared_ptr<StoreHandle> store_handle;
  transport::StoreClient* store = nullptr;
  std::unique_ptr<coll::Engine> engine;
  // Measured costs of every path (INC_TUNING), shared by all communicators; null if none.
  std::shared_ptr<const api::CostTable> tuning;
  std::string tuning_path;
  // INC_OFFLOAD=edge: this host's Edge-INC engine runs the collectives (client null: the hosts).
  api::EdgePath edge;
  // The smallest communicator id this process has not used (0 is the world). A new
  // communicator's id is the largest of its members' values, agreed in the split's allgather,
  // so it is unused in every member process: unique by construction, no hashing.
  std::mutex ids_mu;
  std::uint32_t next_comm_id = 1;
  bool on_switch = false;  // counted in worlds_on_switch()
  // INC_TRACE: where the engine's event trace goes when the world ends (empty: not traced).
  std::string trace_dir, trace_stem;
  ~World();
};




struct CommState {
  std::shared_ptr<World> world;
  std::uint32_t comm_id = 0;
  std::vector<int> members;  // comm rank -> world rank
  int rank = 0;
  Algorithm algo = Algorithm::automatic;
  std::string algo_source;  // "INC_ALGO=ring" when set from the environment/options
  std::uint64_t segment_bytes = 0;
  // The default accumulator policy of calls without CallOptions::accumulate (INC_ACCUMULATE,
  // else automatic: widen in the switch, narrow on the hosts); every policy applies on the
  // host path too (coll::host_accumulate).
  Accumulate accumulate = Accumulate::automatic;
  // The switch tree of this communicator: the world's from INC_SWITCH/INC_TOPOLOGY, or any
  // communicator's from the controller (INC_CONTROLLER). `switch_configured` is the
  // process-wide fact.
  std::shared_ptr<api::IncPath> inc;
  bool switch_configured = false;
  std::string no_inc_reason;  // why `inc` is null although a switch is configured
  bool controller_tree = false;
  std::shared_ptr<api::TreeLease> lease;  // rank 0 of a controller tree: released with the communicator
  std::mutex mu;
  Report last;
  ~CommState() {
    if (controller_tree && inc && world && world->engine) world->engine->detach_switch(comm_id);
  }
};

struct RequestState {
  std::shared_ptr<CommState> comm;
  std::shared_ptr<coll::CollOp> op;
  std::vector<std::byte> temp;  // staging for in-place alltoall
  void* copy_out = nullptr;      // where temp's result goes, if used
  std::size_t copy_bytes = 0;
  bool finished = false;
  Report report;
  std::string selection;
  bool in_network = false;
  std::vector<std::pair<std::string, double>> predicted_us;  // automatic selection's weighing
  std::shared_ptr<edge::EdgeOp> edge_op;  // posted to the edge engine instead of `op`
  std::string wire_handler;               // the edge engine's conversion handler (Report::wire_handler)
  coll::CollectiveParams edge_params;     // what was posted to it (the report's hops)

  void complete() {
    if (finished) return;
    finished = true;
    if (copy_out && copy_bytes) std::memcpy(copy_out, temp.data(), copy_bytes);
    if (edge_op) {
      const auto& r = edge_op->result;
      report.coll = static_cast<Collective>(r.coll);
      report.seq = r.seq;
      report.algorithm = std::string(coll::name(static_cast<Algorithm>(r.algo)));
      report.offload = "edge";
      report.wire_handler = wire_handler;
      report.reason = selection;
      report.bytes_sent = r.bytes_sent;
      report.bytes_received = r.bytes_received;
      report.messages_sent = r.messages_sent;
      // The numerics of what the engine ran (the same schedule as the hosts' for the policy):
      // the hops from the policy, unless the job's conversion handler changed the wire format.
      report.accumulate = static_cast<Accumulate>(r.accumulate);
      report.overflow_events = r.overflow_events;
      report.events_counted = r.events_counted != 0;
      report.nonfinite_inputs = r.nonfinite_inputs;
      report.inexact_blocks = r.inexact_blocks;
      report.nonfinite_blocks = r.nonfinite_blocks;
      if (report.accumulate != Accumulate::automatic && !r.converted)
        report.hops = coll::host_hops(edge_params.dtype, edge_params.op, report.accumulate, report.coll);
      report.seconds = r.seconds;
    } else {
      const auto& info = op->info();
      report.coll = info.coll;
      report.seq = info.seq;
      report.algorithm = std::string(coll::name(info.algo));
      report.in_network = info.in_network;
      report.reason = info.selection;
      report.bytes_sent = info.bytes_sent;
      report.bytes_received = info.bytes_received;
      report.retransmissions = info.retransmissions;
      report.bytes_resent = info.bytes_resent;
      report.messages_sent = info.messages_sent;
      report.switch_operations = info.switch_operations;
      report.overflow = info.overflow;
      report.accumulate = info.accumulate;
      report.link_bytes_per_element = info.link_bytes_per_element;
      report.inexact_blocks = info.inexact_blocks;
      report.nonfinite_blocks = info.nonfinite_blocks;
      report.overflow_events = info.overflow_events;
      report.events_counted = info.events_counted;
      report.nonfinite_inputs = info.nonfinite_inputs;
      report.hops = info.hops;
      report.seconds = info.seconds;
    }
    report.predicted_us = predicted_us;
    std::lock_guard lk(comm->mu);
    comm->last = report;
  }
};

struct Call {
  Collective coll;
  const void* send;
  void* recv;
  std::size_t count;
  DataType dtype;
  ReduceOp op = ReduceOp::sum;
  int root = 0;
};

// Worlds of this process attached to a switch job. A second init() must not join the same job
// while the first is alive: the switch would take the new session for a restart of the job and
// fail the first communicator's in-network path.
std::atomic<int>& worlds_on_switch();

// CallOptions::algo / INC_ALGO to an algorithm; `where` names the source in the error
// (config for the environment, invalid_argument for a call's option).
Algorithm parse_algo_or_throw(const std::string& s, const char* where);

}  // namespace inc::detail
