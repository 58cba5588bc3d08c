// Per-hop numerics of a reduction for the report (Report::hops; docs/NUMERICS.md, "Per-hop
// numerics"): what each hop of the data path carries, from the element type, the operation,
// the accumulator policy that ran and the members of each switch on this rank's path.
#pragma once

#include <cstdint>
#include <vector>

#include "inc/types.hpp"

namespace inc::coll {

// In the network. `members`: the members of the job at each switch from this rank's (index 0,
// as its join told it) up to the root; one entry when only the first switch is known (the hops
// above it are then not listed: "switch->hosts" is the way back from wherever the root is).
std::vector<NumericsHop> switch_hops(DataType t, ReduceOp op, Accumulate ran,
                                     const std::vector<std::uint32_t>& members, bool levels_known);
// The host algorithms (`ran`: coll::host_accumulate): narrow: every step is a host->host hop
// carrying the element type (or the reproducible limbs); wide: f32 on every step; widen: the
// first step in the element type, f32 partial sums, the allgather (allreduce) in the type.
std::vector<NumericsHop> host_hops(DataType t, ReduceOp op, Accumulate ran,
                                   Collective coll = Collective::allreduce);

}  // namespace inc::coll
