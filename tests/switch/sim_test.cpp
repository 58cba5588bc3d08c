// The real protocol code (switch data plane + worker protocol) on the deterministic simulated
// network: seeded loss, duplication, reordering and delay; exact results asserted.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <random>
#include <vector>

#include "tests/switch/sim_util.hpp"

namespace inc::sw {
namespace {

using namespace inc::sw::testing;


// One seeded run: n workers, a random i32 allreduce then a random reduce_scatter, on a flat or
// two-level tree. Returns a failure description (empty on success).
struct RunStats {
  std::uint64_t lost = 0, duplicated = 0, reordered = 0, retransmissions = 0, switch_duplicates = 0;
};

std::string exactly_once_run(std::uint64_t seed, double loss, RunStats& st) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int lo, int hi) { return int(std::uniform_int_distribution<int>(lo, hi)(rng)); };
  const bool hier = pick(0, 3) == 0;
  const std::uint32_t slots = std::uint32_t(pick(1, 4));
  const std::uint32_t elems = std::uint32_t(pick(1, 3) * 8);
  // A third of the runs stripe the stream over 2-3 lanes (on a tree: spine and leaf lanes).
  const std::uint16_t lanes = pick(0, 2) == 0 ? std::uint16_t(pick(2, 3)) : 1;
  Topo t;
  std::uint16_t n;
  if (hier) {
    std::vector<std::uint16_t> per = {std::uint16_t(pick(1, 3)), std::uint16_t(pick(1, 3))};
    n = std::uint16_t(per[0] + per[1]);
    t = lanes > 1 ? two_level_lanes(seed, faults_for(loss), per, slots, elems, lanes, lanes)
                  : two_level(seed, faults_for(loss), per, slots, elems);
  } else {
    n = std::uint16_t(pick(1, 6));
    t = lanes > 1 ? flat_lanes(seed, faults_for(loss), n, slots, elems, lanes)
                  : flat(seed, faults_for(loss), n, slots, elems);
  }
  const std::uint64_t count = std::uint64_t(pick(0, 200));
  const bool small = pick(0, 1) == 0;
  std::vector<std::vector<std::int32_t>> in(n, std::vector<std::int32_t>(count));
  std::vector<std::uint32_t> expect(count, 0);
  for (auto& v : in)
    for (std::uint64_t i = 0; i < count; ++i) {
      v[i] = small ? pick(-1000, 1000) : std::int32_t(rng());
      expect[i] += std::uint32_t(v[i]);  // exact modulo 2^32
    }
  std::vector<std::vector<std::int32_t>> out(n, std::vector<std::int32_t>(count, -1));
  for (std::uint16_t r = 0; r < n; ++r)
    t.c->start(r, WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(in[r]), wbytes(out[r]),
                                      count, n));
  if (!t.c->run(100 * kSecond)) return "allreduce did not finish";
  for (std::uint16_t r = 0; r < n; ++r) {
    auto& w = t.c->worker(r);
    if (!w.done()) return "rank " + std::to_string(r) + ": " + w.error().message;
    for (std::uint64_t i = 0; i < count; ++i)
      if (std::uint32_t(out[r][i]) != expect[i])
        return "rank " + std::to_string(r) + " element " + std::to_string(i) + " wrong";
    if (small && w.report().overflow) return "overflow flag without overflow";
  }
  // Then a reduce_scatter on the same job stream (slots reused across collectives).
  const std::uint64_t shard = std::uint64_t(pick(1, 40));
  std::vector<std::vector<std::int32_t>> rin(n, std::vector<std::int32_t>(shard * n));
  std::vector<std::int64_t> rexp(shard * n, 0);
  for (auto& v : rin)
    for (std::uint64_t i = 0; i < v.size(); ++i) {
      v[i] = pick(-100000, 100000);
      rexp[i] += v[i];
    }
  std::vector<std::vector<std::int32_t>> rout(n, std::vector<std::int32_t>(shard, -1));
  for (std::uint16_t r = 0; r < n; ++r)
    t.c->start(r, WorkerOp::reduce_scatter(NumKind::i32, ReduceKind::sum, cbytes(rin[r]),
                                           wbytes(rout[r]), shard, n, r));
  if (!t.c->run(200 * kSecond)) return "reduce_scatter did not finish";
  for (std::uint16_t r = 0; r < n; ++r) {
    auto& w = t.c->worker(r);
    if (!w.done()) return "rank " + std::to_string(r) + ": " + w.error().message;
    for (std::uint64_t i = 0; i < shard; ++i)
      if (rout[r][i] != rexp[r * shard + i])
        return "reduce_scatter rank " + std::to_string(r) + " element " + std::to_string(i);
    st.retransmissions += w.report().retransmissions;
  }
  st.lost += t.c->net().lost;
  st.duplicated += t.c->net().duplicated;
  st.reordered += t.c->net().reordered;
  for (std::size_t s = 0; s < t.switches.size(); ++s) st.switch_duplicates += t.c->sw(s).counters().duplicates;
  return {};
}

