// The kernel variants (numerics/kernel_isa.hpp) compiled into this build and supported by this
// CPU, for tests that run each one explicitly.
#pragma once

#include <vector>

#include "numerics/kernel_isa.hpp"

namespace inc::numerics::testing {

inline std::vector<detail::KernelIsa> available_isas() {
  std::vector<detail::KernelIsa> v;
  for (detail::KernelIsa isa : detail::kAllKernelIsas)
    if (detail::kernel_isa_available(isa)) v.push_back(isa);
  return v;
}

}  // namespace inc::numerics::testing
