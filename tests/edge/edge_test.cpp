// The edge engine with real processes and sockets: two jobs side by side, the model's memory
// traffic against the engine's counters, a rank that dies (its memory reclaimed, its peer told),
// an engine that dies (every attached rank told, not timed out), and the host accumulator
// policies on the engine. Isolation attacks: edge_isolation_test.cpp.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <csignal>
#include <cstring>
#include <map>
#include <random>
#include <thread>

#include "../coll/wide_reference.hpp"
#include "coll/local_executor.hpp"
#include "edge/client.hpp"
#include "edge/engine.hpp"
#include "sim/analytical.hpp"
#include "tests/edge/edge_util.hpp"

using namespace inc;
using namespace inc::edge;
using namespace inc::edge::test;
using namespace std::chrono_literals;

TEST(EdgeEngine, RunsTheCollectivesOfTwoJobsApart) {
  const auto path = fresh_path();
  EngineThread eng(path);
  auto a = attach_job(path, 1001, 3);
  auto b = attach_job(path, 1002, 2);
  // Job a stages ordinary buffers; job b uses registered memory (zero copy).
  std::vector<std::vector<std::int32_t>> in(3, std::vector<std::int32_t>(5000)), out = in;
  std::vector<std::shared_ptr<EdgeOp>> ops;
  for (int r = 0; r < 3; ++r) {
    for (int i = 0; i < 5000; ++i) in[r][i] = r * 1000 + i;
    ops.push_back(a[r]->start(0, allreduce_params(r, 3, 5000), in[r].data(), out[r].data()));
  }
  std::int32_t* bb[2];
  for (int r = 0; r < 2; ++r) {
    bb[r] = static_cast<std::int32_t*>(b[r]->alloc(64 * sizeof(std::int32_t)));
    for (int i = 0; i < 64; ++i) bb[r][i] = -r - i;
    auto p = allreduce_params(r, 2, 64);
    p.in_place = true;
    ops.push_back(b[r]->start(0, p, bb[r], bb[r]));
  }
  for (int r = 0; r < 3; ++r) a[r]->wait(*ops[r]);
  for (int r = 0; r < 2; ++r) b[r]->wait(*ops[3 + r]);
  for (int r = 0; r < 3; ++r)
    for (int i = 0; i < 5000; ++i) ASSERT_EQ(out[r][i], 3000 + 3 * i) << r << " " << i;
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < 64; ++i) ASSERT_EQ(bb[r][i], -1 - 2 * i);
  EXPECT_EQ(eng.engine->stats().attached, 5u);
}

// The engine's memory traffic (docs/EDGE.md, "Memory traffic"): its proxies receive every
// message into host memory and send every message from it, so their counters equal the model's
// host-driven figure (`inc model`'s mem_host per rank, times the ranks) for a ring allreduce,
// with staged and with registered buffers; not its Edge-INC one (a NIC that forwards).
TEST(EdgeEngine, CountsTheModelsHostMemoryBytes) {
  const auto path = fresh_path();
  EngineThread eng(path);
  constexpr int kRanks = 4;
  constexpr std::uint64_t kCount = 1 << 14;  // divisible by the ranks: equal shards
  auto a = attach_job(path, 1003, kRanks);
  for (bool registered : {false, true}) {
    const auto before = eng.engine->stats();
    std::vector<std::vector<std::int32_t>> in(kRanks, std::vector<std::int32_t>(kCount)), out = in;
    std::vector<std::shared_ptr<EdgeOp>> ops;
    for (int r = 0; r < kRanks; ++r) {
      std::int32_t* buf = in[r].data();
      auto p = allreduce_params(r, kRanks, kCount);
      if (registered) {
        buf = static_cast<std::int32_t*>(a[r]->alloc(kCount * sizeof(std::int32_t)));
        p.in_place = true;
      }
      for (std::uint64_t i = 0; i < kCount; ++i) buf[i] = r + static_cast<std::int32_t>(i);
      ops.push_back(a[r]->start(0, p, buf, registered ? buf : out[r].data()));
    }
    for (int r = 0; r < kRanks; ++r) a[r]->wait(*ops[r]);
    const auto after = eng.engine->stats();
    const double n = kCount * sizeof(std::int32_t);
    const sim::StepCounts model = sim::closed_form_counts(Collective::allreduce, coll::Algorithm::ring, kRanks, n);
    EXPECT_EQ(static_cast<double>(after.bytes_received - before.bytes_received), kRanks * model.bytes_recv);
    EXPECT_EQ(static_cast<double>(after.bytes_sent - before.bytes_sent), kRanks * model.bytes_sent);
    EXPECT_EQ(static_cast<double>(after.bytes_received - before.bytes_received + after.bytes_sent - before.bytes_sent),
              kRanks * sim::host_memory_bytes(model, sim::Offload::host))
        << (registered ? "registered" : "staged");
    EXPECT_EQ(sim::host_memory_bytes(model, sim::Offload::host) / n, 3.0);
  }
}