class ExactlyOnce : public ::testing::TestWithParam<double> {};

TEST_P(ExactlyOnce, ThousandsOfSeededRuns) {
  const double loss = GetParam();
  // 500 x 4 loss rates = 2000 runs in CI. The soak target (ninja switch_sim_soak) sets
  // INC_SOAK_RUNS and INC_SOAK_SEED for a longer run with other seeds.
  const char* env_runs = std::getenv("INC_SOAK_RUNS");
  const char* env_seed = std::getenv("INC_SOAK_SEED");
  const int runs = env_runs ? std::atoi(env_runs) : 500;
  const std::uint64_t base = env_seed ? std::strtoull(env_seed, nullptr, 10) : 0;
  RunStats st;
  for (int i = 0; i < runs; ++i) {
    std::uint64_t seed = base + 1000003ull * std::uint64_t(loss * 100 + 1) + std::uint64_t(i);
    std::string err = exactly_once_run(seed, loss, st);
    ASSERT_TRUE(err.empty()) << "seed " << seed << " loss " << loss << ": " << err;
  }
  std::printf("loss %.2f: %d runs, %llu lost, %llu duplicated, %llu reordered, %llu worker "
              "retransmissions, %llu duplicates refused by switches\n",
              loss, runs, (unsigned long long)st.lost, (unsigned long long)st.duplicated,
              (unsigned long long)st.reordered, (unsigned long long)st.retransmissions,
              (unsigned long long)st.switch_duplicates);
  if (loss > 0) {  // the faults really happened and were absorbed
    EXPECT_GT(st.lost, 0u);
    EXPECT_GT(st.duplicated, 0u);
    EXPECT_GT(st.retransmissions, 0u);
    EXPECT_GT(st.switch_duplicates, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Loss, ExactlyOnce, ::testing::Values(0.0, 0.01, 0.05, 0.20));

// Every collective the switch supports, back to back on one job, flat and two-level.
void all_collectives(Topo& t, std::uint16_t n, std::uint32_t block, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  SCOPED_TRACE("seed " + std::to_string(seed));
  auto run = [&](const char* what) {
    ASSERT_TRUE(t.c->run(1000 * kSecond)) << what;
    for (std::uint16_t r = 0; r < n; ++r)
      ASSERT_TRUE(t.c->worker(r).done()) << what << " rank " << r << ": "
                                         << t.c->worker(r).error().message;
  };
  const std::uint64_t count = 1 + rng() % 300;
  // f32 sum of integer values: exact whatever the arrival order.
  {
    std::vector<std::vector<float>> in(n, std::vector<float>(count));
    std::vector<float> exp(count, 0);
    for (auto& v : in)
      for (std::uint64_t i = 0; i < count; ++i) {
        v[i] = float(int(rng() % 2001) - 1000);
        exp[i] += v[i];
      }
    std::vector<std::vector<float>> out(n, std::vector<float>(count));
    for (std::uint16_t r = 0; r < n; ++r)
      t.c->start(r, WorkerOp::allreduce(NumKind::f32, ReduceKind::sum, cbytes(in[r]), wbytes(out[r]), count, n));
    run("f32 allreduce");
    for (auto& o : out) ASSERT_EQ(o, exp);
  }
  // fx32: order-independent; equals the block reference bit for bit and is close to the sum.
  {
    std::vector<std::vector<float>> in(n, std::vector<float>(count));
    std::normal_distribution<float> g(0, 100);
    for (auto& v : in)
      for (auto& x : v) x = g(rng);
    std::vector<std::vector<float>> out(n, std::vector<float>(count));
    for (std::uint16_t r = 0; r < n; ++r)
      t.c->start(r, WorkerOp::allreduce(NumKind::fx32, ReduceKind::sum, cbytes(in[r]), wbytes(out[r]), count, n));
    run("fx32 allreduce");
    auto ref = fx32_reference(in, 0, count, block, n);
    for (auto& o : out) ASSERT_EQ(std::memcmp(o.data(), ref.data(), count * 4), 0);
    for (std::uint64_t i = 0; i < count; ++i) {
      double exact = 0, mag = 0;
      for (auto& v : in) {
        exact += v[i];
        mag = std::max(mag, double(std::fabs(v[i])));
      }
      // Quantisation: each term within half a fixed-point step of 2^(e - 30 + h) <= 4 mag 2^-30 2^h.
      ASSERT_NEAR(out[0][i], exact, n * 8 * mag * std::ldexp(1.0, fx32_headroom(n) - 31) + std::fabs(exact) * 1e-7);
    }
  }
  // i32 max and min.
  {
    std::vector<std::vector<std::int32_t>> in(n, std::vector<std::int32_t>(count));
    std::vector<std::int32_t> mx(count, INT32_MIN), mn(count, INT32_MAX);
    for (auto& v : in)
      for (std::uint64_t i = 0; i < count; ++i) {
        v[i] = std::int32_t(rng());
        mx[i] = std::max(mx[i], v[i]);
        mn[i] = std::min(mn[i], v[i]);
      }
    std::vector<std::vector<std::int32_t>> out(n, std::vector<std::int32_t>(count));
    for (std::uint16_t r = 0; r < n; ++r)
      t.c->start(r, WorkerOp::allreduce(NumKind::i32, ReduceKind::max, cbytes(in[r]), wbytes(out[r]), count, n));
    run("i32 max");
    for (auto& o : out) ASSERT_EQ(o, mx);
    for (std::uint16_t r = 0; r < n; ++r)
      t.c->start(r, WorkerOp::allreduce(NumKind::i32, ReduceKind::min, cbytes(in[r]), wbytes(out[r]), count, n));
    run("i32 min");
    for (auto& o : out) ASSERT_EQ(o, mn);
  }
  // allgather of raw bytes (sizes not multiple of 4), broadcast, reduce to a root, barrier.
  {
    const std::uint64_t bytes = 1 + rng() % 700;
    std::vector<std::vector<std::uint8_t>> in(n, std::vector<std::uint8_t>(bytes));
    std::vector<std::uint8_t> exp;
    for (auto& v : in) {
      for (auto& x : v) x = std::uint8_t(rng());
      exp.insert(exp.end(), v.begin(), v.end());
    }
    std::vector<std::vector<std::uint8_t>> out(n, std::vector<std::uint8_t>(bytes * n));
    for (std::uint16_t r = 0; r < n; ++r)
      t.c->start(r, WorkerOp::allgather(cbytes(in[r]), wbytes(out[r]), bytes, n, r));
    run("allgather");
    for (auto& o : out) ASSERT_EQ(o, exp);
    const std::uint16_t root = std::uint16_t(rng() % n);
    std::vector<std::vector<std::uint8_t>> buf(n, std::vector<std::uint8_t>(bytes, 0));
    buf[root] = in[root];
    for (std::uint16_t r = 0; r < n; ++r)
      t.c->start(r, WorkerOp::broadcast(wbytes(buf[r]), r == root));
    run("broadcast");
    for (auto& b : buf) ASSERT_EQ(b, in[root]);
  }
  {
    std::vector<std::vector<std::int32_t>> in(n, std::vector<std::int32_t>(count, 3));
    std::vector<std::vector<std::int32_t>> out(n, std::vector<std::int32_t>(count, -1));
    const std::uint16_t root = std::uint16_t(rng() % n);
    for (std::uint16_t r = 0; r < n; ++r)
      t.c->start(r, WorkerOp::reduce(NumKind::i32, ReduceKind::sum, cbytes(in[r]), wbytes(out[r]), count, n, r == root));
    run("reduce");
    for (std::uint16_t r = 0; r < n; ++r)
      ASSERT_EQ(out[r], std::vector<std::int32_t>(count, r == root ? 3 * n : -1));
    for (std::uint16_t r = 0; r < n; ++r) t.c->start(r, WorkerOp::barrier());
    run("barrier");
    for (std::uint16_t r = 0; r < n; ++r) ASSERT_EQ(t.c->worker(r).report().chunks, 1u);
    for (std::uint16_t r = 0; r < n; ++r)  // count 0: completes at once, no chunk
      t.c->start(r, WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, {}, {}, 0, n));
    run("empty allreduce");
  }
}

TEST(SimCollectives, FlatUnderLoss) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    auto t = flat(seed, faults_for(0.05), 5, 3, 16);
    all_collectives(t, 5, 16, seed);
    if (HasFatalFailure()) return;
  }
}

