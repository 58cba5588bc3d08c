// A collective algorithm written once, as a schedule: for one rank, a program-ordered list of
// operations on byte regions of three logical buffers. The runtime executor runs it on real
// buffers over a transport, the simulator runs it on a network model, and the analytical model
// reads its step and byte counts (ENGINEERING.md section 2).
//
// Ordering rules, shared by every executor:
//  * Dependencies are not written by hand: `infer_dependencies` derives them from the regions
//    (read-after-write, write-after-read, write-after-write). Ops with no hazard between them
//    run concurrently; this is what makes a segmented ring or chain pipelined.
//  * Matching (point-to-point): the k-th `send` from rank a to rank b is received by the k-th `recv` or
//    `recv_reduce` that rank b posts with peer a. Sizes must agree (executors check it).
//  * A send is complete when its source may be overwritten. Schedules do not rely on sends
//    completing before the matching receive is posted: every schedule built here also runs
//    when a send completes only together with its receive (rendezvous), and when the sends
//    on one (sender, receiver) pair complete in program order (run_local checks all of these).
//  * Regions with bytes == 0 have no hazards; use `Op::fence` to order ops that move no data
//    (barrier rounds).
//  * In-place (`CollectiveParams::in_place`): the schedule uses BufferId::output only, and that
//    buffer is the one in-place buffer, of input_bytes(p) == output_bytes(p) bytes, laid out as
//    in NCCL: reduce_scatter: nranks x count (the caller's send buffer; this rank's shard at
//    offset rank x count receives the result); allgather: nranks x count (this rank's
//    contribution is already at offset rank x count); others: the buffer itself.
//  * ReduceOp::avg is combined as sum; the caller divides result_region(p) by nranks afterwards
//    (allreduce and reduce_scatter only).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "inc/types.hpp"

