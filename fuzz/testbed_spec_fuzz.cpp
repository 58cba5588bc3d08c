// libFuzzer target for testbed topology files (`inc testbed --file`, docs/TESTBED.md):
// parse_spec_text, then build_spec (the checks and derived values).
// Invariants: each step succeeds or throws inc::Error(config) with a message; an accepted
// spec is within the documented limits.
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_check.hpp"
#include "testbed/spec.hpp"

using inc::fuzz::fail;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  inc::testbed::SpecInput in;
  if (!inc::fuzz::parses([&] { in = inc::testbed::parse_spec_text(inc::fuzz::text_of(data, size), "tb.toml"); }))
    return 0;
  inc::testbed::Spec spec;
  if (!inc::fuzz::parses([&] { spec = inc::testbed::build_spec(in); })) return 0;
  if (spec.leaves.empty() || spec.leaves.size() > static_cast<std::size_t>(inc::testbed::kMaxLeaves))
    fail("accepted spec: leaf count out of range");
  if (spec.ranks_per_host < 1 || spec.ranks_per_host > inc::testbed::kMaxRanksPerHost)
    fail("accepted spec: ranks per host out of range");
  return 0;
}
