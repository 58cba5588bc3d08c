// Internal to inc_coll: one communicator's attachment to its switch tree, as the Engine
// drives it (executor_inc.cpp).
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <unordered_map>
#include <utility>

#include "coll/executor.hpp"

namespace inc::coll {

struct SwitchLink {
  SwitchLink(std::uint32_t comm, const SwitchAttachment& a)
      : comm_id(comm),
        cfg(a),
        worker(a.worker),
        // All interfaces: the switch may sit in another network namespace or host.
        port(sw::Endpoint::ipv4(0, 0), 32) {
    if (a.faults.enabled()) inj.emplace(a.faults);
  }
  sw::FaultInjector* injector() { return inj ? &*inj : nullptr; }

  std::uint32_t comm_id;
  SwitchAttachment cfg;
  sw::WorkerProtocol worker;
  sw::UdpPort port;
  std::optional<sw::FaultInjector> inj;
  // Collectives (uids) whose inc ops are not all submitted yet, in sequence order: only the
  // front one may submit, so every rank hands the worker the same op stream.
  std::deque<std::uint64_t> order;
  // Worker op id -> (collective uid, op index).
  std::unordered_map<std::uint64_t, std::pair<std::uint64_t, std::uint32_t>> pending;
};

}  // namespace inc::coll
