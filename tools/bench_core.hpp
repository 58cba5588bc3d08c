// The collective benchmark shared by `inc bench` and `inc demo`: nccl-tests style
// measurement of one collective at one size, with a correctness check.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "inc/inc.hpp"

namespace inc::tools {

struct BenchCase {
  Collective coll = Collective::allreduce;
  std::string algo;  // "" = communicator default / automatic
  DataType dtype = DataType::f32;
  ReduceOp op = ReduceOp::sum;
  int root = 0;
  bool in_place = false;
  std::uint64_t bytes = 0;  // nccl-tests "size": the larger of the send/recv buffer
  int iters = 20;
  int warmup = 5;
  bool check = true;
};

struct BenchResult {
  BenchCase c;
  std::uint64_t count = 0;  // elements per rank as the collective's count argument
  std::string algorithm;    // what actually ran
  std::string reason;       // the report's reason for it (path, fallback, switch)
  bool in_network = false;
  double time_us = 0;       // average per iteration, slowest rank
  double median_us = 0;     // median of the timed calls (check mode; else the average), slowest rank
  // This process's CPU time (every thread, user + system: CLOCK_PROCESS_CPUTIME_ID) per timed
  // call, mean over the ranks: the host's work for one call, polling included unless
  // INC_SPIN_US=0 (docs/USAGE.md, `inc bench --cpu`).
  double cpu_us = 0;
  double algbw = 0;         // GB/s
  double busbw = 0;         // GB/s
  int correct = -1;         // 1 verified, 0 wrong, -1 not checked
  std::uint64_t bytes_sent = 0;  // payload this rank sent in one run (its report)
  std::uint64_t messages_sent = 0;      // its point-to-point messages in one run (its report)
  std::uint64_t switch_operations = 0;  // its switch operations in one run (its report)
  std::uint64_t wrong_elements = 0;
  // The numerics of its report (rank 0's; `--report`): overflow events, whether they were
  // counted, this rank's non-finite inputs, and per hop width and bytes per element.
  std::uint64_t overflow_events = 0;
  bool events_counted = true;
  std::uint64_t nonfinite_inputs = 0;
  std::vector<NumericsHop> hops;
};

// nccl-tests' bus-bandwidth factor for a collective on n ranks.
double bus_factor(Collective c, int n);
// Elements passed as `count` for a given size in bytes (per nccl-tests conventions).
std::uint64_t count_for_bytes(Collective c, std::uint64_t bytes, DataType t, int n);

// Collective over `comm`: every rank must call it with the same case.
BenchResult run_case(Communicator& comm, const BenchCase& c);

}  // namespace inc::tools
