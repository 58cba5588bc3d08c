// Test helper: run the reduction kernel of a one-byte type (fp8, i4) for every op, on every
// kernel variant this CPU has, over all 65536 pairs of bytes (a = i & 0xff, b = i >> 8).
#pragma once

#include <cstdint>
#include <vector>

#include "numerics/kernel_isa.hpp"

namespace inc::numerics::test {

// check(isa, op, a, b, out) is called once per variant and op with the three 65536-byte arrays.
template <class Check>
void for_all_byte_pairs(DataType t, Check&& check) {
  std::vector<std::uint8_t> a(65536), b(65536), out(65536);
  for (unsigned i = 0; i < 65536; ++i) {
    a[i] = static_cast<std::uint8_t>(i);
    b[i] = static_cast<std::uint8_t>(i >> 8);
  }
  for (const auto isa : detail::kAllKernelIsas) {
    if (!detail::kernel_isa_available(isa)) continue;
    for (const ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::prod, ReduceOp::min, ReduceOp::max}) {
      detail::reduce_with(isa, t, op, out.data(), a.data(), b.data(), out.size());
      check(isa, op, a, b, out);
    }
  }
}

}  // namespace inc::numerics::test
