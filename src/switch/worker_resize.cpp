// A live resize on the worker's side (docs/PROTOCOL.md "Live resize", "Live resize of lanes"):
// a result announces where the stream's mapping ends; the worker issues its chunks up to there,
// drains, and joins every lane again for the new mapping (worker_join.cpp carries on there).
#include "src/switch/worker.hpp"
#include "src/switch/worker_internal.hpp"

namespace inc::sw {

using namespace detail;
using proto::Header;

void WorkerProtocol::note_resize(const Header& h, std::size_t lane) {
  // The lane chunk where the old mapping ends, the same on every lane of the job: global chunk
  // at x L (every lane's chunk `at`; one lane: chunk `at`).
  const std::uint32_t at = h.chunk + proto::resize_distance(h.aux);
  const std::uint64_t n = L();
  const std::int64_t ahead = proto::chunk_distance(at, wire_chunk(next_chunk_));
  if (ahead < 0 || (ahead == 0 && next_chunk_ % n != 0)) {  // we sent chunks past it
    fail(WorkerErrorKind::protocol,
         "switch " + lanes_[lane].ep.str() + " announced a live resize at lane chunk " + std::to_string(at) +
             ", behind chunk " + std::to_string(next_chunk_) + " of the stream already sent",
         label_for_errors());
    return;
  }
  const std::uint64_t boundary = (next_chunk_ / n + std::uint64_t(ahead)) * n;
  if (resize_at_ && *resize_at_ != boundary) {
    fail(WorkerErrorKind::protocol,
         "switch " + lanes_[lane].ep.str() + " announced a live resize at chunk " + std::to_string(boundary) +
             " of the stream, another lane at chunk " + std::to_string(*resize_at_) +
             ": the switch's lanes disagree on the boundary",
         label_for_errors());
    return;
  }
  resize_at_ = boundary;
}

bool WorkerProtocol::at_resize_boundary(Nanos now) {
  if (!resize_at_ || next_chunk_ != *resize_at_) return false;
  // The old mapping ends here. Once every chunk before it completed (we hold all its results,
  // so the switch may drop them), join again for the new one.
  if (inflight_ == 0 && lost_q_.empty()) {
    rejoin_ = true;
    joined_ = false;
    begin_join(now);
  }
  return true;
}

}  // namespace inc::sw
