// More than 64 ranks on one switch (issue 8): `inc launch -n 80 --switch` runs 80 processes
// that are all members of one job at one switch daemon. Small collectives, every result exact
// against a reference computed without the library, every call in the network.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "inc/inc.hpp"
#include "tests/api/mp_util.hpp"

using namespace inc;
using inc::testing::ival;
using inc::testing::world;

namespace {

void in_network(const Communicator& comm, const char* what) {
  auto rep = comm.last_report();
  EXPECT_TRUE(rep.in_network) << what << ": " << rep.reason;
}

}  // namespace

TEST(IncWide, MoreThan64RanksOnOneSwitchAreExact) {
  auto& comm = world();
  const int p = comm.size(), rank = comm.rank();
  ASSERT_GT(p, 64) << "run with more than 64 ranks";
  for (std::uint64_t n : {1ull, 300ull}) {
    std::vector<std::int32_t> in(n), out(n, -1);
    for (std::uint64_t i = 0; i < n; ++i) in[i] = ival(rank, i);
    comm.allreduce(in.data(), out.data(), n, DataType::i32, ReduceOp::sum);
    in_network(comm, "allreduce");
    std::uint64_t wrong = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
      std::int64_t s = 0;
      for (int r = 0; r < p; ++r) s += ival(r, i);
      wrong += out[i] != s;
    }
    EXPECT_EQ(wrong, 0u) << "allreduce n=" << n;
  }
  {  // reduce_scatter: each rank wants only its own block's result
    const std::uint64_t shard = 3;
    std::vector<std::int32_t> in(shard * std::uint64_t(p)), out(shard, -1);
    for (std::uint64_t i = 0; i < in.size(); ++i) in[i] = ival(rank, i);
    comm.reduce_scatter(in.data(), out.data(), shard, DataType::i32, ReduceOp::sum);
    in_network(comm, "reduce_scatter");
    for (std::uint64_t i = 0; i < shard; ++i) {
      std::int64_t s = 0;
      for (int r = 0; r < p; ++r) s += ival(r, std::uint64_t(rank) * shard + i);
      EXPECT_EQ(out[i], s) << "reduce_scatter element " << i;
    }
  }
  {
    const std::uint64_t bytes = 8;
    std::vector<std::uint8_t> in(bytes), out(bytes * std::uint64_t(p));
    for (std::uint64_t i = 0; i < bytes; ++i) in[i] = std::uint8_t(rank * 7 + int(i));
    comm.allgather(in.data(), out.data(), bytes, DataType::u8);
    in_network(comm, "allgather");
    for (int r = 0; r < p; ++r)
      for (std::uint64_t i = 0; i < bytes; ++i)
        ASSERT_EQ(out[std::uint64_t(r) * bytes + i], std::uint8_t(r * 7 + int(i))) << "block " << r;
  }
  comm.barrier();
}
