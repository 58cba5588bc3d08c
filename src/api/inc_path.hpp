// The Core-INC path of a communicator, as configuration: where this rank attaches to its switch
// tree (from the environment), the worker's settings (deadlines from INC_TIMEOUT), and whether a
// collective call can run through the switch or must run on the hosts, with the reason. The
// engine (src/coll/executor_inc.cpp) runs the in-network schedules.
//
// Configuration (environment; `inc launch --switch` / `--topology` set it):
//   INC_SWITCH=host:port        the switch this rank attaches to; member id = rank
//   INC_TOPOLOGY=FILE           a topology file (src/switch/topology.hpp); with INC_SWITCH_JOB
//                               it gives every rank its leaf switch and member id
//   INC_SWITCH_JOB=N            the job id admitted at the switches (default 1)
//   INC_SWITCH_NUMERICS=float|fixed   deprecated: fixed is INC_ACCUMULATE=fixed (f32 sums as
//                               i32 fixed point with a shared exponent per block, order-
//                               independent in the switch); float the default
//   INC_ACCUMULATE=narrow|widen|wide|reproducible|fixed   f16/bf16 sums in the network: the
//                               communicator's default accumulator policy (CallOptions::accumulate
//                               per call); default widen (docs/NUMERICS.md "In the switch");
//                               reproducible: f32/f16/bf16 sums with the same bits on every path,
//                               host algorithms included ("Reproducible sums"); fixed: see
//                               INC_SWITCH_NUMERICS
//   INC_SWITCH_WINDOW=N         chunks in flight: 0 (default) congestion-controlled, N > 0 a
//                               fixed window (experiments; capped by the job's slots)
//   INC_FAULT_LOSS / _DUP / _REORDER / _SEED   seeded faults injected into this rank's
//                               outgoing datagrams (tests on real sockets)
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "coll/executor.hpp"
#include "inc/types.hpp"
#include "transport/socket.hpp"
#include "src/proto/auth.hpp"
#include "src/switch/common.hpp"

namespace inc::api {

// INC_ACCUMULATE: the communicator's default accumulator policy (else automatic: widen in the
// switch, narrow on the hosts). Throws Error(config) for a bad value.
Accumulate accumulate_setting(const transport::EnvLookup& env);

struct IncPlan {
  bool ok = false;
  std::string why;  // ok: how it runs ("in-network aggregation, f32 adds, via switch ...");
                    // not ok: why the host path is used instead
};

// A rank's place in a tree the controller built (src/api/controller_tree.cpp).
struct TreeAttachment {
  std::uint32_t job = 0;
  sw::Endpoint switch_ep;
  std::uint16_t member = 0;
  proto::auth::Key key{};
  std::string where;  // "switch leaf0 (127.0.0.1:7102), job 5, member 1, tree root spine, from the controller"
};

class IncPath {
 public:
  // nullptr if no switch is configured. Throws Error(config) for a bad configuration.
  // `timeout` (INC_TIMEOUT) bounds the worker's join and its waits for progress.
  static std::unique_ptr<IncPath> from_env(const transport::EnvLookup& env, int rank, int nranks,
                                           std::uint64_t session, std::chrono::milliseconds timeout);

  // The same for a tree from the controller (the job's key always: controller trees are keyed).
  static std::unique_ptr<IncPath> from_grant(const transport::EnvLookup& env, int rank, std::uint64_t session,
                                             std::chrono::milliseconds timeout, const TreeAttachment& t);

  // Can this call run through the switch? (Same answer on every rank for the same call.)
  // `acc`: the accumulator policy of the call (never automatic: the caller resolves it).
  IncPlan plan(Collective coll, DataType t, ReduceOp op, Accumulate acc = Accumulate::widen) const;
  // INC_ACCUMULATE, else widen.
  Accumulate accumulate_default() const { return accumulate_; }

  // What the engine needs to attach this rank to the switch tree.
  const coll::SwitchAttachment& attachment() const { return att_; }
  const std::string& describe() const { return att_.where; }

 private:
  IncPath() = default;
  coll::SwitchAttachment att_;
  Accumulate accumulate_ = Accumulate::widen;
};

}  // namespace inc::api
