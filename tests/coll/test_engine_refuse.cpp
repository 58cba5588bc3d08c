// The runtime executor's refusals (src/coll/executor_refuse.cpp): a call refused on one rank
// before it started (Engine::refuse, as the edge engine's proxy does for a descriptor it cannot
// run) fails its peers' calls of that collective at once with a mismatch naming the rank and the
// reason, whether they started it before or after the refusal came; a call refused on every
// rank fails nothing; a refusal from the wire is charged to the rank whose connection carried it,
// and a flood of them or one for a communicator the sender is not part of is a clear error.
// Engines over connected socket pairs, in one thread.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "coll/executor.hpp"
#include "tests/coll/engine_mesh.hpp"

using namespace inc;
using namespace inc::coll;

namespace {

using test::EngineMesh;

CollectiveParams allreduce(int rank, int n) {
  CollectiveParams p;
  p.coll = Collective::allreduce;
  p.algo = Algorithm::ring;
  p.nranks = n;
  p.rank = rank;
  p.count = 64;
  p.dtype = DataType::f32;
  return p;
}

// The error of `op`, driving every engine until it is done (a hang fails by ctest's timeout).
std::optional<Error> outcome(EngineMesh& m, Engine& e, CollOp& op) {
  for (;;) {
    try {
      if (e.test(op)) return std::nullopt;
    } catch (const Error& x) {
      return x;
    }
    m.progress(1);
  }
}

bool has(const Error& e, const std::string& s) { return std::string(e.what()).find(s) != std::string::npos; }

}  // namespace

TEST(EngineRefuse, PeersFailWithTheRefusalNamingTheRankStartedBeforeOrAfter) {
  EngineMesh m(3);
  std::vector<std::vector<float>> in(3, std::vector<float>(64, 1.0f)), out = in;
  // Rank 1 is waiting in the collective when rank 0's call is refused; rank 2 posts it after.
  auto b = m.e[1]->start(0, allreduce(1, 3), in[1].data(), out[1].data(), "test");
  m.e[0]->refuse(0, "the reason");
  m.progress();
  auto eb = outcome(m, *m.e[1], *b);
  ASSERT_TRUE(eb) << "rank 1 completed without rank 0";
  EXPECT_EQ(eb->kind(), Error::Kind::mismatch) << eb->what();
  EXPECT_TRUE(has(*eb, "allreduce #0: rank 0's call was refused before it started: the reason")) << eb->what();
  try {
    m.e[2]->start(0, allreduce(2, 3), in[2].data(), out[2].data(), "test");
    FAIL() << "rank 2 started a collective that rank 0 refused";
  } catch (const Error& x) {
    EXPECT_EQ(x.kind(), Error::Kind::mismatch) << x.what();
    EXPECT_TRUE(has(x, "allreduce #0: rank 0's call was refused before it started: the reason")) << x.what();
  }
  // Then every engine is unusable, as after any failed collective: rank 0 was told by its peers.
  m.progress();
  for (int r = 0; r < 3; ++r) {
    try {
      m.e[r]->start(0, allreduce(r, 3), in[r].data(), out[r].data(), "test");
      FAIL() << "rank " << r << " started a collective after the failed one";
    } catch (const Error& x) {
      EXPECT_TRUE(has(x, "rank 0's call was refused before it started: the reason")) << r << ": " << x.what();
      EXPECT_TRUE(has(x, "unusable")) << r << ": " << x.what();
    }
  }
}

TEST(EngineRefuse, ACallRefusedOnEveryRankLosesNothing) {
  EngineMesh m(3);
  // Ranks refuse the same collective in turn, some after hearing another's refusal, some before.
  m.e[1]->refuse(0, "one");
  m.progress();
  m.e[0]->refuse(0, "zero");
  m.e[2]->refuse(0, "two");
  m.progress();
  std::vector<std::vector<float>> in(3, std::vector<float>(64, 2.0f)), out = in;
  std::vector<std::shared_ptr<CollOp>> ops;
  for (int r = 0; r < 3; ++r) ops.push_back(m.e[r]->start(0, allreduce(r, 3), in[r].data(), out[r].data(), "test"));
  for (int r = 0; r < 3; ++r) {
    auto e = outcome(m, *m.e[r], *ops[r]);
    EXPECT_FALSE(e) << r << ": " << e->what();
    EXPECT_EQ(ops[r]->info().seq, 1u);  // the refused call had #0 on every rank
    EXPECT_EQ(out[r][63], 6.0f) << r;
  }
}

namespace {

// Rank 1 is a raw socket: it writes refusals by hand.
struct WithRawPeer : test::RawPeer {
  WithRawPeer() { e->add_comm(5, {0}); }  // a communicator rank 1 is not part of
  // Rank 0's allreduce, waiting for rank 1 when `send` writes refusals, must fail with a mismatch
  // saying `what`.
  template <class F>
  void expect_failed_by(F&& send, const std::string& what) {
    std::vector<float> in(64, 1.0f), out(64);
    auto a = e->start(0, allreduce(0, 2), in.data(), out.data(), "test");
    send();
    for (int k = 0; k < 20; ++k) e->progress(1);
    try {
      e->wait(*a);
      FAIL() << "completed without rank 1";
    } catch (const Error& x) {
      EXPECT_EQ(x.kind(), Error::Kind::mismatch) << x.what();
      EXPECT_TRUE(has(x, what)) << x.what();
    }
  }
  // Writes a refusal of (comm, seq) with `text`, running the engine while the socket is full.
  void refusal(std::uint32_t comm, std::uint64_t seq, const std::string& text) {
    transport::WireHeader h;
    h.kind = static_cast<std::uint16_t>(transport::MsgKind::refuse);
    h.comm_id = comm;
    h.seq = seq;
    h.bytes = text.size();
    std::string bytes(reinterpret_cast<const char*>(&h), sizeof h);
    bytes += text;
    EXPECT_EQ(write(bytes.data(), bytes.size()), bytes.size());
  }
};

}  // namespace

TEST(EngineRefuse, ARefusalIsChargedToItsSenderWhateverItsTextSays) {
  WithRawPeer t;
  t.expect_failed_by([&] { t.refusal(0, 0, "rank 7 refused, not rank 1"); },
                     "allreduce #0: rank 1's call was refused before it started: rank 7 refused");
}

TEST(EngineRefuse, AForgedRefusalOfAnotherCommunicatorOrAFloodIsAnErrorNamingTheSender) {
  {
    WithRawPeer t;  // comm 5 is rank 0's alone
    t.expect_failed_by([&] { t.refusal(5, 0, "forged"); }, "world rank 1 sent a refusal for a communicator it is not part of");
  }
  WithRawPeer t;
  t.expect_failed_by(
      [&] {
        for (std::uint64_t s = 1; s <= Engine::kMaxRefusals + 1; ++s) t.refusal(0, s, "x");  // collectives to come
      },
      "world rank 1 sent more than 4096 refusals");
}
