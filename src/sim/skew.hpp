// Start skew (NetParams::start_skew): the ranks of a job start a collective at different times,
// as the processes of the emulated testbed leave inc bench's barrier over a millisecond or more
// (8 processes on 2 cores). Each draw gives every rank of every job an offset uniform in
// [0, S], S = NetParams::start_skew_s(the job's bytes), from a seeded generator (the same seed
// and draw give the same offsets on every platform), and simulates the whole scenario; the
// figure reported per job is inc bench's: the most, over ranks, of a rank's mean time from its
// start to its last op's end over the draws (tools/bench_core.cpp, check mode). docs/SIMULATOR.md,
// "Start skew".
#pragma once

#include <cstdint>
#include <vector>

#include "sim/engine.hpp"
#include "sim/topology.hpp"

namespace inc::sim {

// Offsets (seconds after the job's start) of `ranks` ranks of job `job` in draw `draw`: uniform
// in [0, width_s], from a generator seeded by (seed, draw, job) alone.
std::vector<double> draw_start_offsets(int ranks, double width_s, std::uint64_t seed, int draw, int job);

struct SkewedJob {
  double width_s = 0;       // S of this job's offsets
  double time_s = 0;        // most over ranks of the rank's mean (end - start) over the draws
  int slowest_rank = 0;     // the rank with that mean
  double mean_rank_s = 0;   // mean over ranks and draws of (end - start)
  double span_s = 0;        // mean over draws of (last rank's end - first rank's start)
};

struct SkewedRun {
  SimResult first;               // draw 0's result (links, collisions, events of one run)
  std::vector<SkewedJob> jobs;   // per job, over the draws
  int draws = 0;
  std::uint64_t events = 0;      // over every draw
  double wall_s = 0;             // over every draw
};

// Simulates the jobs opt.start_skew_draws times with drawn per-rank starts (opt.np's skew; the
// jobs' own rank_start_s are replaced). `bytes[j]` is job j's collective size, S's argument.
SkewedRun run_skewed(const Topology& topo, const SimOptions& opt, const std::vector<JobSpec>& jobs,
                     const std::vector<double>& bytes);

}  // namespace inc::sim
