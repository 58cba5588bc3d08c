// The Core-INC path of a communicator: this rank's attachment to a switch tree (one UDP
// socket + the worker protocol of src/switch), and the mapping from a collective call to a
// switch operation, or the reason it must run on the hosts instead.
//
// Configuration (environment; `inc launch --switch` / `--topology` set it):
//   INC_SWITCH=host:port        the switch this rank attaches to; member id = rank
//   INC_TOPOLOGY=FILE           a topology file (src/switch/topology.hpp); with INC_SWITCH_JOB
//                               it gives every rank its leaf switch and member id
//   INC_SWITCH_JOB=N            the job id admitted at the switches (default 1)
//   INC_SWITCH_NUMERICS=float|fixed   f32 sums as switch f32 adds (arrival-order dependent) or
//                               as i32 fixed point with a shared exponent per block
//                               (order-independent, bitwise reproducible); default float
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "inc/types.hpp"
#include "transport/socket.hpp"

namespace inc::api {

struct IncPlan {
  bool ok = false;
  std::string why;  // ok: how it runs ("switch 127.0.0.1:7710, job 1, member 3, f32 adds");
                    // not ok: why the host path is used instead
};

struct IncResult {
  std::uint64_t bytes_sent = 0, bytes_received = 0;
  std::uint64_t retransmissions = 0;
  bool overflow = false;  // i32: a partial sum wrapped around
};

class IncPath {
 public:
  // nullptr if no switch is configured. Throws Error(config) for a bad configuration.
  static std::unique_ptr<IncPath> from_env(const transport::EnvLookup& env, int rank, int nranks,
                                           std::uint64_t session);
  ~IncPath();

  // Can this call run through the switch? (Same answer on every rank for the same call.)
  IncPlan plan(Collective coll, DataType t, ReduceOp op) const;

  // Runs one collective through the switch tree, blocking until it completes. Buffers follow
  // the Communicator's conventions (out-of-place; reduce_scatter: send holds nranks x count).
  // Throws Error(network) naming the switch when the switch path fails (restart, time-out).
  IncResult run(Collective coll, const void* send, void* recv, std::uint64_t count, DataType t,
                ReduceOp op, int root);

  // A barrier through the switch tree: does the switch answer for this job? Every rank calls
  // it at start-up; the Communicator then agrees across ranks (see Communicator::init).
  bool probe(std::string& why);

  const std::string& describe() const { return where_; }

 private:
  struct Impl;
  explicit IncPath(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  std::string where_;
};

}  // namespace inc::api
