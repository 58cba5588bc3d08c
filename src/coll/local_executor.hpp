// The in-memory executor of a whole collective: runs the schedules of ALL ranks in one process
// on real buffers. It is the correctness oracle for schedules: it honours the inferred
// dependencies and the FIFO matching rule, picks among ready ops at random (seeded) so that
// different legal interleavings are exercised, can make sends rendezvous and channels ordered
// (the strictest executors a schedule may meet), emulates Core-INC switch operations exactly,
// and reports deadlocks and mismatched sends/receives with the ops involved.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "coll/schedule.hpp"

namespace inc::coll {

struct LocalBuffers {
  std::vector<std::byte> input;   // unused in place (BufferId::input then names the output)
  std::vector<std::byte> output;
};

struct LocalRunOptions {
  std::uint64_t seed = 1;  // picks the interleaving; the same seed replays the same run
  // A send completes only together with its matching receive (both ready), instead of as soon
  // as it is ready (eager, with the message buffered).
  bool rendezvous = false;
  // The k-th send from a to b completes only after the (k-1)-th (a stream transport).
  bool ordered_channels = false;
  bool record_trace = false;
  // Applied to every message's payload as it is sent (a wire format's rounding: `inc bench`'s
  // reference of a lossy Edge-INC handler, tools/bench_quant.cpp); none by default.
  std::function<void(std::byte* data, std::size_t bytes)> wire;
};

struct LocalRunResult {
  std::uint64_t ops = 0;            // ops executed, all ranks
  std::uint64_t messages = 0;       // point-to-point messages
  std::uint64_t message_bytes = 0;
  std::uint64_t switch_ops = 0;     // Core-INC operations (one per group of inc ops)
  // Numeric events of the hosts' adds and roundings, all ranks (as coll::Engine counts each
  // rank's: recv_reduce, reduce, a wide accumulator's narrow; not the emulated switch's).
  std::uint64_t overflow_events = 0;
  // (rank, op index) in completion order, when record_trace.
  std::vector<std::pair<int, std::uint32_t>> trace;
};

// The schedules of ranks 0..p.nranks-1 (p.rank is ignored).
std::vector<RankSchedule> build_schedules(CollectiveParams p);

// Runs schedules[r] on buffers[r] for every rank. `p` supplies nranks, dtype, op and in_place
// (and names the collective in errors). Scratch buffers are allocated here, filled with a
// garbage pattern. Checks, before running: dependencies present, regions within their buffers
// and whole elements, no write to the input out of place, peers in range, every channel's sends
// and receives pairing up in number and size, inc ops agreeing across ranks. Throws inc::Error
// (mismatch for pairing errors, internal for a deadlock, invalid_argument otherwise) naming the
// rank, op and peer. ReduceOp::avg combines as sum (divide afterwards, see result_region).
LocalRunResult run_local(const CollectiveParams& p, const std::vector<RankSchedule>& schedules,
                         std::vector<LocalBuffers>& buffers, const LocalRunOptions& options = {});

}  // namespace inc::coll
