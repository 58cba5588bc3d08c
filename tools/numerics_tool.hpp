// `inc numerics` (tools/numerics.cpp): the paper's int4 examples and the accumulator sweep.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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

}  // namespace inc::tools