TEST(SimCollectives, TwoLeavesAndSpineUnderLoss) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    auto t = two_level(seed, faults_for(0.05), {2, 3}, 3, 16);
    all_collectives(t, 5, 16, seed);
    if (HasFatalFailure()) return;
    // The leaf aggregated locally and sent one contribution per chunk to the spine.
    auto spine = t.c->sw(0).snapshot();
    auto leaf = t.c->sw(1).snapshot();
    EXPECT_EQ(spine.jobs[0].spec.members, 2);
    EXPECT_GT(leaf.counters.aggregations, 0u);
    EXPECT_EQ(spine.counters.aggregations, leaf.counters.results);
  }
}

TEST(SimCollectives, Fx32IsBitwiseIndependentOfArrivalOrderAndTree) {
  const std::uint16_t n = 6;
  const std::uint64_t count = 500;
  std::mt19937_64 rng(99);
  std::normal_distribution<float> g(0, 1e3);
  std::vector<std::vector<float>> in(n, std::vector<float>(count));
  for (auto& v : in)
    for (auto& x : v) x = g(rng);
  std::vector<float> first;
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    Topo t = seed % 2 ? flat(seed, faults_for(0.05), n, 4, 32)
                      : two_level(seed, faults_for(0.05), {std::uint16_t(seed % 5 + 1), std::uint16_t(n - seed % 5 - 1)}, 4, 32);
    std::vector<std::vector<float>> out(n, std::vector<float>(count));
    for (std::uint16_t r = 0; r < n; ++r)
      t.c->start(r, WorkerOp::allreduce(NumKind::fx32, ReduceKind::sum, cbytes(in[r]), wbytes(out[r]), count, n));
    ASSERT_TRUE(t.c->run(100 * kSecond));
    for (std::uint16_t r = 0; r < n; ++r) ASSERT_TRUE(t.c->worker(r).done()) << t.c->worker(r).error().message;
    if (first.empty()) first = out[0];
    for (auto& o : out) ASSERT_EQ(std::memcmp(o.data(), first.data(), count * 4), 0) << "seed " << seed;
  }
}

