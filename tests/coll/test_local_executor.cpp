// The local executor itself: it must catch what it is the oracle for (deadlocks, mismatched
// messages, bad regions), emulate the switch exactly, and vary interleavings by seed.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "coll/local_executor.hpp"
#include "tests/coll/ops_builder.hpp"

namespace inc::coll {
namespace {

using namespace test;

CollectiveParams two_ranks() {
  CollectiveParams p;
  p.nranks = 2;
  p.dtype = DataType::i32;
  p.op = ReduceOp::sum;
  return p;
}

std::vector<LocalBuffers> buffers(int p, std::size_t bytes) {
  std::vector<LocalBuffers> b(static_cast<std::size_t>(p));
  for (auto& x : b) x.output.assign(bytes, std::byte{0});
  return b;
}

std::string error_of(const CollectiveParams& p, std::vector<RankSchedule> s, std::vector<LocalBuffers>& b,
                     LocalRunOptions o = {}) {
  for (auto& r : s) infer_dependencies(r);
  try {
    run_local(p, s, b, o);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(LocalExecutor, DetectsDeadlockAndNamesTheBlockedOps) {
  // Both ranks receive, then forward what they received: nobody sends first.
  std::vector<RankSchedule> s(2);
  for (int r = 0; r < 2; ++r)
    s[static_cast<std::size_t>(r)].ops = {recv(1 - r, out(0, 4)), send(1 - r, out(0, 4))};
  auto b = buffers(2, 4);
  const std::string e = error_of(two_ranks(), s, b);
  EXPECT_NE(e.find("deadlock"), std::string::npos) << e;
  EXPECT_NE(e.find("rank 0 op 0"), std::string::npos) << e;
  EXPECT_NE(e.find("rank 1 op 0"), std::string::npos) << e;
  EXPECT_NE(e.find("not yet sent"), std::string::npos) << e;
}

TEST(LocalExecutor, RendezvousExposesSendBeforeReceiveOnTheSameBuffer) {
  // Exchange in place: send the buffer, receive into it (waits for the send: WAR). Fine with
  // eager sends; a deadlock when a send completes only with its receive.
  std::vector<RankSchedule> s(2);
  for (int r = 0; r < 2; ++r)
    s[static_cast<std::size_t>(r)].ops = {send(1 - r, out(0, 4)), recv(1 - r, out(0, 4))};
  auto b = buffers(2, 4);
  std::int32_t v0 = 11, v1 = 22;
  std::memcpy(b[0].output.data(), &v0, 4);
  std::memcpy(b[1].output.data(), &v1, 4);
  EXPECT_EQ(error_of(two_ranks(), s, b), "");
  std::int32_t got0 = 0, got1 = 0;
  std::memcpy(&got0, b[0].output.data(), 4);
  std::memcpy(&got1, b[1].output.data(), 4);
  EXPECT_EQ(got0, 22);
  EXPECT_EQ(got1, 11);
  LocalRunOptions o;
  o.rendezvous = true;
  const std::string e = error_of(two_ranks(), s, b, o);
  EXPECT_NE(e.find("deadlock"), std::string::npos) << e;
  EXPECT_NE(e.find("rendezvous"), std::string::npos) << e;
}

TEST(LocalExecutor, OrderedChannelsKeepSendsInProgramOrder) {
  // Rank 0 sends A (which needs rank 1's reply) then B; rank 1 replies only after B.
  // Unordered this completes (B overtakes A); on a stream transport it cannot.
  std::vector<RankSchedule> s(2);
  s[0].ops = {recv(1, out(0, 4)), send(1, out(0, 4)), send(1, out(8, 4))};
  s[1].ops = {recv(0, out(0, 4)), recv(0, out(4, 4)), send(0, out(4, 4))};
  auto b = buffers(2, 12);
  EXPECT_EQ(error_of(two_ranks(), s, b), "");
  LocalRunOptions o;
  o.ordered_channels = true;
  const std::string e = error_of(two_ranks(), s, b, o);
  EXPECT_NE(e.find("deadlock"), std::string::npos) << e;
  EXPECT_NE(e.find("earlier message #0"), std::string::npos) << e;
}

TEST(LocalExecutor, DetectsSizeAndCountMismatches) {
  std::vector<RankSchedule> s(2);
  s[0].ops = {send(1, out(0, 8))};
  s[1].ops = {recv(0, out(0, 4))};
  auto b = buffers(2, 8);
  std::string e = error_of(two_ranks(), s, b);
  EXPECT_NE(e.find("sends 8 B"), std::string::npos) << e;
  EXPECT_NE(e.find("expects 4 B"), std::string::npos) << e;

  s[1].ops.clear();
  e = error_of(two_ranks(), s, b);
  EXPECT_NE(e.find("rank 0 sends 1 messages to rank 1, which posts 0"), std::string::npos) << e;
}

TEST(LocalExecutor, RejectsBadRegions) {
  std::vector<RankSchedule> s(2);
  s[0].ops = {make_op(OpKind::copy, -1, out(0, 4), out(6, 4))};  // past the 8-byte buffer
  auto b = buffers(2, 8);
  EXPECT_NE(error_of(two_ranks(), s, b).find("outside its buffer"), std::string::npos);
  s[0].ops = {make_op(OpKind::copy, -1, out(0, 4), {BufferId::input, 0, 4})};
  for (auto& x : b) x.input.assign(8, std::byte{0});
  EXPECT_NE(error_of(two_ranks(), s, b).find("writes the input"), std::string::npos);
  s[0].ops = {make_op(OpKind::reduce, -1, out(0, 4), out(2, 4))};
  EXPECT_NE(error_of(two_ranks(), s, b).find("not whole i32"), std::string::npos);
  s[0].ops = {send(5, out(0, 4))};
  EXPECT_NE(error_of(two_ranks(), s, b).find("peer out of range"), std::string::npos);
  s[0].ops = {send(1, out(0, 4))};
  s[1].ops = {recv(0, out(0, 4))};
  std::vector<RankSchedule> no_deps = s;  // infer_dependencies not run
  try {
    run_local(two_ranks(), no_deps, b);
    ADD_FAILURE() << "accepted a schedule without dependencies";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("infer_dependencies"), std::string::npos);
  }
}

TEST(LocalExecutor, EmulatesSwitchOperationsExactly) {
  CollectiveParams p;
  p.nranks = 3;
  p.dtype = DataType::i32;
  p.op = ReduceOp::max;
  std::vector<RankSchedule> s(3);
  auto b = buffers(3, 8);
  const std::int32_t vals[3] = {5, -2, 9};
  for (int r = 0; r < 3; ++r) {
    std::memcpy(b[static_cast<std::size_t>(r)].output.data(), &vals[r], 4);
    // Aggregate into output[4,8) on rank 2 only; then rank 1 broadcasts its value into [4,8)
    // of ranks 0 and 1 (rank 2 keeps the aggregate).
    s[static_cast<std::size_t>(r)].ops = {make_op(OpKind::inc_reduce, -1, out(0, 4), r == 2 ? out(4, 4) : out(0, 0)),
                                          make_op(OpKind::inc_broadcast, 1, r == 1 ? out(0, 4) : out(0, 0),
                                             r == 2 ? out(0, 0) : out(4, 4))};
  }
  ASSERT_EQ(error_of(p, s, b), "");
  std::int32_t got[3];
  for (int r = 0; r < 3; ++r) std::memcpy(&got[r], b[static_cast<std::size_t>(r)].output.data() + 4, 4);
  EXPECT_EQ(got[0], -2);
  EXPECT_EQ(got[1], -2);
  EXPECT_EQ(got[2], 9);

  // Ranks disagreeing on a switch operation.
  s[1].ops[1].peer = 0;
  EXPECT_NE(error_of(p, s, b).find("different roots"), std::string::npos);
  s[1].ops.pop_back();
  EXPECT_NE(error_of(p, s, b).find("rank 1 issues 1"), std::string::npos);
}

TEST(LocalExecutor, SeedsChooseTheInterleaving) {
  CollectiveParams p;
  p.coll = Collective::allreduce;
  p.algo = Algorithm::ring;
  p.nranks = 4;
  p.count = 400;
  p.dtype = DataType::i32;
  p.segment_bytes = 40;
  const auto s = build_schedules(p);
  auto trace = [&](std::uint64_t seed) {
    std::vector<LocalBuffers> b(4);
    for (auto& x : b) {
      x.input.assign(1600, std::byte{1});
      x.output.assign(1600, std::byte{0});
    }
    LocalRunOptions o;
    o.seed = seed;
    o.record_trace = true;
    auto res = run_local(p, s, b, o);
    EXPECT_EQ(res.ops, res.trace.size());
    return res.trace;
  };
  EXPECT_EQ(trace(3), trace(3));  // replayable
  EXPECT_NE(trace(3), trace(4));
}

}  // namespace
}  // namespace inc::coll
