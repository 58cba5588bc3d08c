// A simulator scenario: a topology, network parameters and jobs with placements, from a TOML
// file (examples/sim/*.toml) or from command-line flags. Loading validates everything and names
// file, line and key on error.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/engine.hpp"
#include "sim/topology.hpp"

namespace inc::sim {

struct JobDesc {
  std::string name;
  Collective coll = Collective::allreduce;
  coll::Algorithm algo = coll::Algorithm::ring;
  int ranks = 2;
  std::uint64_t bytes = 1 << 20;  // collective size, as in MODEL.md
  DataType dtype = DataType::f32;
  // The accumulator policy (host algorithms: f16/bf16/fp8/MX sums under widen/wide move f32
  // partial sums; coll::host_accumulate); `accumulate = "wide"` in a scenario.
  Accumulate accumulate = Accumulate::automatic;
  std::string placement = "contiguous";  // contiguous | random | list
  std::vector<int> hosts;                 // placement = list
  bool edge = false;
  double start_s = 0;
  std::uint64_t segment_bytes = 0;
  int root = 0;
  // Another stream of an earlier job (`stream_of = "name"`): the same ranks on the same hosts,
  // running concurrently with it (FSDP's Reduce_scatter next to the next layer's Allgather).
  int stream_of = -1;
};

struct Scenario {
  TopoSpec topo;
  SimOptions opt;
  std::vector<JobDesc> jobs;
  std::uint64_t seed = 1;
  std::string source = "(command line)";
};

Scenario load_scenario(const std::string& path);
Scenario parse_scenario(std::string_view text, const std::string& name);

// Places every job on the topology (contiguous jobs take the lowest free hosts, random jobs a
// seeded random subset of what is left, list jobs their hosts) and returns the engine's specs.
// Throws inc::Error(config) naming the job if hosts run out or collide.
std::vector<JobSpec> place_jobs(const Scenario& s, const Topology& topo);

}  // namespace inc::sim