TEST(SimFaults, DynamicJobLostInRestartIsDetected) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    auto t = flat(seed, faults_for(0.01), 4, 2, 8);
    const std::uint64_t count = 2000;
    std::vector<std::vector<std::int32_t>> in(4, std::vector<std::int32_t>(count, 1));
    std::vector<std::vector<std::int32_t>> out(4, std::vector<std::int32_t>(count, 0));
    for (std::uint16_t r = 0; r < 4; ++r)
      t.c->start(r, WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(in[r]), wbytes(out[r]), count, 4));
    t.c->run_until([&] { return t.c->worker(0).report().chunks > 5 + seed; }, 10 * kSecond);
    SwitchConfig sc = t.c->sw(0).config();
    sc.incarnation += 1000;
    t.c->restart_switch(0, sc);  // all state gone, job not re-admitted
    ASSERT_TRUE(t.c->run(100 * kSecond));
    int restarted = 0;
    for (std::uint16_t r = 0; r < 4; ++r) {
      auto& w = t.c->worker(r);
      if (w.done()) {
        ASSERT_EQ(out[r], std::vector<std::int32_t>(count, 4)) << "seed " << seed;  // never wrong
      } else {
        EXPECT_EQ(w.error().kind, WorkerErrorKind::switch_restarted) << w.error().message;
        EXPECT_TRUE(w.error().retryable());
        ++restarted;
      }
    }
    EXPECT_GT(restarted, 0) << "seed " << seed;
  }
}

