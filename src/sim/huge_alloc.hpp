// Container of the simulator's large per-op arrays.
//
// Measured at 1,024 ranks (4.2 M ops): with the event loop's step-major, one-record-per-op
// layout (engine.cpp) 2 MiB transparent huge pages (an aligned allocator + MADV_HUGEPAGE) no
// longer speed the loop up (0.69-0.78 s either way) and make building the program slower
// (2.8-3.1 s instead of 1.9-2.1 s: the kernel compacts and clears huge pages on first touch), so
// plain vectors are used. The alias keeps the choice in one place.
#pragma once

#include <vector>

namespace inc::sim {

template <class T>
using BigVec = std::vector<T>;

}  // namespace inc::sim
