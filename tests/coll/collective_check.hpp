// Runs a whole collective through build_schedules + run_local on generated data and checks the
// result against a reference: exact for integers (two's-complement wrap-around for sum/prod),
// long double for floating point with the bound stated in check_reduced().
#pragma once

#include <cstdint>
#include <string>

#include "coll/local_executor.hpp"
#include "coll/schedule.hpp"

namespace inc::coll::testing {

struct Case {
  Collective coll = Collective::allreduce;
  Algorithm algo = Algorithm::automatic;
  int nranks = 1;
  std::uint64_t count = 0;
  DataType dtype = DataType::i32;
  ReduceOp op = ReduceOp::sum;
  int root = 0;
  bool in_place = false;
  std::uint64_t segment_bytes = 0;
  LocalRunOptions run;  // seed, rendezvous, ordered channels
};

std::string describe(const Case& c);

// The executor mode for variant v: eager, rendezvous, ordered, rendezvous + ordered.
LocalRunOptions mode(std::uint64_t seed, int v);

// Builds, runs and verifies; returns "" on success, otherwise what went wrong (with the case).
std::string run_and_check(const Case& c);

}  // namespace inc::coll::testing