TEST(EdgeFaults, ADeadRankHasItsMemoryReclaimedAndItsPeerTold) {
  const auto path = fresh_path();
  EngineThread eng(path);
  const auto before = eng.engine->stats();
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {  // rank 1: attaches, registers 1 MiB, waits, dies without a word
    std::unique_ptr<EdgeClient> c;
    try {
      c = std::make_unique<EdgeClient>(config(path, 5001, 1, 2));
      c->attach();
      c->add_comm(0, {0, 1});
      c->alloc(1 << 20);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "rank 1: %s\n", e.what());
      ::_exit(4);
    }
    char x;
    if (::read(go[0], &x, 1) != 1) ::_exit(3);
    ::kill(::getpid(), SIGKILL);
  }
  EdgeClient r0(config(path, 5001, 0, 2));
  r0.attach();
  r0.add_comm(0, {0, 1});
  wait_until([&] { return eng.engine->stats().mapped_bytes >= before.mapped_bytes + (1u << 20); });
  EXPECT_GE(eng.engine->stats().mapped_bytes, before.mapped_bytes + (1u << 20));
  std::vector<std::int32_t> v(1000, 1), w(1000);
  auto op = r0.start(0, allreduce_params(0, 2, 1000), v.data(), w.data());  // rank 1 never joins
  ASSERT_EQ(::write(go[1], "x", 1), 1);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  try {
    r0.wait(*op);
    FAIL() << "the collective completed without its peer";
  } catch (const Error& e) {
    EXPECT_NE(e.kind(), Error::Kind::timeout) << e.what();  // told, not timed out
    EXPECT_NE(std::string(e.what()).find("edge engine"), std::string::npos) << e.what();
  }
  // Rank 1's proxy is gone with its rings and registrations; only rank 0's remain.
  wait_until([&] { return eng.engine->stats().attached == 1; });
  EXPECT_EQ(eng.engine->stats().attached, 1u);
  EXPECT_LT(eng.engine->stats().mapped_bytes, before.mapped_bytes + (1u << 20));
  ::close(go[0]);
  ::close(go[1]);
}

TEST(EdgeFaults, ADeadEngineIsAnErrorForEveryAttachedRank) {
  const auto path = fresh_path();
  const pid_t pid = ::fork();
  if (pid == 0) {
    try {
      EngineConfig c;
      c.socket_path = path;
      EdgeEngine e(c);
      std::atomic<bool> stop{false};
      e.run(stop);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "engine: %s\n", e.what());
    }
    ::_exit(0);
  }
  wait_until([&] { return ::access(path.c_str(), F_OK) == 0; });
  auto ranks = attach_job(path, 6001, 2);
  std::vector<std::int32_t> v(1000, 1), w(1000);
  auto op = ranks[0]->start(0, allreduce_params(0, 2, 1000), v.data(), w.data());  // waits for rank 1
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  try {
    ranks[0]->wait(*op);
    FAIL() << "completed without the engine";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::peer_failure) << e.what();
    EXPECT_NE(std::string(e.what()).find("edge engine at " + path), std::string::npos) << e.what();
  }
  // The other rank, idle when the engine died, is told at its next call.
  try {
    ranks[1]->start(0, allreduce_params(1, 2, 1000), v.data(), w.data());
    FAIL() << "posted to a dead engine";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::peer_failure) << e.what();
  }
  ::unlink(path.c_str());
}

// The host accumulator policies on the engine (docs/EDGE.md "Accumulator policies"): the proxy
// builds the host runtime's schedule for the policy the descriptor carries (reproducible too:
// its i32 limbs through the reduce handler), so every rank gets the bits of the same schedules
// run by the local executor (the hosts' oracle; mp_host_wide
// checks the host runtime against the same reference), wide/widen differ from narrow on inputs
// where rounding every step loses, and the completion says which policy ran and its bytes.
TEST(EdgeNumerics, EveryHostPolicyGivesTheHostScheduleBitsOnTheEngine) {
  const auto path = fresh_path();
  EngineThread eng(path);
  const int P = 3;
  auto job = attach_job(path, 7001, P);
  struct Case {
    Collective coll;
    coll::Algorithm algo;
  };
  const Case cases[] = {{Collective::allreduce, coll::Algorithm::ring},
                        {Collective::allreduce, coll::Algorithm::recursive_doubling},
                        {Collective::allreduce, coll::Algorithm::rabenseifner},
                        {Collective::reduce_scatter, coll::Algorithm::ring}};
  for (DataType t : {DataType::bf16, DataType::f16, DataType::e4m3})
    for (const Case& c : cases) {
      coll::CollectiveParams p;
      p.coll = c.coll;
      p.algo = c.algo;
      p.dtype = t;
      p.nranks = P;
      p.count = 3001;
      const std::uint64_t in_units = c.coll == Collective::reduce_scatter ? p.count * P : p.count;
      std::mt19937_64 rng(static_cast<std::uint64_t>(t) * 7 + static_cast<std::uint64_t>(c.algo));
      std::vector<std::vector<std::byte>> in;
      for (int r = 0; r < P; ++r) in.push_back(inc::testing::wide::random_input(t, in_units, rng));
      std::map<Accumulate, std::vector<std::vector<std::byte>>> got;
      for (Accumulate a : {Accumulate::narrow, Accumulate::widen, Accumulate::wide, Accumulate::reproducible}) {
        const std::string what = fmt::format("{} {} {} {}", name(t), name(c.coll), coll::name(c.algo), name(a));
        p.accumulate = a;
        auto bufs = inc::testing::wide::make_buffers(p, in);
        coll::run_local(p, coll::build_schedules(p), bufs);
        std::vector<Completion> done;
        got[a] = run_job(job, p, in, &done);
        for (int r = 0; r < P; ++r) {
          ASSERT_EQ(got[a][r], inc::testing::wide::result_of(p, bufs[r], r)) << what << " rank " << r;
          // (reproducible: the i32 limbs through the reduce handler; e4m3 has none: narrow)
          EXPECT_EQ(done[r].accumulate, static_cast<std::uint8_t>(coll::host_accumulate(p))) << what;
          EXPECT_EQ(done[r].events_counted, 1u) << what;
          coll::CollectiveParams mine = p;
          mine.rank = r;
          EXPECT_EQ(done[r].bytes_sent, coll::summarize(coll::build_schedule(mine)).send_bytes) << what;
        }
      }
      // widen and wide: one rounding, the same bits; narrow rounds every step: other bits.
      EXPECT_EQ(got[Accumulate::widen], got[Accumulate::wide]) << name(t) << " " << coll::name(c.algo);
      EXPECT_NE(got[Accumulate::narrow], got[Accumulate::wide]) << name(t) << " " << coll::name(c.algo);
    }
}

