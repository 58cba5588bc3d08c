#include "api/call_checks.hpp"

#include <fmt/format.h>

#include <cstdint>

namespace inc::api {

// Send and receive buffers may be the same memory only in the in-place layout of each call
// (same pointer; for reduce_scatter and allgather this rank's block of the large buffer); any
// other overlap would be read and written in an order that differs by algorithm and rank.
void check_buffer_overlap(Collective coll, const void* send, const void* recv, std::size_t count,
                          DataType dtype, int root, int rank, int nranks) {
  if (count == 0 || coll == Collective::barrier || !send || !recv) return;
  const int p = nranks;
  const std::uint64_t block = count * size_of(dtype);
  const auto sa = reinterpret_cast<std::uintptr_t>(send), ra = reinterpret_cast<std::uintptr_t>(recv);
  std::uint64_t send_bytes = block, recv_bytes = block;
  std::uintptr_t in_place = ra;  // where send must be to be the in-place layout
  switch (coll) {
    case Collective::reduce_scatter:
      send_bytes = block * static_cast<std::uint64_t>(p);
      in_place = ra - static_cast<std::uintptr_t>(rank) * block;
      break;
    case Collective::allgather:
      recv_bytes = block * static_cast<std::uint64_t>(p);
      in_place = ra + static_cast<std::uintptr_t>(rank) * block;
      break;
    case Collective::broadcast:
      if (rank != root) return;  // send is not read
      break;
    case Collective::alltoall:
      send_bytes = recv_bytes = block * static_cast<std::uint64_t>(p);
      break;
    default:
      break;
  }
  const bool overlap = sa < ra + recv_bytes && ra < sa + send_bytes;
  if (!overlap || sa == in_place) return;
  const char* layout = coll == Collective::reduce_scatter ? "recv = send + rank * recv_count elements"
                       : coll == Collective::allgather    ? "send = recv + rank * send_count elements"
                                                            : "send == recv";
  throw Error(Error::Kind::invalid_argument,
              fmt::format("{}: send buffer ({} B at {}) and recv buffer ({} B at {}) overlap but are "
                          "not the in-place layout ({}); use separate buffers or exactly that layout",
                          name(coll), send_bytes, send, recv_bytes,
                          recv, layout));
}


}  // namespace inc::api
