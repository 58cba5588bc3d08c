// The exact expected result of a collective that an Edge-INC engine ran with a lossy wire
// handler (INC_EDGE_HANDLER: bf16, f16, int8, e4m3, e5m2, the MX formats, bfp16; docs/EDGE.md):
// every rank's schedule (coll::build_schedule, the algorithm that ran) executed here for all
// ranks, with every send's payload rounded by the reference of the handler's format
// (src/numerics' scalar encoders and decoders, per message, as the engine's handler encodes
// each send) and the receive-reduces in the collective's type: the same rounding points as the
// engines, so a correct run equals it bit for bit.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "coll/schedule.hpp"

namespace inc::tools {

// True if the engine's handler `h` converts data of type t (then it rounds; docs/EDGE.md).
bool handler_converts(const std::string& h, DataType t);

// One message's values after handler h's wire format: encoded and decoded by the reference.
// Empty h or a type h does not convert: unchanged. Returns false for an unknown handler.
bool quantise_message(const std::string& h, DataType t, std::byte* data, std::size_t bytes);

// Rank `rank`'s result region (coll::result_region) of the collective `proto` (any rank field)
// over the ranks' `inputs` (each coll::input_bytes long), with every message through handler
// h. Returns "" with `result` filled, or why it cannot (an in-network or reproducible schedule,
// an unknown handler, a schedule that does not complete).
std::string quantised_reference(const coll::CollectiveParams& proto, const std::string& h,
                                const std::vector<std::vector<std::byte>>& inputs, int rank,
                                std::vector<std::byte>& result);

}  // namespace inc::tools
