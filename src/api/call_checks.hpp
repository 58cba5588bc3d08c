// Checks of a call's arguments that need no communicator state.
#pragma once

#include <cstddef>

#include "inc/types.hpp"

namespace inc::api {

// Send and receive buffers may be the same memory only in the in-place layout of each call;
// throws Error::Kind::invalid_argument naming both buffers for any other overlap.
void check_buffer_overlap(Collective coll, const void* send, const void* recv, std::size_t count,
                          DataType dtype, int root, int rank, int nranks);

}  // namespace inc::api
