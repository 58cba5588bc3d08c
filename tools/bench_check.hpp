// Inputs and expected results for `inc bench`'s correctness check, computed independently of
// the library (no numerics::reduce): every element's input depends on the rank, the element's
// index and the iteration, so that a wrong shard, a swapped chunk, a misrouted block, a missing
// or doubled contribution or a stale result from the previous iteration changes the checked
// value wherever the data type has room for distinct values.
//
//  * data movement (allgather, broadcast, alltoall): pseudo-random bit patterns per
//    (rank, element, iteration);
//  * sum / avg: h(i) + g(r): h pseudo-random per element and iteration, g distinct per rank;
//    magnitudes bounded so that the sum of all ranks is exact in the type (integers wrap, which
//    is exact modulo 2^bits);
//  * min / max: h(i) + g((r + i) mod p): the rank holding the extreme value rotates;
//  * prod: +-1/2, +-1, +-2 for floats (products are exact powers of two), small integers for
//    integer types (wrap-around products are exact modulo 2^bits);
//  * MX blocks: see mx_value (exact at every rounding point, so the check is bitwise).
#pragma once

#include <cstddef>
#include <cstdint>

#include "inc/types.hpp"

namespace inc::tools {

class BenchPattern {
 public:
  BenchPattern(Collective coll, DataType t, ReduceOp op, int nranks, std::uint64_t salt);

  // The input of `rank` at input index i (reduce_scatter/alltoall: over the whole nranks x count
  // input; broadcast: only the root's input matters).
  void fill(int rank, std::byte* buf, std::uint64_t first, std::uint64_t n) const;
  // How many of the n result elements starting at result index `first` differ from the
  // expectation, for the result buffer as the collective defines it on `rank`:
  //   allreduce: element i; reduce_scatter: element i of rank's shard (input index rank*count+i);
  //   allgather: element r*count+i = rank r's input i; broadcast: the root's input i;
  //   alltoall: element r*count+i = rank r's input rank*count+i.
  std::uint64_t count_wrong(int rank, std::uint64_t count, int root, const std::byte* out) const;

 private:
  // Value of one input element as an integer (integer types and integer-valued floats) or a
  // double (prod of floats).
  std::int64_t int_input(int rank, std::uint64_t i) const;
  double prod_input(int rank, std::uint64_t i) const;
  void store_input(int rank, std::uint64_t i, std::byte* dst) const;
  // Expected reduction of input element i over all ranks, written in the type.
  void expected_reduction(std::uint64_t i, std::byte* dst) const;
  // MX blocks (unit i = elements 32i .. 32i+31): element e's value is 0 or +-2^s(block), nonzero
  // for at most mx_window_ ranks (a window rotating with e), so every partial sum of any subset
  // of ranks is an integer times 2^s of magnitude <= mx_window_, which every MX format holds
  // exactly at every scale the OCP conversion picks: each rounding point of every path (per
  // host step, per switch hop, once at the root, f32 back to the hosts) re-encodes exactly and
  // the result is the reference encoder's block of the exact reduction. prod: +-1 on every rank.
  double mx_value(int rank, std::uint64_t e) const;
  void mx_store_input(int rank, std::uint64_t i, std::byte* dst) const;
  void mx_expected(std::uint64_t i, std::byte* dst) const;
  int mx_window_ = 0;
  std::uint64_t hash(std::uint64_t a, std::uint64_t b) const;

  Collective coll_;
  DataType t_;
  ReduceOp op_;
  int p_;
  std::uint64_t salt_;
  std::size_t esz_;
  bool float_;
  bool movement_;
  // Range of h (element part) and g (rank part) for sums and min/max.
  std::int64_t h_lo_ = 0, h_span_ = 1;
  std::int64_t g_sum_ = 0, g_min_ = 0, g_max_ = 0;
  std::int64_t g_step_ = 1;
};

}  // namespace inc::tools