namespace inc::coll {

enum class BufferId : std::uint8_t { input, output, scratch };

struct Region {
  BufferId buf = BufferId::output;
  std::uint64_t offset = 0;  // bytes
  std::uint64_t bytes = 0;
  friend bool operator==(const Region&, const Region&) = default;
};

enum class OpKind : std::uint8_t {
  send,         // send `src` to `peer`
  recv,         // receive from `peer` into `dst`
  recv_reduce,  // dst = src (op) received-from-peer; src may equal dst
  copy,         // dst = src (local)
  reduce,       // dst = dst (op) src (local)
  // Core-INC (issue 3). Every rank of the communicator issues the same sequence of inc ops;
  // the k-th inc op of all ranks forms one switch operation on the communicator's tree.
  inc_reduce,     // contribute src to the switch tree; the aggregate of all ranks' src lands in
                  // dst (dst.bytes == 0: this rank contributes but does not receive it).
                  // src and dst both empty on every rank: a synchronisation (barrier), one
                  // switch operation without data that completes once every rank issued it.
                  // (For sizes that are not elements, a raw copy is an inc_broadcast.)
  inc_broadcast,  // rank `peer` contributes src; the switch replicates it into every rank's dst
  inc_gather,     // every rank contributes src (the same size on every rank); every rank's dst
                  // (nranks x src.bytes) receives all of them in rank order. One switch
                  // operation for all blocks; through an adding switch, each rank's src placed
                  // in zeros and summed as wrap-around i32 words (x + 0 = x: exact bytes).
  // Local steps of a reproducible sum (Accumulate::reproducible, src/coll/reproducible.cpp;
  // the arithmetic is src/numerics/repro.hpp). Element `elem0` of the call is the first of src.
  repro_scan,    // dst (i32 pairs per block of the whole input) = the block exponents of src
  repro_encode,  // dst (2 i32 limbs per element) = src in fixed point at the agreed exponents aux
  repro_decode,  // dst (the call's type) = the limb sums of src rounded once, exponents aux
  // Local steps of a host sum with a wide accumulator (Accumulate::wide / widen on the hosts,
  // src/coll/widened.cpp): the call's narrow type <-> f32 (MX: 32 f32 values per block).
  widen,   // dst (f32) = src (the call's type) converted exactly
  narrow,  // dst (the call's type) = src (f32) rounded once (nearest-even; MX: encoded)
};
inline constexpr int kNumOpKinds = 13;
std::string_view name(OpKind k) noexcept;
// Point-to-point receives, and the ops that are one switch operation of the communicator.
inline constexpr bool is_recv(OpKind k) { return k == OpKind::recv || k == OpKind::recv_reduce; }
inline constexpr bool is_inc(OpKind k) {
  return k == OpKind::inc_reduce || k == OpKind::inc_broadcast || k == OpKind::inc_gather;
}

// The arithmetic of a recv_reduce, reduce or inc_reduce: the call's (dtype, op), the i32
// phases of a reproducible sum (the exponent pre-pass, the limbs), or the call's op on f32
// partial sums (a wide accumulator on the hosts).
enum class Arith : std::uint8_t { call, i32_max, i32_sum, f32 };

struct Op {
  OpKind kind = OpKind::send;
  std::int32_t peer = -1;  // rank within the communicator, for send/recv/recv_reduce
  Region src{};
  Region dst{};
  // Also wait for every earlier op of this rank (infer_dependencies adds the edges). Orders ops
  // that move no data, e.g. the rounds of a barrier.
  bool fence = false;
  Arith arith = Arith::call;
  Region aux{};             // repro_encode/repro_decode: the agreed block exponents (read)
  std::uint64_t elem0 = 0;  // repro_*: the call's element index of src's (decode: dst's) first
};

// The element type and operation an op combines with (Op::arith over the call's).
struct OpArithmetic {
  DataType dtype;
  ReduceOp op;
};
inline OpArithmetic arithmetic(const Op& o, DataType call_dtype, ReduceOp call_op) noexcept {
  switch (o.arith) {
    case Arith::i32_max: return {DataType::i32, ReduceOp::max};
    case Arith::i32_sum: return {DataType::i32, ReduceOp::sum};
    case Arith::f32: return {DataType::f32, call_op};
    case Arith::call: break;
  }
  return {call_dtype, call_op};
}

// "send to 3 output[64,+128)", for error messages.
std::string to_string(const Op& op);

// Which algorithm produced a schedule. `automatic` is resolved by `select_algorithm`.
enum class Algorithm : std::uint8_t {
  automatic,
  ring,                // pipelined ring (allreduce, reduce_scatter, allgather)
  recursive_doubling,  // allreduce, allgather
  rabenseifner,        // allreduce: recursive-halving reduce-scatter + recursive-doubling allgather
  binomial_tree,       // broadcast
  pipelined_chain,     // broadcast
  pairwise,            // alltoall
  dissemination,       // barrier
  inc,                 // Core-INC switch aggregation (issue 3)
};
inline constexpr int kNumAlgorithms = 9;

std::string_view name(Algorithm a) noexcept;
// Accepts the names above and aliases ("rd", "rabenseifner", "tree", "chain", "auto").
bool parse_algorithm(std::string_view s, Algorithm& out) noexcept;

struct CollectiveParams {
  Collective coll = Collective::allreduce;
  Algorithm algo = Algorithm::automatic;
  int nranks = 1;
  int rank = 0;
  // Element count with NCCL semantics: allreduce/broadcast: elements of the buffer;
  // reduce_scatter: elements of each rank's output shard (input is nranks x count);
  // allgather: elements each rank contributes (output is nranks x count);
  // alltoall: elements sent to each peer (buffers are nranks x count).
  std::uint64_t count = 0;
  DataType dtype = DataType::f32;
  ReduceOp op = ReduceOp::sum;
  int root = 0;  // broadcast
  bool in_place = false;
  // Largest message the schedule issues; larger transfers are segmented so that the
  // inferred dependencies pipeline them. 0 = algorithm default.
  std::uint64_t segment_bytes = 0;
  // Where a sum keeps its accumulator. In the network (inc_reduce ops) resolved by the caller
  // (automatic = widen). On the hosts see host_accumulate(): `wide` and `widen` (and `fixed`,
  // which means widen for these types) give f16/bf16/fp8/MX sums of allreduce and
  // reduce_scatter f32 accumulators (src/coll/widened.cpp), `automatic` and `narrow` round at
  // every step; `reproducible` (f32/f16/bf16 sum and avg) runs the fixed-point schedule of
  // src/coll/reproducible.cpp on every path, and gives the same bits.
  Accumulate accumulate = Accumulate::automatic;
};

struct RankSchedule {
  std::vector<Op> ops;
  std::uint64_t scratch_bytes = 0;
  Algorithm algo = Algorithm::automatic;
  // Dependencies in CSR form, filled by infer_dependencies: op i waits for
  // deps[dep_begin[i] .. dep_begin[i+1]).
  std::vector<std::uint32_t> dep_begin;
  std::vector<std::uint32_t> deps;
};

// Sizes in bytes of the input and output buffers a collective uses on each rank. In-place,
// both are the size of the one buffer (see the in-place rule above).
std::uint64_t input_bytes(const CollectiveParams& p) noexcept;
std::uint64_t output_bytes(const CollectiveParams& p) noexcept;
// The part of BufferId::output that holds this rank's result: the whole output, except for
// reduce_scatter in place (the rank's shard at offset rank x count). Divide it by nranks to
// finish ReduceOp::avg for allreduce and reduce_scatter.
Region result_region(const CollectiveParams& p) noexcept;

// True if `algo` implements `coll` (automatic always does).
bool supports(Collective coll, Algorithm algo) noexcept;

// True when every rank's schedule is rank 0's with each peer q replaced by (q + rank) mod nranks,
// op for op: the same kinds, sizes and dependencies (offsets rotate). Then one schedule
// describes all ranks, which is how the simulator builds 16,384-rank rings without building
// 16,384 schedules. Holds for the rings whose chunks are all the same size (tests/coll checks
// the claim against build_schedule for every rank; false is always safe).
bool rotation_symmetric(const CollectiveParams& p) noexcept;

// Resolve `automatic` to the default for this message size and rank count (measured crossovers).
Algorithm select_algorithm(const CollectiveParams& p) noexcept;

// True when `p` runs as a reproducible sum (Accumulate::reproducible, an f32/f16/bf16 sum or
// avg of allreduce or reduce_scatter): build_schedule then emits src/coll/reproducible.cpp's.
bool reproducible(const CollectiveParams& p) noexcept;

// Runs a repro_scan / repro_encode / repro_decode op on its regions' memory (every executor).
void run_repro_op(const Op& o, const CollectiveParams& p, const std::byte* src, std::byte* dst,
                  const std::byte* aux);

// The accumulator policy the host schedule of `p` runs (docs/NUMERICS.md "Wide accumulators on
// the hosts"): `reproducible` when reproducible(p); `wide` or `widen` for an f16, bf16, e4m3,
// e5m2 or MX sum/avg of allreduce or reduce_scatter on two or more ranks that asked for it
// (`fixed` counts as widen, as in the switch); otherwise `narrow` (every step rounds; also the
// meaning of `automatic` on the hosts, so the default keeps the bits the hosts always gave).
Accumulate host_accumulate(const CollectiveParams& p) noexcept;

// Runs a widen / narrow op (every executor). Returns the elements a narrow op rounded from a
// finite f32 to a non-finite value (overflow events, docs/NUMERICS.md); 0 for widen.
std::uint64_t run_width_op(const Op& o, DataType t, const std::byte* src, std::byte* dst);
// Run any local op that is not a copy or reduce: repro_* and widen/narrow. Returns events.
std::uint64_t run_local_op(const Op& o, const CollectiveParams& p, const std::byte* src, std::byte* dst,
                           const std::byte* aux);
bool is_local_pass(OpKind k) noexcept;  // repro_scan/encode/decode, widen, narrow

// Build the schedule of one rank. Throws inc::Error(invalid_argument) for unsupported
// combinations. Calls infer_dependencies before returning.
RankSchedule build_schedule(const CollectiveParams& p);

// Derive dependencies from region hazards (RAW, WAR, WAW) in program order, plus the edges of
// `Op::fence`. O(n log n) in the number of ops (an interval map per buffer).
void infer_dependencies(RankSchedule& s);

// What one rank's schedule moves and computes; the analytical model reads these.
struct ScheduleCounts {
  std::uint64_t sends = 0, send_bytes = 0;
  std::uint64_t recvs = 0, recv_bytes = 0;  // recv and recv_reduce
  std::uint64_t reduce_bytes = 0;           // bytes combined on the host (recv_reduce, reduce)
  std::uint64_t copy_bytes = 0;
  std::uint64_t inc_ops = 0;
  std::uint64_t inc_bytes = 0;  // contributed (src) bytes of inc ops
  std::uint64_t ops = 0;
};
ScheduleCounts summarize(const RankSchedule& s) noexcept;

}  // namespace inc::coll
