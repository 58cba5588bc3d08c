// A communicator's tree from `inc controller` (docs/CONTROLLER.md). Configuration (environment):
//   INC_CONTROLLER=host:port     ask this controller for a tree per communicator (init, split, dup)
//   INC_CONTROL_KEY_FILE=FILE    the cluster's control secret (a key file, mode 600)
//   INC_CONTROL_HOST=NAME        this rank's host as the controller's fabric names it (default:
//                                the host name); "{rank}" is replaced by the world rank (tests on
//                                one machine put each rank on a host of its own)
//   INC_CONTROL_SLOTS=N          slots to ask for (default: the controller's)
// Rank 0 of the communicator asks, once; the answer reaches the other ranks over the
// communicator's own connections. Rank 0 then keeps the lease with a small thread (one renewal
// every third of the lease) and releases the tree when the communicator is destroyed. A
// controller that cannot be reached, or that gives no tree, puts the communicator on the hosts
// with the reason in its reports (and one line on stderr from rank 0).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "api/inc_path.hpp"
#include "coll/executor.hpp"
#include "transport/socket.hpp"

namespace inc::api {

class TreeLease;  // rank 0's hold on the tree (heartbeat thread, release on destruction)

struct ControllerTree {
  std::shared_ptr<IncPath> inc;     // null: no tree (why_not)
  std::shared_ptr<TreeLease> lease;  // rank 0 only
  std::string why_not;
};

// How long the controller may keep a tree request waiting for slots that running jobs still
// hold (TreeRequest::wait_ms): the job's timeout (INC_TIMEOUT) less a tenth, at most 1 s, for
// the answer to arrive before the rank gives up on it.
std::uint32_t tree_wait_ms(std::chrono::milliseconds timeout);

// Is a controller configured? (INC_CONTROLLER set.) Throws Error(config) when its settings are bad.
bool controller_configured(const transport::EnvLookup& env);

// Collective over communicator `comm_id` of the engine (every rank calls it).
ControllerTree request_controller_tree(coll::Engine& engine, std::uint32_t comm_id, int rank, int nranks,
                                       int world_rank, const transport::EnvLookup& env,
                                       std::chrono::milliseconds timeout, const std::string& label);

}  // namespace inc::api
