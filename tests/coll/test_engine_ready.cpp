// The runtime executor's receiver-ready large messages (src/coll/executor_ready.cpp): two
// Engines over a connected socket pair in one thread. A message of more than the eager limit
// does not leave before its receiver has posted the receive; a small one does; results stay
// right either way.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "coll/executor.hpp"
#include "tests/coll/engine_mesh.hpp"

using namespace inc;
using namespace inc::coll;

namespace {

struct Two : test::EngineMesh {
  Two() : EngineMesh(2) {}
};

CollectiveParams allreduce(int rank, std::uint64_t count) {
  CollectiveParams p;
  p.coll = Collective::allreduce;
  p.algo = Algorithm::recursive_doubling;  // one message of the whole buffer each way
  p.nranks = 2;
  p.rank = rank;
  p.count = count;
  p.dtype = DataType::f32;
  return p;
}

// Rank 0 starts an Allreduce of `count` floats; rank 1 only runs its event loop for `rounds`
// rounds, then starts too. Returns the payload bytes rank 1 had received before it started.
std::uint64_t received_before_start(Two& t, std::uint64_t count, int rounds) {
  std::vector<float> in0(count, 1.0f), in1(count, 2.0f), out0(count), out1(count);
  auto a = t.e[0]->start(0, allreduce(0, count), in0.data(), out0.data(), "test");
  for (int k = 0; k < rounds; ++k) {
    t.e[0]->test(*a);
    t.e[1]->progress(1);
  }
  const std::uint64_t early = t.e[1]->stats().payload_received;
  auto b = t.e[1]->start(0, allreduce(1, count), in1.data(), out1.data(), "test");
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);  // a hang, not a speed check
  while (!(t.e[0]->test(*a) & t.e[1]->test(*b)) && std::chrono::steady_clock::now() < until) {
  }
  EXPECT_TRUE(a->done() && b->done());
  for (std::uint64_t i = 0; i < count; ++i) {
    EXPECT_EQ(out0[i], 3.0f) << i;
    EXPECT_EQ(out1[i], 3.0f) << i;
    if (out0[i] != 3.0f || out1[i] != 3.0f) break;
  }
  return early;
}

}  // namespace

TEST(EngineReady, LargeMessageWaitsForTheReceiversPost) {
  Two t;
  const std::uint64_t count = (Engine::kEagerBytes / 4) * 4;  // 4x the eager limit
  EXPECT_EQ(received_before_start(t, count, 200), 0u);
  // And rank 0's message did leave once rank 1 posted: both got every byte.
  EXPECT_EQ(t.e[0]->stats().payload_sent, count * 4);
  EXPECT_EQ(t.e[1]->stats().payload_received, count * 4);
}

TEST(EngineReady, SmallMessageLeavesAtOnce) {
  Two t;
  const std::uint64_t count = Engine::kEagerBytes / 4;  // exactly the limit: eager
  EXPECT_EQ(received_before_start(t, count, 200), count * 4);
}

TEST(EngineReady, AllEagerWhenTheLimitIsLifted) {
  Two t;
  for (auto& e : t.e) e->set_eager_bytes(~std::uint64_t{0});
  const std::uint64_t count = (Engine::kEagerBytes / 4) * 4;
  EXPECT_EQ(received_before_start(t, count, 200), count * 4);
}

TEST(EngineReady, ManyLargeMessagesBothWaysInOneCollective) {
  // Ring Allreduce with 128 KiB segments: every segment waits for its own notice.
  Two t;
  const std::uint64_t count = 1u << 20;
  std::vector<float> in0(count), in1(count), out0(count), out1(count);
  for (std::uint64_t i = 0; i < count; ++i) in0[i] = static_cast<float>(i % 1000), in1[i] = 1.0f;
  auto p0 = allreduce(0, count), p1 = allreduce(1, count);
  p0.algo = p1.algo = Algorithm::ring;
  p0.segment_bytes = p1.segment_bytes = 128 * 1024;
  auto a = t.e[0]->start(0, p0, in0.data(), out0.data(), "test");
  auto b = t.e[1]->start(0, p1, in1.data(), out1.data(), "test");
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!(t.e[0]->test(*a) & t.e[1]->test(*b)) && std::chrono::steady_clock::now() < until) {
  }
  ASSERT_TRUE(a->done() && b->done());
  for (std::uint64_t i = 0; i < count; i += 997) {
    EXPECT_EQ(out0[i], static_cast<float>(i % 1000) + 1.0f) << i;
    EXPECT_EQ(out1[i], out0[i]) << i;
  }
}

TEST(EngineReady, TimeoutNamesTheReceiverThatNeverPosted) {
  Two t;
  const std::uint64_t count = (Engine::kEagerBytes / 4) * 4;
  std::vector<float> in(count, 1.0f), out(count);
  StartOptions o;
  o.timeout = std::chrono::milliseconds(300);
  o.tentative = true;  // fails alone, tells nobody
  auto a = t.e[0]->start(0, allreduce(0, count), in.data(), out.data(), "test", o);
  try {
    t.e[0]->wait(*a);
    FAIL() << "rank 1 never started, yet the Allreduce finished";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::timeout) << e.what();
    EXPECT_NE(std::string(e.what()).find("waiting for rank 1 to post the receive of a large message"),
              std::string::npos)
        << e.what();
  }
}

TEST(EngineReady, FloodOfEarlyNoticesFailsNamingThePeerAndKeepsNoMore) {
  // Rank 1 is a hostile process on a raw socket: it sends ready notices that no send op of
  // rank 0 expects (collectives rank 0 has not started), far more than the bound.
  test::RawPeer peer(std::chrono::seconds(5));
  Engine& e = *peer.e;
  constexpr std::size_t kBound = 4096;
  e.set_max_early_notices(kBound);
  // Rank 0 waits in a small Allreduce for rank 1's data, which never comes.
  std::vector<float> in(16, 1.0f), out(16);
  auto a = e.start(0, allreduce(0, 16), in.data(), out.data(), "test");
  std::vector<transport::WireHeader> notices(4 * kBound);
  for (std::size_t k = 0; k < notices.size(); ++k) {
    notices[k].kind = static_cast<std::uint16_t>(transport::MsgKind::ready);
    notices[k].comm_id = 0;
    notices[k].seq = 1 + k % 7;  // collectives to come
    notices[k].msg_index = static_cast<std::uint32_t>(k);
  }
  // Write them all, running rank 0's event loop whenever the socket is full: rank 0 must
  // keep reading (a hostile peer does not stall it), past the error too.
  const std::size_t total = notices.size() * sizeof(transport::WireHeader);
  const std::size_t sent = peer.write(notices.data(), total, [&] { EXPECT_LE(e.early_notices(), kBound); });
  ASSERT_EQ(sent, total) << "rank 0 stopped reading the flood";
  for (int k = 0; k < 100; ++k) e.progress(1);
  EXPECT_EQ(e.early_notices(), kBound);  // the first kBound kept, nothing after
  try {
    e.wait(*a);
    FAIL() << "the Allreduce finished without rank 1";
  } catch (const Error& x) {
    EXPECT_EQ(x.kind(), Error::Kind::mismatch) << x.what();
    EXPECT_NE(std::string(x.what()).find("world rank 1 sent more than 4096 ready notices"), std::string::npos)
        << x.what();
  }
}
