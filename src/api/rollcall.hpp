// Start-up roll call through the rendezvous store: before the ranks connect, each one
// publishes who it is (rank, world size, process), so that ranks disagreeing on the world size
// or two processes given the same rank are named at once instead of a time-out's "ranks ...
// did not connect".
#pragma once

#include <chrono>
#include <cstdint>

#include "transport/store.hpp"

namespace inc::api {

// Generation `generation` of the job (the n-th init() of each rank against this store) waits
// until `world` ranks have arrived. Throws Error::Kind::config naming both sides when an
// arrival claims another world size, or when this rank already joined the previous
// generation from another process whose start-up is still incomplete (two processes with one
// rank: the per-rank init counter puts the second one a generation ahead); that generation's
// ranks then stop with the same message. Error::Kind::timeout naming the missing ranks if they
// do not all arrive within `timeout`.
void roll_call(transport::StoreClient& store, std::int64_t generation, int rank, int world,
               std::chrono::milliseconds timeout);

}  // namespace inc::api
