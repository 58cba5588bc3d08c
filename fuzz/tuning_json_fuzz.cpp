// libFuzzer target for tuning files (INC_TUNING=FILE, `inc tune`): CostTable::from_json.
// Invariants: the parse succeeds or throws inc::Error(config); a parsed table written again
// (to_json) parses again, and from then on write -> parse -> write is the identity (the
// writer rounds times to 1 ns, so the first write may differ from the input); every
// prediction of a measured path is a number >= 0 (not NaN; +inf only past the double range).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "api/tuning.hpp"
#include "fuzz/fuzz_check.hpp"

using inc::api::CostTable;
using inc::fuzz::fail;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(inc::fuzz::text_of(data, size));
  CostTable t;
  if (!inc::fuzz::parses([&] { t = CostTable::from_json(text, "fuzz.json"); })) return 0;
  const std::string once = t.to_json();
  CostTable again;
  if (!inc::fuzz::parses([&] { again = CostTable::from_json(once, "written.json"); }))
    fail("the written table does not parse", once);
  const std::string twice = again.to_json();
  CostTable third = CostTable::from_json(twice, "written.json");
  if (third.to_json() != twice) fail("write -> parse -> write changed the table", twice);
  if (again.nranks != t.nranks || again.switch_path != t.switch_path || again.dtype != t.dtype ||
      again.created != t.created)
    fail("the header did not survive write -> parse", once);
  for (int ci = 0; ci <= static_cast<int>(inc::Collective::barrier); ++ci) {
    const auto c = static_cast<inc::Collective>(ci);
    if (t.algorithms(c) != again.algorithms(c)) fail("the measured paths changed in write -> parse", once);
    for (auto a : again.algorithms(c))
      for (std::uint64_t bytes : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{4096}, std::uint64_t{1} << 40,
                                  ~std::uint64_t{0}}) {
        auto p = again.predict(c, a, bytes);
        if (!p || std::isnan(*p) || *p < 0) fail("prediction missing, NaN or < 0", once);
      }
  }
  return 0;
}
