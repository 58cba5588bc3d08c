// `inc numerics` (tools/numerics.cpp): the paper's int4 examples and the accumulator sweep.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "coll/schedule.hpp"
#include "inc/types.hpp"

namespace inc::tools {

int numerics_examples();  // tools/numerics_examples.cpp

struct SweepOptions {
  std::vector<int> members = {2, 4, 8, 16, 32, 64};
  std::size_t elements = 4096;  // per member (even: i4 packs two per byte)
  std::uint64_t seed = 9;
  std::string out_dir;          // CSV (and plots) written here when set
  bool plot = true;
};
int numerics_sweep(const SweepOptions& o);  // tools/numerics_sweep.cpp

// The host algorithms x host accumulator policies (tools/numerics_sweep_hosts.cpp): part of
// numerics_sweep's output (a second table, numerics_sweep_hosts.csv and its plots).
struct HostSweepRow {
  DataType t;
  Collective coll;
  coll::Algorithm algo;
  Accumulate policy;
  int members;  // ranks
  double mean_rel_err, max_rel_err, mean_norm_err, overflow_rate, events_per_element, bytes_per_element_per_rank;
};
std::vector<HostSweepRow> host_sweep(const SweepOptions& o);
// A PNG/SVG of `series` pairs of columns of the CSV `data` (x in column 1; pair i's name in
// column 2 + 2i, its values in column first_column + 2i) against log2 x (log_y: log y too).
void plot_column_pairs(const std::string& out, const std::string& title, const std::string& xlabel,
                       const std::string& ylabel, bool log_y, const std::string& data, int series, int first_column);
void print_host_sweep(const SweepOptions& o, const std::vector<HostSweepRow>& rows);

}  // namespace inc::tools