TEST(SimFaults, StaticJobReadmittedAfterRestartIsDetectedThenRetrySucceeds) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    auto t = flat(seed, faults_for(0.05), 3, 2, 8);
    const std::uint64_t count = 1000;
    std::vector<std::vector<std::int32_t>> in(3, std::vector<std::int32_t>(count, 2));
    std::vector<std::vector<std::int32_t>> out(3, std::vector<std::int32_t>(count, 0));
    auto start_all = [&] {
      for (std::uint16_t r = 0; r < 3; ++r)
        t.c->start(r, WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(in[r]), wbytes(out[r]), count, 3));
    };
    start_all();
    t.c->run_until([&] { return t.c->worker(1).report().chunks > 3 + seed; }, 10 * kSecond);
    SwitchConfig sc = t.c->sw(0).config();
    sc.incarnation += 1000;
    t.c->restart_switch(0, sc);
    ASSERT_EQ(t.c->sw(0).admit({7, 3, 2}, t.c->now()), proto::Reason::ok);  // from config
    ASSERT_TRUE(t.c->run(100 * kSecond));
    bool any_failed = false;
    for (std::uint16_t r = 0; r < 3; ++r) {
      auto& w = t.c->worker(r);
      if (w.done()) {
        ASSERT_EQ(out[r], std::vector<std::int32_t>(count, 6));
      } else {
        any_failed = true;
        EXPECT_EQ(w.error().kind, WorkerErrorKind::switch_restarted) << w.error().message;
      }
    }
    ASSERT_TRUE(any_failed) << "seed " << seed;
    // The runtime agrees to retry: every member forgets its join and starts again.
    for (std::uint16_t r = 0; r < 3; ++r) t.c->worker(r).reset();
    for (auto& o : out) std::fill(o.begin(), o.end(), 0);
    start_all();
    ASSERT_TRUE(t.c->run(200 * kSecond));
    for (std::uint16_t r = 0; r < 3; ++r) {
      ASSERT_TRUE(t.c->worker(r).done()) << t.c->worker(r).error().message;
      ASSERT_EQ(out[r], std::vector<std::int32_t>(count, 6));
    }
  }
}

