// Multi-process fault tests, run by `inc launch` (see CMakeLists.txt): mismatched calls
// across ranks, a rank that stops calling, a rank that dies. Each test joins a fresh job
// generation (Communicator::init) because an error leaves a communicator unusable.
// Nothing here is timed: where one rank must act after the others, it waits for their key in
// the job's store (test_store.hpp); the deadlines of those waits only bound a hang.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "inc/inc.hpp"
#include "tests/api/mp_util.hpp"
#include "test_store.hpp"

using namespace inc;
using inc::testing::contains;
using inc::testing::fresh;
using namespace std::chrono_literals;

namespace {

// Runs fn, which must throw inc::Error; returns it.
template <class F>
Error expect_error(F&& fn) {
  auto t0 = std::chrono::steady_clock::now();
  try {
    fn();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no error after "
                << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() << " s";
  return Error(Error::Kind::internal, "no error");
}

// A rank that failed on its own tells the others ("rank 2 aborted the job: rank 2: <its
// error>"): a peer_failure must carry that cause, and name a rank other than the receiver.
void expect_abort_carries(const Error& e, int me, const std::vector<std::string>& cause) {
  const std::string m = e.what();
  EXPECT_EQ(e.kind(), Error::Kind::peer_failure) << m;
  const auto at = m.find(" aborted the job: ");
  ASSERT_NE(at, std::string::npos) << m;
  const auto sp = m.rfind("rank ", at);
  ASSERT_NE(sp, std::string::npos) << m;
  EXPECT_NE(std::atoi(m.c_str() + sp + 5), me) << "names itself: " << m;
  for (const auto& c : cause) EXPECT_TRUE(contains(m, c)) << "'" << c << "' missing: " << m;
}

}  // namespace

TEST(Faults, CountMismatchNamesBothSides) {
  auto comm = fresh();
  if (comm.size() < 2) GTEST_SKIP() << "needs 2 ranks";
  std::size_t count = comm.rank() == 0 ? 1024 : 4096;
  std::vector<float> buf(4096, 1.0f);
  CallOptions o;
  o.algo = "ring";
  Error e = expect_error([&] { comm.allreduce(buf.data(), buf.data(), count, DataType::f32, ReduceOp::sum, o); });
  std::string m = e.what();
  if (e.kind() == Error::Kind::mismatch) {
    EXPECT_TRUE(contains(m, "allreduce of 1024 x f32") && contains(m, "allreduce of 4096 x f32")) << m;
  } else {
    expect_abort_carries(e, comm.rank(), {"allreduce of 1024 x f32", "allreduce of 4096 x f32"});
  }
}

TEST(Faults, CollectiveMismatch) {
  auto comm = fresh();
  if (comm.size() < 2) GTEST_SKIP() << "needs 2 ranks";
  std::vector<std::int32_t> in(64, 1), out(64 * comm.size());
  Error e = expect_error([&] {
    if (comm.rank() == 1)
      comm.allgather(in.data(), out.data(), 64, DataType::i32);
    else
      comm.allreduce(in.data(), out.data(), 64, DataType::i32, ReduceOp::sum);
  });
  std::string m = e.what();
  EXPECT_TRUE(e.kind() == Error::Kind::mismatch || e.kind() == Error::Kind::peer_failure) << m;
  if (e.kind() == Error::Kind::mismatch) {
    EXPECT_TRUE(contains(m, "allgather") && contains(m, "allreduce")) << m;
  } else {
    expect_abort_carries(e, comm.rank(), {"allgather", "allreduce"});
  }
}

// A wide accumulator on one rank and a narrow one on the others are different schedules on the
// hosts (docs/NUMERICS.md "Wide accumulators on the hosts"): a mismatch naming the policy, not a
// hang or mixed bits.
TEST(Faults, AccumulatorPolicyMismatchNamesThePolicy) {
  auto comm = fresh();
  if (comm.size() < 2) GTEST_SKIP() << "needs 2 ranks";
  std::vector<std::uint16_t> buf(4096, 0x3f80);  // bf16 1.0
  CallOptions o;
  o.algo = "ring";
  o.accumulate = comm.rank() == 0 ? Accumulate::wide : Accumulate::narrow;
  Error e = expect_error([&] { comm.allreduce(buf.data(), buf.data(), buf.size(), DataType::bf16, ReduceOp::sum, o); });
  std::string m = e.what();
  EXPECT_TRUE(e.kind() == Error::Kind::mismatch || e.kind() == Error::Kind::peer_failure) << m;
  if (e.kind() == Error::Kind::mismatch) {
    EXPECT_TRUE(contains(m, "4096 x bf16 (wide accumulator)")) << m;
  } else {
    expect_abort_carries(e, comm.rank(), {"4096 x bf16 (wide accumulator)"});
  }
}

// Under `inc launch --edge` with a converting wire handler (INC_EDGE_HANDLER=int8, set by
// CMakeLists.txt): the engine refuses a wide accumulator on the one rank that asks it, and
// every other rank's call fails at once with a mismatch naming that rank and the reason (the
// refusal crosses the engines' mesh), not at INC_TIMEOUT. The next call fails on every rank.
TEST(Faults, AnEngineRefusalOnOneRankFailsEveryRankNamingIt) {
  auto comm = fresh();
  if (comm.size() < 2 || !comm.offloaded() || !std::getenv("INC_EDGE_HANDLER"))
    GTEST_SKIP() << "needs 2 ranks offloaded to the edge engine with a converting handler";
  const int refusing = comm.size() - 1;
  std::vector<std::uint16_t> buf(4096, 0x3f80);  // bf16 1.0
  CallOptions o;
  o.algo = "ring";
  o.accumulate = comm.rank() == refusing ? Accumulate::widen : Accumulate::narrow;
  Error e = expect_error([&] { comm.allreduce(buf.data(), buf.data(), buf.size(), DataType::bf16, ReduceOp::sum, o); });
  const std::string m = e.what();
  EXPECT_TRUE(contains(m, "accumulator policy 'widen' does not run with the job's wire handler")) << m;
  if (comm.rank() == refusing) {
    EXPECT_EQ(e.kind(), Error::Kind::invalid_argument) << m;
  } else {
    EXPECT_EQ(e.kind(), Error::Kind::mismatch) << m;
    EXPECT_TRUE(contains(m, fmt::format("rank {}'s call was refused before it started: edge engine:", refusing))) << m;
  }
  o.accumulate = Accumulate::narrow;
  e = expect_error([&] { comm.allreduce(buf.data(), buf.data(), buf.size(), DataType::bf16, ReduceOp::sum, o); });
  EXPECT_NE(e.kind(), Error::Kind::timeout) << e.what();
  EXPECT_TRUE(contains(e.what(), fmt::format("rank {}'s call was refused", refusing))) << e.what();
}

TEST(Faults, TypeAndOpMismatch) {
  auto comm = fresh();
  if (comm.size() < 2) GTEST_SKIP() << "needs 2 ranks";
  std::vector<std::int32_t> buf(256, 1);
  Error e = expect_error([&] {
    ReduceOp op = comm.rank() == comm.size() - 1 ? ReduceOp::max : ReduceOp::sum;
    comm.allreduce(buf.data(), buf.data(), 256, DataType::i32, op);
  });
  std::string m = e.what();
  EXPECT_TRUE(e.kind() == Error::Kind::mismatch || e.kind() == Error::Kind::peer_failure) << m;
  if (e.kind() == Error::Kind::mismatch) {
    EXPECT_TRUE(contains(m, "max") && contains(m, "sum")) << m;
  } else {
    expect_abort_carries(e, comm.rank(), {"max", "sum"});
  }
}

// The last rank calls only once every other rank has given up on it (their keys in the store):
// without a deadline the others would wait for ever, and this test would hang until ctest's
// time-out. The others stay until it has seen their abort, so that it sees that, not EOFs.
TEST(Faults, SilentRankTimesOutWithDeadline) {
  auto comm = fresh(2s);
  if (comm.size() < 2) GTEST_SKIP() << "needs 2 ranks";
  auto store = inc::testing::job_store();
  const int p = comm.size(), silent = p - 1;
  std::vector<std::string> gave_up;
  for (int r = 0; r < silent; ++r) gave_up.push_back("test/silent/gave_up/" + std::to_string(r));
  std::vector<float> buf(1000, 1.0f);
  if (comm.rank() == silent) store.wait(gave_up, 120s);  // bounds a hang only
  Error e = expect_error([&] { comm.allreduce(buf.data(), buf.data(), 1000, DataType::f32, ReduceOp::sum); });
  std::string m = e.what();
  if (comm.rank() == silent) {
    // The others gave up and told it so, with the cause.
    expect_abort_carries(e, silent, {"timed out"});
    store.set("test/silent/seen", "1");
  } else {
    EXPECT_TRUE(e.kind() == Error::Kind::timeout || e.kind() == Error::Kind::peer_failure) << m;
    if (e.kind() == Error::Kind::timeout) {
      // "allreduce #3 (...): timed out after 2.0 s: 1 of 8 ops done; waiting for data from rank 1"
      EXPECT_TRUE(contains(m, "timed out after") && contains(m, "waiting")) << m;
      EXPECT_TRUE(contains(m, "data from rank") || contains(m, "send to rank")) << m;
    } else {
      expect_abort_carries(e, comm.rank(), {"timed out"});
    }
    store.set(gave_up[static_cast<std::size_t>(comm.rank())], "1");
    store.get("test/silent/seen", 120s);
  }
}

// Run alone (see CMakeLists.txt): the last rank leaves the job without a word.
TEST(FaultsDeadRank, OthersFailNamingIt) {
  auto comm = fresh(20s);
  if (comm.size() < 2) GTEST_SKIP() << "needs 2 ranks";
  const int dead = comm.size() - 1;
  if (comm.rank() == dead) {
    comm.barrier();
    std::fflush(nullptr);
    ::_exit(0);
  }
  std::vector<float> buf(1 << 16, 1.0f);
  // The barrier may already fail here: a faster rank can see the death first and abort.
  Error e = expect_error([&] {
    comm.barrier();
    for (int i = 0; i < 100; ++i) comm.allreduce(buf.data(), buf.data(), buf.size(), DataType::f32, ReduceOp::sum);
  });
  std::string m = e.what();
  EXPECT_EQ(e.kind(), Error::Kind::peer_failure) << m;
  // Noticed from its connection (or another rank's abort that says so), not from the 20 s
  // deadline: "rank 4 closed its connection (did the process exit?)", or a reset when it died
  // with data unread ("read from rank 4 failed: Connection reset by peer").
  const std::string d = std::to_string(dead);
  EXPECT_TRUE(contains(m, "rank " + d + " closed its connection") || contains(m, "rank " + d + " is not reachable") ||
              contains(m, "read from rank " + d + " failed") || contains(m, "write to rank " + d + " failed"))
      << m;
  EXPECT_FALSE(contains(m, "timed out")) << m;
}
