// Every collective x algorithm x rank count x count x in/out of place x dtype/op (x roots),
// executed by run_local under varying interleavings and executor modes, against references.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "collective_check.hpp"

namespace inc::coll::testing {
namespace {

const int kRanks[] = {1, 2, 3, 4, 5, 7, 8, 9, 16};
const std::uint64_t kCounts[] = {0, 1, 7, 1000};

struct TypeOp {
  DataType t;
  ReduceOp op;
};
const TypeOp kReductions[] = {
    {DataType::i32, ReduceOp::sum}, {DataType::i32, ReduceOp::prod}, {DataType::i32, ReduceOp::min},
    {DataType::i32, ReduceOp::max}, {DataType::i32, ReduceOp::avg}, {DataType::f32, ReduceOp::sum},
    {DataType::f32, ReduceOp::prod}, {DataType::f32, ReduceOp::max}, {DataType::f32, ReduceOp::avg},
    {DataType::f64, ReduceOp::sum},  {DataType::f64, ReduceOp::min},  {DataType::f64, ReduceOp::avg},
};
// Data movement only: element sizes 1, 4 and 8 (segment rounding, offsets).
const TypeOp kMovements[] = {
    {DataType::u8, ReduceOp::sum}, {DataType::i32, ReduceOp::sum}, {DataType::f64, ReduceOp::sum}};

// Segment sizes for a count: the default, and for larger counts a small odd size so that every
// transfer is split into many messages (pipelining, partial last segments).
std::vector<std::uint64_t> segments(std::uint64_t count) {
  if (count >= 1000) return {0, 52};
  if (count == 7) return {0, 1};  // 1 byte: rounds up to one element per message
  return {0};
}

// Runs the matrix for one collective and algorithm; stops after a few failures.
void sweep(Collective coll, Algorithm algo, bool reductions) {
  int failures = 0;
  std::uint64_t seed = 1 + static_cast<std::uint64_t>(coll) * 7919 + static_cast<std::uint64_t>(algo) * 104729;
  int variant = 0;
  std::size_t rotation = 0;
  for (int p : kRanks) {
    std::vector<int> roots = {0};
    if (coll == Collective::broadcast) roots = {0, p / 2, p - 1};
    roots.erase(std::unique(roots.begin(), roots.end()), roots.end());
    for (std::uint64_t count : kCounts) {
      for (std::uint64_t seg : segments(count)) {
        for (bool in_place : {false, true}) {
          for (int root : roots) {
            const std::vector<TypeOp> all =
                reductions ? std::vector<TypeOp>(std::begin(kReductions), std::end(kReductions))
                           : std::vector<TypeOp>(std::begin(kMovements), std::end(kMovements));
            // Small counts: every type/op. Larger ones (many more ops per run): a rotating
            // subset, so that the sweep over rank counts still covers every type/op.
            std::size_t take = all.size();
            if (count >= 1000) take = seg ? 1 : std::min<std::size_t>(4, all.size());
            for (std::size_t t = 0; t < take; ++t) {
              const TypeOp& to = all[(rotation++ + t) % all.size()];
              Case c;
              c.coll = coll;
              c.algo = algo;
              c.nranks = p;
              c.count = count;
              c.dtype = to.t;
              c.op = to.op;
              c.root = root;
              c.in_place = in_place;
              c.segment_bytes = seg;
              c.run = mode(++seed, variant++ % 4);
              const std::string err = run_and_check(c);
              if (!err.empty()) {
                ADD_FAILURE() << err;
                if (++failures >= 5) return;
              }
            }
          }
        }
      }
    }
  }
}

TEST(Allreduce, Ring) { sweep(Collective::allreduce, Algorithm::ring, true); }
TEST(Allreduce, RecursiveDoubling) { sweep(Collective::allreduce, Algorithm::recursive_doubling, true); }
TEST(Allreduce, Rabenseifner) { sweep(Collective::allreduce, Algorithm::rabenseifner, true); }
TEST(Allreduce, Inc) { sweep(Collective::allreduce, Algorithm::inc, true); }
TEST(ReduceScatter, Ring) { sweep(Collective::reduce_scatter, Algorithm::ring, true); }
TEST(ReduceScatter, Inc) { sweep(Collective::reduce_scatter, Algorithm::inc, true); }
TEST(Allgather, Ring) { sweep(Collective::allgather, Algorithm::ring, false); }
TEST(Allgather, RecursiveDoublingAndBruck) { sweep(Collective::allgather, Algorithm::recursive_doubling, false); }
TEST(Allgather, Inc) { sweep(Collective::allgather, Algorithm::inc, false); }
TEST(Broadcast, BinomialTree) { sweep(Collective::broadcast, Algorithm::binomial_tree, false); }
TEST(Broadcast, PipelinedChain) { sweep(Collective::broadcast, Algorithm::pipelined_chain, false); }
TEST(Broadcast, Inc) { sweep(Collective::broadcast, Algorithm::inc, false); }
TEST(Alltoall, Pairwise) { sweep(Collective::alltoall, Algorithm::pairwise, false); }
TEST(Barrier, Dissemination) { sweep(Collective::barrier, Algorithm::dissemination, false); }
TEST(Barrier, Inc) { sweep(Collective::barrier, Algorithm::inc, false); }

// The automatic choice, whatever it resolves to, is correct too.
TEST(Automatic, EveryCollective) {
  int v = 0;
  for (Collective coll : {Collective::allreduce, Collective::reduce_scatter, Collective::allgather,
                          Collective::broadcast, Collective::alltoall, Collective::barrier}) {
    for (int p : {3, 8}) {
      for (std::uint64_t count : {std::uint64_t{5}, std::uint64_t{5000}, std::uint64_t{70000}}) {
        Case c;
        c.coll = coll;
        c.nranks = p;
        // Same total size for every collective (buffers of reduce_scatter, allgather and
        // alltoall are p x count).
        c.count = coll == Collective::allreduce || coll == Collective::broadcast ? count : count / static_cast<std::uint64_t>(p);
        c.dtype = DataType::f32;
        c.root = p - 1;
        c.run = mode(100 + static_cast<std::uint64_t>(v), v % 4);
        ++v;
        const std::string err = run_and_check(c);
        EXPECT_EQ(err, "");
      }
    }
  }
}

// Large, prime-sized buffers for a few cases (multi-segment pipelines at default sizes).
TEST(Large, PrimeCounts) {
  const std::uint64_t big = 1000003;
  std::vector<Case> cases;
  auto add = [&](Collective coll, Algorithm algo, int p, std::uint64_t count, DataType t, ReduceOp op,
                 bool in_place, std::uint64_t seg) {
    Case c;
    c.coll = coll;
    c.algo = algo;
    c.nranks = p;
    c.count = count;
    c.dtype = t;
    c.op = op;
    c.in_place = in_place;
    c.segment_bytes = seg;
    c.root = p - 1;
    c.run = mode(4242 + cases.size(), static_cast<int>(cases.size()) % 4);
    cases.push_back(c);
  };
  add(Collective::allreduce, Algorithm::ring, 5, big, DataType::f32, ReduceOp::sum, false, 256 << 10);
  add(Collective::allreduce, Algorithm::rabenseifner, 7, big, DataType::i32, ReduceOp::sum, true, 0);
  add(Collective::reduce_scatter, Algorithm::ring, 3, big / 3, DataType::i32, ReduceOp::sum, false, 0);
  add(Collective::broadcast, Algorithm::pipelined_chain, 4, big, DataType::i32, ReduceOp::sum, false, 0);
  add(Collective::allreduce, Algorithm::inc, 3, big, DataType::f32, ReduceOp::avg, false, 0);
  for (const Case& c : cases) EXPECT_EQ(run_and_check(c), "");
}

// Several interleavings of the same pipelined schedules, in every executor mode.
TEST(Interleavings, ManySeedsSameResult) {
  for (Algorithm algo : {Algorithm::ring, Algorithm::rabenseifner, Algorithm::recursive_doubling}) {
    for (std::uint64_t seed = 1; seed <= 12; ++seed) {
      Case c;
      c.coll = Collective::allreduce;
      c.algo = algo;
      c.nranks = 6;
      c.count = 301;
      c.dtype = DataType::i32;
      c.op = ReduceOp::sum;
      c.segment_bytes = 40;
      c.in_place = seed % 2 == 0;
      c.run = mode(seed, static_cast<int>(seed % 4));
      EXPECT_EQ(run_and_check(c), "");
    }
  }
}

}  // namespace
}  // namespace inc::coll::testing