TEST(SimFaults, SpineRestartFailsTheJobAtTheLeaves) {
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    auto t = two_level(seed, faults_for(seed % 2 ? 0.05 : 0.01), {2, 2}, 2, 8);
    const std::uint64_t count = 1000;
    std::vector<std::vector<std::int32_t>> in(4, std::vector<std::int32_t>(count, 1));
    std::vector<std::vector<std::int32_t>> out(4, std::vector<std::int32_t>(count, 0));
    for (std::uint16_t r = 0; r < 4; ++r)
      t.c->start(r, WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(in[r]), wbytes(out[r]), count, 4));
    t.c->run_until([&] { return t.c->worker(0).report().chunks > 4; }, 10 * kSecond);
    SwitchConfig sc = t.c->sw(0).config();
    sc.incarnation += 1000;
    t.c->restart_switch(0, sc);
    ASSERT_EQ(t.c->sw(0).admit({7, 2, 2}, t.c->now()), proto::Reason::ok);
    ASSERT_TRUE(t.c->run(100 * kSecond));
    int failed = 0;
    for (std::uint16_t r = 0; r < 4; ++r) {
      auto& w = t.c->worker(r);
      if (w.done()) {
        ASSERT_EQ(out[r], std::vector<std::int32_t>(count, 4));
      } else {
        ++failed;
        EXPECT_EQ(w.error().kind, WorkerErrorKind::job_failed) << w.error().message;
        EXPECT_NE(w.error().message.find("stale_epoch"), std::string::npos) << w.error().message;
      }
    }
    EXPECT_EQ(failed, 4) << "seed " << seed;
    EXPECT_GT(t.c->sw(1).counters().jobs_failed + t.c->sw(2).counters().jobs_failed, 0u);
    // Retry: every member re-joins; the leaves start the failed job afresh and re-join the
    // restarted spine; the collective completes exactly.
    for (std::uint16_t r = 0; r < 4; ++r) {
      t.c->worker(r).reset();
      std::fill(out[r].begin(), out[r].end(), 0);
      t.c->start(r, WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(in[r]), wbytes(out[r]), count, 4));
    }
    ASSERT_TRUE(t.c->run(200 * kSecond));
    for (std::uint16_t r = 0; r < 4; ++r) {
      ASSERT_TRUE(t.c->worker(r).done()) << "seed " << seed << ": " << t.c->worker(r).error().message;
      ASSERT_EQ(out[r], std::vector<std::int32_t>(count, 4));
    }
  }
}

// Without loss each worker sends its n bytes once and receives the n-byte result once (plus
// 32-byte headers and the join exchange): half of a ring allreduce's 2(p-1)/p n each way.
TEST(SimCollectives, AllreduceMovesNBytesEachWay) {
  for (std::uint16_t n : {2, 5, 8}) {
    SimFaults none;
    none.jitter = 0;  // no reordering either: no spurious retransmission
    auto t = flat(1, none, n, 8, 256);
    const std::uint64_t count = 100000, bytes = count * 4, chunks = (count + 255) / 256;
    std::vector<std::vector<std::int32_t>> in(n, std::vector<std::int32_t>(count, 1));
    std::vector<std::vector<std::int32_t>> out(n, std::vector<std::int32_t>(count));
    for (std::uint16_t r = 0; r < n; ++r)
      t.c->start(r, WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(in[r]), wbytes(out[r]), count, n));
    ASSERT_TRUE(t.c->run(100 * kSecond));
    for (std::uint16_t r = 0; r < n; ++r) {
      const auto& rep = t.c->worker(r).report();
      ASSERT_TRUE(t.c->worker(r).done());
      ASSERT_EQ(out[r], std::vector<std::int32_t>(count, n));
      EXPECT_EQ(rep.retransmissions, 0u);
      EXPECT_EQ(rep.bytes_sent, bytes + (chunks + 1) * proto::kHeaderBytes);  // + join
      EXPECT_EQ(rep.bytes_received, bytes + chunks * proto::kHeaderBytes +
                                        proto::kHeaderBytes + proto::kJoinInfoBytes);  // + join_ack
    }
  }
}

TEST(SimFaults, DeadWorkerIsNamedByTheOthers) {
  auto t = flat(5, faults_for(0.05), 4, 2, 8);
  const std::uint64_t count = 100;
  std::vector<std::vector<std::int32_t>> in(4, std::vector<std::int32_t>(count, 1));
  std::vector<std::vector<std::int32_t>> out(4, std::vector<std::int32_t>(count, 0));
  for (std::uint16_t r = 0; r < 4; ++r)
    t.c->start(r, WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(in[r]), wbytes(out[r]), count, 4));
  t.c->run_until([&] { return t.c->worker(2).report().chunks >= 3; }, 10 * kSecond);
  t.c->kill_worker(2);
  ASSERT_TRUE(t.c->run(100 * kSecond));
  for (std::uint16_t r : {0, 1, 3}) {
    auto& w = t.c->worker(r);
    ASSERT_TRUE(w.failed());
    EXPECT_EQ(w.error().kind, WorkerErrorKind::timeout);
    EXPECT_NE(w.error().message.find("missing {2}"), std::string::npos) << w.error().message;
  }
}

