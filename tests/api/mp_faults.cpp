// Multi-process fault tests, run by `inc launch` (see CMakeLists.txt): mismatched calls
// across ranks, a rank that stops calling, a rank that dies. Each test joins a fresh job
// generation (Communicator::init) because an error leaves a communicator unusable.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "inc/inc.hpp"

using namespace inc;
using namespace std::chrono_literals;

namespace {

Communicator fresh(std::chrono::milliseconds timeout = 10s) {
  Options o;
  o.timeout = timeout;
  return Communicator::init(o);
}

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

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

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
    EXPECT_EQ(e.kind(), Error::Kind::peer_failure) << m;
    EXPECT_TRUE(contains(m, "aborted")) << m;
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
  }
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
  }
}

TEST(Faults, SilentRankTimesOutWithDeadline) {
  auto comm = fresh(2s);
  if (comm.size() < 2) GTEST_SKIP() << "needs 2 ranks";
  std::vector<float> buf(1000, 1.0f);
  const bool silent = comm.rank() == comm.size() - 1;
  if (silent) std::this_thread::sleep_for(4s);  // misses the others' deadline
  auto t0 = std::chrono::steady_clock::now();
  Error e = expect_error([&] { comm.allreduce(buf.data(), buf.data(), 1000, DataType::f32, ReduceOp::sum); });
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string m = e.what();
  if (silent) {
    // The others gave up and told it so.
    EXPECT_EQ(e.kind(), Error::Kind::peer_failure) << m;
  } else {
    EXPECT_TRUE(e.kind() == Error::Kind::timeout || e.kind() == Error::Kind::peer_failure) << m;
    if (e.kind() == Error::Kind::timeout) {
      EXPECT_TRUE(contains(m, "timed out") && contains(m, "waiting")) << m;
    }
    EXPECT_LT(waited, 30.0) << "the deadline was not honoured";
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
  auto t0 = std::chrono::steady_clock::now();
  // The barrier may already fail here: a faster rank can see the death first and abort.
  Error e = expect_error([&] {
    comm.barrier();
    for (int i = 0; i < 100; ++i) comm.allreduce(buf.data(), buf.data(), buf.size(), DataType::f32, ReduceOp::sum);
  });
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::string m = e.what();
  EXPECT_EQ(e.kind(), Error::Kind::peer_failure) << m;
  EXPECT_TRUE(contains(m, "rank " + std::to_string(dead))) << m;
  EXPECT_LT(waited, 20.0) << m;
}
