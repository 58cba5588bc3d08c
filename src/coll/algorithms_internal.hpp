// Internal to inc_schedule: the per-algorithm schedule builders (algorithms.cpp) and the
// helper they share to emit ops (segmentation, in-place buffer mapping, scratch sizing).
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>

#include "coll/schedule.hpp"

namespace inc::coll::detail {

// Default largest message per algorithm (CollectiveParams::segment_bytes == 0).
inline constexpr std::uint64_t kUnsegmented = ~std::uint64_t{0};
inline constexpr std::uint64_t kRingSegment = 1u << 20;    // pipelined ring: 1 MiB
inline constexpr std::uint64_t kChainSegment = 256u << 10;  // pipelined chain: 256 KiB
inline constexpr std::uint64_t kIncSegment = 64u << 10;     // Core-INC switch operation: 64 KiB
// Core-INC reduce_scatter and allgather of at most this many bytes in all (and at most one
// segment): one switch operation over the whole vector instead of one per shard or block. One
// default switch slot (4096 x 4 B), i.e. one round trip instead of p; measured 3-4x faster at
// 64 B to 16 KiB on 8 ranks (docs/ARCHITECTURE.md). Larger, every rank would move p times its
// share of the bytes for nothing.
inline constexpr std::uint64_t kIncSmallBytes = 16u << 10;

// Element range [begin, begin + size) of part i when `count` elements are split in `parts`
// nearly equal parts (the first count % parts parts get one more element).
struct Part {
  std::uint64_t begin = 0;
  std::uint64_t size = 0;
};
inline Part part(std::uint64_t count, std::uint64_t parts, std::uint64_t i) {
  const std::uint64_t q = count / parts, r = count % parts;
  return {i * q + std::min(i, r), q + (i < r ? 1 : 0)};
}
// Elements of the parts [first, first + n).
inline Part parts(std::uint64_t count, std::uint64_t nparts, std::uint64_t first, std::uint64_t n) {
  if (n == 0) return {part(count, nparts, first).begin, 0};
  const Part a = part(count, nparts, first), b = part(count, nparts, first + n - 1);
  return {a.begin, b.begin + b.size - a.begin};
}

// Emits one rank's ops. Transfers are split into messages of at most `seg` bytes (whole
// elements); both ends of a transfer split the same region size the same way, so the k-th
// pieces match. Zero-byte transfers emit nothing (both ends compute the same size).
class Builder {
 public:
  Builder(const CollectiveParams& p, RankSchedule& s, std::uint64_t default_segment);

  const CollectiveParams& p;
  RankSchedule& s;
  const int nranks, rank;
  const std::uint64_t elem;  // bytes per element
  const std::uint64_t seg;   // largest message, a multiple of elem

  // Regions in element units of the caller's buffers. In place, both name BufferId::output,
  // shifted so that `in` and `out` keep the out-of-place layouts (reduce_scatter: out(0) is the
  // rank's shard; allgather: in(0) is the rank's block).
  Region in(std::uint64_t elem_offset, std::uint64_t elems) const;
  Region out(std::uint64_t elem_offset, std::uint64_t elems) const;
  // Scratch grows to cover every region handed out.
  Region scratch(std::uint64_t elem_offset, std::uint64_t elems);

  void send(int peer, Region src);
  void recv(int peer, Region dst);
  void recv_reduce(int peer, Region src, Region dst);
  void copy(Region src, Region dst);  // no-op when src == dst or empty
  void fence_send(int peer);          // zero-byte send that waits for every earlier op
  void zero_recv(int peer);           // zero-byte receive
  void inc_reduce(Region src, Region dst);
  void inc_broadcast(int root, Region src, Region dst);
  void inc_gather(Region src, Region dst);

 private:
  void push(OpKind k, int peer, Region src, Region dst, bool fence = false);
};

inline int mod(std::int64_t a, int p) { return static_cast<int>(((a % p) + p) % p); }

// Fold of a non-power-of-two rank count into the largest power of two p2 <= p (MPICH): among
// the first 2*(p - p2) ranks, even ranks hand their data to the next odd rank and sit out;
// the others take new ranks 0..p2-1.
struct Fold {
  int p2 = 1, rem = 0;
  int newrank = -1;  // -1: this rank sits out
  bool sits_out = false, absorbs = false;
  int real(int nr) const { return nr < rem ? 2 * nr + 1 : nr + rem; }
};

inline Fold fold(int p, int r) {
  Fold f;
  f.p2 = static_cast<int>(std::bit_floor(static_cast<unsigned>(p)));
  f.rem = p - f.p2;
  if (r < 2 * f.rem) {
    f.sits_out = r % 2 == 0;
    f.absorbs = !f.sits_out;
    f.newrank = f.sits_out ? -1 : r / 2;
  } else {
    f.newrank = r - f.rem;
  }
  return f;
}

// A rank that sits out of the fold hands its input to rank r + 1 and receives the result
// (recursive doubling and Rabenseifner, narrow or widened). Returns whether it did.
inline bool sit_out(Builder& b, const Fold& f) {
  if (!f.sits_out) return false;
  b.send(b.rank + 1, b.in(0, b.p.count));
  b.recv(b.rank + 1, b.out(0, b.p.count));
  return true;
}
// Rabenseifner's recursive-doubling allgather of the reduced blocks (new rank i owns block i of
// p2), then an absorbing rank's hand-back to the rank that sat out.
void rabenseifner_allgather(Builder& b, const Fold& f);

// One builder per algorithm; each appends one rank's ops. p.nranks >= 2 and p.count > 0
// (build_schedule handles the trivial cases).
void allreduce_ring(Builder& b);
void allreduce_recursive_doubling(Builder& b);
void allreduce_rabenseifner(Builder& b);
void reduce_scatter_ring(Builder& b);
void allgather_ring(Builder& b);
void allgather_recursive_doubling(Builder& b);
void broadcast_binomial(Builder& b);
void broadcast_chain(Builder& b);
void alltoall_pairwise(Builder& b);
void barrier_dissemination(Builder& b);
void inc_collective(Builder& b);
// Accumulate::reproducible sums (reproducible.cpp): the whole schedule, p.count > 0.
void reproducible_sum(const CollectiveParams& p, RankSchedule& s);
// Appends `sub`'s ops to `s` with sub's input/output/scratch moved to scratch offsets of `s`
// and every op's arithmetic set to `arith` (reproducible.cpp; also widened.cpp).
void append_moved(RankSchedule& s, const RankSchedule& sub, Arith arith, std::uint64_t in_off,
                  std::uint64_t out_off, std::uint64_t scratch_off);
// Wide accumulators on the hosts (widened.cpp), p.count > 0, p.nranks >= 2, host_accumulate(p)
// wide or widen: the whole schedule.
void wide_sum(const CollectiveParams& p, RankSchedule& s);   // widen once, the f32 algorithm, round once
void widen_sum(Builder& b);                                  // narrow first hop, f32 partials, narrow allgather  // Core-INC: allreduce, reduce_scatter, allgather, broadcast

}  // namespace inc::coll::detail