TEST(SimFaults, JoinWaitsForAdmission) {
  SimCluster c(3, faults_for(0.05));
  SwitchConfig sc;
  sc.slots = 16;
  sc.slot_elems = 8;
  Endpoint s = c.add_switch(sc);
  c.add_worker(worker_cfg(9, 0, s));
  c.add_worker(worker_cfg(9, 1, s));
  std::vector<std::int32_t> a(50, 1), b(50, 2), oa(50), ob(50);
  c.start(0, WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(a), wbytes(oa), 50, 2));
  c.start(1, WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(b), wbytes(ob), 50, 2));
  c.run_until([] { return false; }, 20 * kMillisecond);  // joins refused: unknown job
  EXPECT_GT(c.sw(0).counters().drops_by_reason[int(proto::Reason::unknown_job)], 0u);
  ASSERT_EQ(c.sw(0).admit({9, 2, 4}, c.now()), proto::Reason::ok);
  ASSERT_TRUE(c.run(100 * kSecond));
  ASSERT_TRUE(c.worker(0).done()) << c.worker(0).error().message;
  EXPECT_EQ(oa, std::vector<std::int32_t>(50, 3));
  EXPECT_EQ(ob, std::vector<std::int32_t>(50, 3));
}

TEST(SimFaults, JoinTimesOutWhenNeverAdmitted) {
  SimCluster c(3, faults_for(0));
  Endpoint s = c.add_switch(SwitchConfig{});
  c.add_worker(worker_cfg(9, 0, s));
  std::vector<std::int32_t> a(5, 1), oa(5);
  c.start(0, WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(a), wbytes(oa), 5, 1));
  ASSERT_TRUE(c.run(100 * kSecond));
  ASSERT_TRUE(c.worker(0).failed());
  EXPECT_EQ(c.worker(0).error().kind, WorkerErrorKind::timeout);
  EXPECT_NE(c.worker(0).error().message.find("does not know the job"), std::string::npos);
}

TEST(SimFaults, UnsupportedTypeFallsBackToFx32) {
  auto t = flat(4, faults_for(0.01), 3, 2, 8, 7, proto::cap::i32_sum | proto::cap::i32_minmax | proto::cap::raw_copy);
  std::vector<std::vector<float>> in(3, std::vector<float>(20, 1.5f)), out(3, std::vector<float>(20));
  for (std::uint16_t r = 0; r < 3; ++r)
    t.c->start(r, WorkerOp::allreduce(NumKind::f32, ReduceKind::sum, cbytes(in[r]), wbytes(out[r]), 20, 3));
  ASSERT_TRUE(t.c->run(10 * kSecond));
  for (std::uint16_t r = 0; r < 3; ++r) {
    ASSERT_TRUE(t.c->worker(r).failed());
    EXPECT_EQ(t.c->worker(r).error().kind, WorkerErrorKind::unsupported);
  }
  for (std::uint16_t r = 0; r < 3; ++r)
    t.c->start(r, WorkerOp::allreduce(NumKind::fx32, ReduceKind::sum, cbytes(in[r]), wbytes(out[r]), 20, 3));
  ASSERT_TRUE(t.c->run(10 * kSecond));
  for (std::uint16_t r = 0; r < 3; ++r) {
    ASSERT_TRUE(t.c->worker(r).done()) << t.c->worker(r).error().message;
    EXPECT_EQ(out[r], std::vector<float>(20, 4.5f));
  }
}