// The proxy's adds and roundings count their overflow events, as the hosts' do: an f16 sum of
// 40000 on every rank overflows at its first add under narrow (on the rank that adds it), under
// widen where its owner rounds the f32 total (120000 > 65504) once, under wide where every rank
// does: 300, 300 and 3 x 300 events over the ranks.
TEST(EdgeNumerics, TheEnginesCompletionCountsOverflowEvents) {
  const auto path = fresh_path();
  EngineThread eng(path);
  auto job = attach_job(path, 5002, 3);
  coll::CollectiveParams p;
  p.algo = coll::Algorithm::ring;
  p.dtype = DataType::f16;
  p.nranks = 3;
  p.count = 300;
  std::vector<std::vector<std::byte>> in(3, inc::testing::wide::round_all(DataType::f16, std::vector<double>(300, 40000.0)));
  for (Accumulate a : {Accumulate::narrow, Accumulate::widen, Accumulate::wide}) {
    p.accumulate = a;
    std::vector<Completion> done;
    run_job(job, p, in, &done);
    std::uint64_t events = 0;
    for (const auto& c : done) events += c.overflow_events;
    EXPECT_EQ(events, a == Accumulate::wide ? 900u : 300u) << name(a);
  }
}

// A conversion handler that re-encodes this call's messages cannot carry f32 partial sums:
// refused on every rank with the policy named (not run narrow); narrow runs with it.
TEST(EdgeNumerics, AConvertingHandlerRefusesAWideAccumulator) {
  const auto path = fresh_path();
  EngineThread eng(path);
  std::vector<std::unique_ptr<EdgeClient>> cs;
  for (int r = 0; r < 2; ++r) {
    auto c = config(path, 5003, r, 2);
    c.handler = "int8";  // converts f32, f16 and bf16 messages
    cs.push_back(std::make_unique<EdgeClient>(c));
  }
  std::vector<std::future<void>> f;
  for (auto& c : cs) f.push_back(std::async(std::launch::async, [&c] { c->attach(); }));
  for (auto& x : f) x.get();
  for (auto& c : cs) c->add_comm(0, {0, 1});
  coll::CollectiveParams p;
  p.algo = coll::Algorithm::ring;
  p.dtype = DataType::bf16;
  p.nranks = 2;
  p.count = 256;
  std::mt19937_64 rng(3);
  std::vector<std::vector<std::byte>> in;
  for (int r = 0; r < 2; ++r) in.push_back(inc::testing::wide::random_input(DataType::bf16, 256, rng));
  for (Accumulate a : {Accumulate::widen, Accumulate::wide}) {
    p.accumulate = a;
    for (int r = 0; r < 2; ++r) {
      p.rank = r;
      std::vector<std::byte> out(512);
      auto op = cs[r]->start(0, p, in[r].data(), out.data());
      try {
        cs[r]->wait(*op);
        ADD_FAILURE() << name(a) << " ran with a converting handler";
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), Error::Kind::invalid_argument) << e.what();
        EXPECT_NE(std::string(e.what()).find(fmt::format("accumulator policy '{}'", name(a))), std::string::npos)
            << e.what();
      }
    }
  }
  p.accumulate = Accumulate::narrow;
  std::vector<Completion> done;
  run_job(cs, p, in, &done);
  EXPECT_EQ(done[0].converted, 1u);
  EXPECT_EQ(done[0].accumulate, static_cast<std::uint8_t>(Accumulate::narrow));
}
