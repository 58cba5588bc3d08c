// Wide accumulators on the hosts through the public API in real processes (docs/NUMERICS.md
// "Wide accumulators on the hosts"): f16, bf16, e4m3 and mxfp8_e4m3 sums by ring, recursive
// doubling and Rabenseifner (and the reduce_scatter ring) under narrow, widen and wide. Every
// rank builds all ranks' inputs, so it checks its own result against the reference
// (tests/coll/wide_reference.hpp: the f32 algorithm's sum of the decoded inputs rounded once;
// narrow: the narrow schedule run by the local executor), byte for byte; the results are
// gathered to check that every rank holds the same bits; the report names the policy that ran,
// its hops and the bytes this rank sent (the schedule's count: narrow first step, f32 partials,
// narrow allgather under widen).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "../coll/wide_reference.hpp"
#include "coll/schedule.hpp"
#include "inc/inc.hpp"
#include "tests/api/mp_util.hpp"

using namespace inc;
using namespace inc::testing::wide;
using inc::testing::world;

namespace {

// Under `inc launch --edge` (INC_OFFLOAD=edge) every call must have run on the edge engine.
bool offloaded() {
  const char* o = std::getenv("INC_OFFLOAD");
  return o && std::string(o) == "edge";
}

TEST(HostWide, EveryAlgorithmAndPolicyGivesTheReferenceBitsOnEveryRank) {
  auto& comm = world();
  const int P = comm.size(), rank = comm.rank();
  struct Case {
    Collective coll;
    coll::Algorithm algo;
    const char* name;
  };
  const Case cases[] = {{Collective::allreduce, coll::Algorithm::ring, "ring"},
                        {Collective::allreduce, coll::Algorithm::recursive_doubling, "recursive_doubling"},
                        {Collective::allreduce, coll::Algorithm::rabenseifner, "rabenseifner"},
                        {Collective::reduce_scatter, coll::Algorithm::ring, "ring"}};
  for (DataType t : {DataType::f16, DataType::bf16, DataType::e4m3, DataType::mxfp8_e4m3})
    for (const Case& c : cases)
      for (std::uint64_t size : {std::uint64_t{1}, std::uint64_t{1001}, std::uint64_t{20011}}) {
        const std::uint64_t epu = elements_per_unit(t), esz = size_of(t);
        const std::uint64_t units = epu > 1 ? size / epu + 1 : size;  // MX: 1, 32, 626 blocks
        coll::CollectiveParams p;
        p.coll = c.coll;
        p.algo = c.algo;
        p.nranks = P;
        p.count = units;
        p.dtype = t;
        const bool rs = c.coll == Collective::reduce_scatter;
        const std::uint64_t in_units = rs ? units * static_cast<std::uint64_t>(P) : units;
        std::mt19937_64 rng(units * 31 + static_cast<std::uint64_t>(t));
        std::vector<std::vector<std::byte>> in;
        for (int r = 0; r < P; ++r) in.push_back(random_input(t, in_units, rng));
        const auto want_wide = reference(p, in);
        for (Accumulate acc : {Accumulate::narrow, Accumulate::widen, Accumulate::wide}) {
          const std::string what = std::string(name(t)) + " " + name(c.coll).data() + " " + c.name + " " +
                                   std::to_string(units) + " units " + name(acc).data();
          p.accumulate = acc;
          std::vector<std::byte> want;
          if (acc == Accumulate::narrow) {  // today's path: every step rounds
            auto bufs = make_buffers(p, in);
            coll::run_local(p, coll::build_schedules(p), bufs);
            want = result_of(p, bufs[static_cast<std::size_t>(rank)], rank);
          } else {
            want = want_wide[static_cast<std::size_t>(rank)];
          }
          std::vector<std::byte> out(units * esz, std::byte{0xA5});
          CallOptions o;
          o.algo = c.name;
          o.accumulate = acc;
          if (rs) comm.reduce_scatter(in[static_cast<std::size_t>(rank)].data(), out.data(), units * epu, t, ReduceOp::sum, o);
          else comm.allreduce(in[static_cast<std::size_t>(rank)].data(), out.data(), units * epu, t, ReduceOp::sum, o);
          const Report rep = comm.last_report();
          ASSERT_FALSE(rep.in_network) << what;
          if (offloaded()) {
            ASSERT_EQ(rep.offload, "edge") << what << ": " << rep.reason;
          }
          ASSERT_EQ(out, want) << what;
          EXPECT_EQ(rep.accumulate, acc) << what;
          // The bytes this rank sent are its schedule's (widen: between narrow's and wide's).
          coll::CollectiveParams mine = p;
          mine.rank = rank;
          EXPECT_EQ(rep.bytes_sent, coll::summarize(coll::build_schedule(mine)).send_bytes) << what;
          ASSERT_FALSE(rep.hops.empty()) << what;
          const double bpe = static_cast<double>(esz) / static_cast<double>(epu);
          EXPECT_DOUBLE_EQ(rep.hops.front().bytes_per_element, acc == Accumulate::wide ? 4.0 : bpe) << what;
          if (acc == Accumulate::widen && P > 2) {  // a step with f32 partial sums
            bool f32_hop = false;
            for (const auto& h : rep.hops) f32_hop |= h.accumulator_bits == 32 && h.bytes_per_element == 4.0;
            EXPECT_TRUE(f32_hop) << what;
          }
          // The same bits on every rank (allreduce; reduce_scatter shards differ by design).
          if (!rs) {
            std::vector<std::byte> all(out.size() * static_cast<std::size_t>(P));
            comm.allgather(out.data(), all.data(), out.size(), DataType::u8);
            for (int r = 0; r < P; ++r)
              ASSERT_EQ(0, std::memcmp(all.data() + static_cast<std::size_t>(r) * out.size(), out.data(), out.size()))
                  << what << ": rank " << r << " differs";
          }
        }
      }
}

// The communicator's default (no INC_ACCUMULATE, no CallOptions::accumulate) keeps the hosts'
// narrow bits, and INC_ACCUMULATE=wide (the mp_host_wide_env test) makes it wide.
TEST(HostWide, TheDefaultPolicyOnTheHosts) {
  auto& comm = world();
  const int P = comm.size(), rank = comm.rank();
  coll::CollectiveParams p;
  p.algo = coll::Algorithm::ring;
  p.nranks = P;
  p.count = 4096;
  p.dtype = DataType::bf16;
  std::mt19937_64 rng(5);
  std::vector<std::vector<std::byte>> in;
  for (int r = 0; r < P; ++r) in.push_back(random_input(p.dtype, p.count, rng));
  const char* env = std::getenv("INC_ACCUMULATE");
  const Accumulate expect = env && std::string(env) == "wide" ? Accumulate::wide : Accumulate::narrow;
  p.accumulate = expect;
  std::vector<std::byte> want;
  if (expect == Accumulate::wide) {
    want = reference(p, in)[static_cast<std::size_t>(rank)];
  } else {
    auto bufs = make_buffers(p, in);
    coll::run_local(p, coll::build_schedules(p), bufs);
    want = result_of(p, bufs[static_cast<std::size_t>(rank)], rank);
  }
  std::vector<std::byte> out(p.count * 2);
  CallOptions o;
  o.algo = "ring";
  comm.allreduce(in[static_cast<std::size_t>(rank)].data(), out.data(), p.count, p.dtype, ReduceOp::sum, o);
  EXPECT_EQ(out, want);
  EXPECT_EQ(comm.last_report().accumulate, expect);
  if (offloaded()) {
    EXPECT_EQ(comm.last_report().offload, "edge");
  }
}

}  // namespace