// A block holding NaN or infinity on some member travels as f32 (IEEE sums at the switch);
// the other blocks stay fixed point. Before (issue 10) the op failed and took the job down.
TEST(SimFaults, NonFiniteInFx32PropagatesAsIeee) {
  auto t = flat(4, faults_for(0.01), 3, 2, 8);
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<std::vector<float>> in(3, std::vector<float>(20, 1.0f)), out(3, std::vector<float>(20));
  in[1][13] = std::numeric_limits<float>::quiet_NaN();  // block 1
  in[2][9] = inf;                                       // block 1
  in[0][17] = inf;                                      // block 2: inf + -inf = NaN
  in[1][18] = -inf;
  in[2][17] = -inf;
  for (std::uint16_t r = 0; r < 3; ++r)
    t.c->start(r, WorkerOp::allreduce(NumKind::fx32, ReduceKind::sum, cbytes(in[r]), wbytes(out[r]), 20, 3));
  ASSERT_TRUE(t.c->run(10 * kSecond));
  for (std::uint16_t r = 0; r < 3; ++r) {
    ASSERT_TRUE(t.c->worker(r).done()) << t.c->worker(r).error().message;
    for (int i = 0; i < 20; ++i) {
      const float v = out[r][static_cast<std::size_t>(i)];
      if (i == 13 || i == 17) EXPECT_TRUE(std::isnan(v)) << i;
      else if (i == 9) EXPECT_EQ(v, inf);
      else if (i == 18) EXPECT_EQ(v, -inf);
      else EXPECT_EQ(v, 3.0f) << i;
    }
  }
}

TEST(SimFaults, MismatchedCollectivesNeverGiveAWrongResult) {
  auto t = flat(4, faults_for(0.01), 2, 2, 8);
  std::vector<std::int32_t> a(30, 1), b(20, 1), oa(30, 0), ob(20, 0);
  t.c->start(0, WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(a), wbytes(oa), 30, 2));
  t.c->start(1, WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(b), wbytes(ob), 20, 2));
  t.c->run(10 * kSecond);
  // Chunks 0 and 1 match (8 + 8 elements); chunk 2 holds 8 vs 4 elements: refused.
  // The member whose chunk 2 arrives second is refused and told why; the other waits and
  // times out. Nobody completes.
  int refused = 0;
  for (std::uint16_t r = 0; r < 2; ++r) {
    auto& w = t.c->worker(r);
    ASSERT_TRUE(w.failed());
    if (w.error().message.find("disagree") != std::string::npos) ++refused;
    else EXPECT_EQ(w.error().kind, WorkerErrorKind::timeout) << w.error().message;
  }
  EXPECT_EQ(refused, 1);
  EXPECT_FALSE(t.c->worker(0).done() && t.c->worker(1).done());
}

TEST(SimFaults, ForeignAndMalformedPacketsAreIgnored) {
  auto t = flat(8, faults_for(0.05), 3, 2, 8);
  const std::uint64_t count = 200;
  std::vector<std::vector<std::int32_t>> in(3, std::vector<std::int32_t>(count, 5));
  std::vector<std::vector<std::int32_t>> out(3, std::vector<std::int32_t>(count, 0));
  for (std::uint16_t r = 0; r < 3; ++r)
    t.c->start(r, WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(in[r]), wbytes(out[r]), count, 3));
  std::mt19937_64 rng(8);
  Endpoint stranger = Endpoint::node(77);
  for (int i = 0; i < 200; ++i) {
    std::vector<std::byte> junk(rng() % 80);
    for (auto& b : junk) b = std::byte(rng());
    if (junk.size() >= 4 && i % 2) proto::store_u32(junk.data(), proto::kMagic);
    t.c->inject(stranger, t.switches[0], junk);
    t.c->inject(t.switches[0], Endpoint::node(1 + i % 3), junk);  // "from the switch" to workers
    t.c->run_until([] { return false; }, t.c->now() + 20'000);
  }
  ASSERT_TRUE(t.c->run(100 * kSecond));
  for (std::uint16_t r = 0; r < 3; ++r) {
    ASSERT_TRUE(t.c->worker(r).done()) << t.c->worker(r).error().message;
    EXPECT_EQ(out[r], std::vector<std::int32_t>(count, 15));
  }
  EXPECT_GE(t.c->sw(0).counters().drops, 150u);
}

}  // namespace
}  // namespace inc::sw
