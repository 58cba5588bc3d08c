// The queued-op stream of WorkerProtocol on the seeded simulated network: every member submits
// many ops of mixed kinds and sizes at once (or staggered), they are pipelined through one
// chunk stream, and every op completes once with its exact result and its own report.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "tests/switch/sim_util.hpp"

namespace inc::sw {
namespace {

using namespace inc::sw::testing;

// Loss, with 10% duplication and reordering at every loss rate.
SimFaults stream_faults(double loss) {
  SimFaults f;
  f.loss = loss;
  f.dup = 0.1;
  f.reorder = 0.1;
  return f;
}

// A seeded cluster: one switch or a spine with two leaves (a third of the time), 1..6 members,
// 1..8 slots of 8..32 elements. The draws are taken from `rng` in a fixed order.
struct RandomCluster {
  Topo t;
  std::uint16_t n = 0;
  std::uint32_t slots = 0, E = 0;
  bool hier = false;
  RandomCluster(std::mt19937_64& rng, std::uint64_t seed, double loss) {
    hier = rng() % 3 == 0;
    slots = std::uint32_t(1 + rng() % 8);
    E = std::uint32_t(8 * (1 + rng() % 4));
    if (hier) {
      std::vector<std::uint16_t> per = {std::uint16_t(1 + rng() % 3), std::uint16_t(1 + rng() % 3)};
      n = std::uint16_t(per[0] + per[1]);
      t = two_level(seed, stream_faults(loss), per, slots, E);
    } else {
      n = std::uint16_t(1 + rng() % 6);
      t = flat(seed, stream_faults(loss), n, slots, E);
    }
  }
};

// One op of a seeded stream, built alike on every member (same kinds and sizes), with
// per-member inputs and an exact expected output per member.
struct StreamOp {
  enum Kind { i32sum, i32max, f32sum, fx32sum, reduce_scatter, reduce, allgather, broadcast,
              barrier, empty, kinds };
  Kind kind = empty;
  std::uint64_t count = 0;  // elements (bytes for raw)
  std::uint16_t root = 0;
  std::vector<std::vector<std::byte>> in, out, expect;  // per member
  std::uint64_t chunks = 0;                              // expected chunks of the op
  bool inplace = false;  // the output buffer is the input (allreduce)
};

template <class T>
std::vector<std::byte> to_bytes(const std::vector<T>& v) {
  auto b = std::as_bytes(std::span<const T>(v));
  return {b.begin(), b.end()};
}

std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }

StreamOp make_op(std::mt19937_64& rng, std::uint16_t n, std::uint32_t E, bool inplace_ok = false) {
  StreamOp o;
  o.kind = StreamOp::Kind(rng() % StreamOp::kinds);
  const std::uint64_t count = rng() % 4 == 0 ? rng() % 3 : rng() % (6 * E);
  o.count = count;
  o.root = std::uint16_t(rng() % n);
  o.in.resize(n);
  o.out.resize(n);
  o.expect.resize(n);
  switch (o.kind) {
    case StreamOp::i32sum:
    case StreamOp::i32max: {
      std::vector<std::vector<std::int32_t>> in(n, std::vector<std::int32_t>(count));
      std::vector<std::int32_t> e(count, o.kind == StreamOp::i32sum ? 0 : INT32_MIN);
      for (auto& v : in)
        for (std::uint64_t i = 0; i < count; ++i) {
          v[i] = std::int32_t(rng());
          e[i] = o.kind == StreamOp::i32sum ? std::int32_t(std::uint32_t(e[i]) + std::uint32_t(v[i]))
                                            : std::max(e[i], v[i]);
        }
      for (std::uint16_t r = 0; r < n; ++r) {
        o.in[r] = to_bytes(in[r]);
        o.expect[r] = to_bytes(e);
      }
      o.chunks = ceil_div(count, E);
      break;
    }
    case StreamOp::f32sum: {  // integer values: exact whatever the arrival order
      std::vector<std::vector<float>> in(n, std::vector<float>(count));
      std::vector<float> e(count, 0);
      for (auto& v : in)
        for (std::uint64_t i = 0; i < count; ++i) {
          v[i] = float(int(rng() % 2001) - 1000);
          e[i] += v[i];
        }
      for (std::uint16_t r = 0; r < n; ++r) {
        o.in[r] = to_bytes(in[r]);
        o.expect[r] = to_bytes(e);
      }
      o.chunks = ceil_div(count, E);
      break;
    }
    case StreamOp::fx32sum: {
      std::vector<std::vector<float>> in(n, std::vector<float>(count));
      std::normal_distribution<float> g(0, float(1 + rng() % 1000));
      for (auto& v : in)
        for (auto& x : v) x = g(rng);
      auto ref = fx32_reference(in, 0, count, E, n);
      for (std::uint16_t r = 0; r < n; ++r) {
        o.in[r] = to_bytes(in[r]);
        o.expect[r] = to_bytes(ref);
      }
      o.chunks = ceil_div(count, E) + ceil_div(ceil_div(count, E), E);
      break;
    }
    case StreamOp::reduce_scatter:
    case StreamOp::reduce: {
      const std::uint64_t total = o.kind == StreamOp::reduce ? count : count * n;
      std::vector<std::vector<std::int32_t>> in(n, std::vector<std::int32_t>(total));
      std::vector<std::int32_t> e(total, 0);
      for (auto& v : in)
        for (std::uint64_t i = 0; i < total; ++i) {
          v[i] = std::int32_t(rng() % 100000);
          e[i] += v[i];
        }
      for (std::uint16_t r = 0; r < n; ++r) {
        o.in[r] = to_bytes(in[r]);
        if (o.kind == StreamOp::reduce_scatter)
          o.expect[r] = to_bytes(std::vector<std::int32_t>(e.begin() + std::ptrdiff_t(r * count),
                                                           e.begin() + std::ptrdiff_t((r + 1) * count)));
        else
          o.expect[r] = r == o.root ? to_bytes(e) : std::vector<std::byte>(count * 4, std::byte{0x5A});
      }
      o.chunks = (o.kind == StreamOp::reduce ? 1 : n) * ceil_div(count, E);
      break;
    }
    case StreamOp::allgather: {
      std::vector<std::byte> all;
      for (std::uint16_t r = 0; r < n; ++r) {
        o.in[r].resize(count);
        for (auto& b : o.in[r]) b = std::byte(rng());
        all.insert(all.end(), o.in[r].begin(), o.in[r].end());
      }
      for (std::uint16_t r = 0; r < n; ++r) o.expect[r] = all;
      o.chunks = n * ceil_div(count, 4 * E);
      break;
    }
    case StreamOp::broadcast: {
      std::vector<std::byte> data(count);
      for (auto& b : data) b = std::byte(rng());
      for (std::uint16_t r = 0; r < n; ++r) o.expect[r] = data;
      o.in[o.root] = data;
      o.chunks = ceil_div(count, 4 * E);
      break;
    }
    case StreamOp::barrier:
      o.chunks = 1;
      break;
    case StreamOp::empty:
    case StreamOp::kinds:
      o.chunks = 0;
      break;
  }
  for (std::uint16_t r = 0; r < n; ++r)
    o.out[r].assign(o.expect[r].size(), std::byte{0x5A});
  if (o.kind == StreamOp::broadcast) o.out[o.root] = o.in[o.root];  // broadcast works in place
  if (inplace_ok && (o.kind == StreamOp::i32sum || o.kind == StreamOp::f32sum) && rng() % 2) {
    o.inplace = true;  // results overwrite the input that repairs of later chunks still read
    for (std::uint16_t r = 0; r < n; ++r) o.out[r] = o.in[r];
  }
  return o;
}

WorkerOp worker_op(StreamOp& o, std::uint16_t r, std::uint16_t n) {
  auto out = std::span<std::byte>(o.out[r]);
  auto in = o.inplace ? std::span<const std::byte>(out) : std::span<const std::byte>(o.in[r]);
  switch (o.kind) {
    case StreamOp::i32sum: return WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, in, out, o.count, n);
    case StreamOp::i32max: return WorkerOp::allreduce(NumKind::i32, ReduceKind::max, in, out, o.count, n);
    case StreamOp::f32sum: return WorkerOp::allreduce(NumKind::f32, ReduceKind::sum, in, out, o.count, n);
    case StreamOp::fx32sum: return WorkerOp::allreduce(NumKind::fx32, ReduceKind::sum, in, out, o.count, n);
    case StreamOp::reduce_scatter:
      return WorkerOp::reduce_scatter(NumKind::i32, ReduceKind::sum, in, out, o.count, n, r);
    case StreamOp::reduce:
      return WorkerOp::reduce(NumKind::i32, ReduceKind::sum, in, out, o.count, n, r == o.root);
    case StreamOp::allgather: return WorkerOp::allgather(in, out, o.count, n, r);
    case StreamOp::broadcast: return WorkerOp::broadcast(out, r == o.root);
    case StreamOp::barrier: return WorkerOp::barrier();
    case StreamOp::empty:
    case StreamOp::kinds: break;
  }
  return WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, {}, {}, 0, n);
}

// Submits `ops` on every member (member r starts after `stagger[r]` of simulated time), runs
// the network, checks exact results and one completion per op. Empty string on success.
std::string run_stream(Topo& t, std::uint16_t n, std::vector<StreamOp>& ops,
                       const std::vector<Nanos>& stagger) {
  std::vector<std::size_t> next(n, 0);  // next op each member submits
  std::vector<std::map<std::uint64_t, OpReport>> done(n);
  auto submit_due = [&] {
    for (std::uint16_t r = 0; r < n; ++r) {
      if (t.c->now() < stagger[r]) continue;
      for (; next[r] < ops.size(); ++next[r]) {
        auto id = t.c->submit(r, worker_op(ops[next[r]], r, n));
        if (id != next[r]) return "member " + std::to_string(r) + " got id " + std::to_string(id);
      }
    }
    return std::string();
  };
  auto all_done = [&] {
    for (std::uint16_t r = 0; r < n; ++r) {
      WorkerCompletion c;
      while (t.c->worker(r).poll_completion(c)) {
        if (done[r].count(c.id)) return false;  // reported twice: caught below
        done[r][c.id] = c.report;
      }
    }
    for (std::uint16_t r = 0; r < n; ++r)
      if (next[r] < ops.size() || !t.c->worker(r).idle()) return false;
    return true;
  };
  const Nanos last_stagger = *std::max_element(stagger.begin(), stagger.end());
  while (t.c->now() < last_stagger) {  // members join the stream at their own times
    if (auto e = submit_due(); !e.empty()) return e;
    t.c->run_until([] { return false; }, std::min(last_stagger, t.c->now() + 50'000));
  }
  if (auto e = submit_due(); !e.empty()) return e;
  if (!t.c->run_until(all_done, 1000 * kSecond)) return "stream did not finish";
  for (std::uint16_t r = 0; r < n; ++r) {
    auto& w = t.c->worker(r);
    if (w.failed()) return "member " + std::to_string(r) + ": " + w.error().message;
    if (done[r].size() != ops.size())
      return "member " + std::to_string(r) + ": " + std::to_string(done[r].size()) + " of " +
             std::to_string(ops.size()) + " completions";
    std::uint64_t chunks = 0, retx = 0, probes = 0;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const OpReport& rep = done[r].at(i);
      if (ops[i].out[r] != ops[i].expect[r])
        return "member " + std::to_string(r) + " op " + std::to_string(i) + " (kind " +
               std::to_string(int(ops[i].kind)) + ", count " + std::to_string(ops[i].count) +
               "): wrong result";
      if (rep.chunks != ops[i].chunks)
        return "member " + std::to_string(r) + " op " + std::to_string(i) + ": " +
               std::to_string(rep.chunks) + " chunks reported, expected " +
               std::to_string(ops[i].chunks);
      if (rep.packets_sent < rep.chunks ||
          rep.packets_sent - rep.retransmissions - rep.probes != rep.chunks)
        return "member " + std::to_string(r) + " op " + std::to_string(i) + ": packet counts";
      chunks += rep.chunks;
      retx += rep.retransmissions;
      probes += rep.probes;
    }
    if (chunks != w.report().chunks) return "per-op chunks do not add up to the total";
    if (retx > w.report().retransmissions) return "per-op retransmissions exceed the total";
    if (probes > w.report().probes) return "per-op probes exceed the total";
  }
  return {};
}

class SimStream : public ::testing::TestWithParam<double> {};

TEST_P(SimStream, ManyMixedOpsQueuedAtOnceByEveryMember) {
  const double loss = GetParam();
  std::uint64_t total_retx = 0;
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    std::mt19937_64 rng(seed * 7919 + std::uint64_t(loss * 1000));
    RandomCluster rc(rng, seed, loss);
    Topo& t = rc.t;
    const std::uint16_t n = rc.n;
    const std::uint32_t slots = rc.slots, E = rc.E;
    const bool hier = rc.hier;
    std::vector<StreamOp> ops;
    const std::size_t k = 10 + rng() % 20;
    for (std::size_t i = 0; i < k; ++i) ops.push_back(make_op(rng, n, E));
    std::vector<Nanos> stagger(n, 0);
    if (seed % 2 == 0)  // members arrive at different times
      for (auto& s : stagger) s = Nanos(rng() % 2'000'000);
    std::string err = run_stream(t, n, ops, stagger);
    ASSERT_TRUE(err.empty()) << "seed " << seed << " loss " << loss << (hier ? " two-level" : " flat")
                             << " n " << n << " slots " << slots << " E " << E << ": " << err;
    for (std::uint16_t r = 0; r < n; ++r) total_retx += t.c->worker(r).report().retransmissions;
  }
  if (loss > 0) {
    EXPECT_GT(total_retx, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(Loss, SimStream, ::testing::Values(0.0, 0.05, 0.20));

// The same with batched sending (SimCluster::set_batch): packets wait in the outboxes for up to
// 30 us of simulated time while results, gap signals and timers of later events arrive, and
// some allreduces run in place. Payloads are referenced, not copied (docs/ARCHITECTURE.md,
// "The data path"): a repair still queued when its chunk's result overwrites the input, a
// result resent from a slot that takes its next chunk, an op finishing with packets of it
// queued: every result must still be exact.
class SimStreamBatched : public ::testing::TestWithParam<double> {};

TEST_P(SimStreamBatched, ReferencedPayloadsSurvivePacketsHeldInTheOutbox) {
  const double loss = GetParam();
  for (std::uint64_t seed = 1; seed <= 30; ++seed) {
    std::mt19937_64 rng(seed * 104729 + std::uint64_t(loss * 1000));
    RandomCluster rc(rng, seed, loss);
    Topo& t = rc.t;
    const std::uint16_t n = rc.n;
    const std::uint32_t slots = rc.slots, E = rc.E;
    const bool hier = rc.hier;
    t.c->set_batch(Nanos(1 + rng() % 30'000));
    std::vector<StreamOp> ops;
    const std::size_t k = 10 + rng() % 20;
    for (std::size_t i = 0; i < k; ++i) ops.push_back(make_op(rng, n, E, true));
    std::vector<Nanos> stagger(n, 0);
    std::string err = run_stream(t, n, ops, stagger);
    ASSERT_TRUE(err.empty()) << "seed " << seed << " loss " << loss << (hier ? " two-level" : " flat")
                             << " n " << n << " slots " << slots << " E " << E << ": " << err;
  }
}

INSTANTIATE_TEST_SUITE_P(Loss, SimStreamBatched, ::testing::Values(0.0, 0.05, 0.20));

// Ops are pipelined: the next op's chunks go out while the previous op's are in flight.
TEST(SimStreamPipeline, NextOpStartsBeforeThePreviousFinished) {
  SimFaults none;
  auto t = flat(3, none, 2, 8, 16);
  std::vector<std::int32_t> a(64, 1), b(64, 2), oa(64), ob(64), a2(64), b2(64);
  for (std::uint16_t r = 0; r < 2; ++r) {
    t.c->submit(r, WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(r ? b : a), wbytes(r ? ob : oa), 64, 2));
    t.c->submit(r, WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(r ? b : a), wbytes(r ? b2 : a2), 64, 2));
  }
  // 4 chunks per op, 8 slots: all 8 chunks of both ops are sent before any result arrives.
  EXPECT_EQ(t.c->worker(0).report().chunks, 0u);
  t.c->run_until([&] { return t.c->worker(0).report().chunks > 0; }, kSecond);
  EXPECT_EQ(t.c->worker(0).report().packets_sent - 1, 8u);  // minus the join
  ASSERT_TRUE(t.c->run(kSecond));
  EXPECT_EQ(oa, std::vector<std::int32_t>(64, 3));
  EXPECT_EQ(a2, std::vector<std::int32_t>(64, 3));
  WorkerCompletion c;
  int n = 0;
  while (t.c->worker(0).poll_completion(c)) {
    EXPECT_EQ(c.report.chunks, 4u);
    ++n;
  }
  EXPECT_EQ(n, 2);
}

// A failure fails every queued op; reset() clears the queue and a fresh stream works.
TEST(SimStreamFailure, SwitchRestartFailsAllQueuedOpsThenResetRetries) {
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    auto t = flat(seed, stream_faults(0.05), 3, 4, 8);
    std::vector<std::vector<std::int32_t>> in(3, std::vector<std::int32_t>(500, 1));
    std::vector<std::vector<std::vector<std::int32_t>>> out(3, std::vector<std::vector<std::int32_t>>(5, std::vector<std::int32_t>(500)));
    auto submit_all = [&] {
      for (std::uint16_t r = 0; r < 3; ++r)
        for (int k = 0; k < 5; ++k)
          t.c->submit(r, WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(in[r]), wbytes(out[r][k]), 500, 3));
    };
    submit_all();
    t.c->run_until([&] { return t.c->worker(0).report().chunks > 10 + seed; }, 10 * kSecond);
    SwitchConfig sc = t.c->sw(0).config();
    sc.incarnation += 1000;
    t.c->restart_switch(0, sc);  // the job is gone
    ASSERT_TRUE(t.c->run(100 * kSecond));
    int failed = 0;
    for (std::uint16_t r = 0; r < 3; ++r) {
      auto& w = t.c->worker(r);
      std::size_t completed = 0;
      WorkerCompletion c;
      while (w.poll_completion(c)) ++completed;
      if (w.failed()) {
        ++failed;
        EXPECT_TRUE(w.idle());
        EXPECT_EQ(w.queued(), 0u);
        EXPECT_LT(completed, 5u) << "seed " << seed;
        EXPECT_EQ(w.error().kind, WorkerErrorKind::switch_restarted) << w.error().message;
      }
    }
    EXPECT_GT(failed, 0) << "seed " << seed;
    for (std::uint16_t r = 0; r < 3; ++r) t.c->worker(r).reset();
    ASSERT_EQ(t.c->sw(0).admit({7, 3, 4}, t.c->now()), proto::Reason::ok);
    submit_all();
    ASSERT_TRUE(t.c->run(100 * kSecond));
    for (std::uint16_t r = 0; r < 3; ++r) {
      ASSERT_TRUE(t.c->worker(r).done()) << "seed " << seed << ": " << t.c->worker(r).error().message;
      for (auto& o : out[r]) ASSERT_EQ(o, std::vector<std::int32_t>(500, 3)) << "seed " << seed;
      int completed = 0;
      WorkerCompletion c;
      while (t.c->worker(r).poll_completion(c)) EXPECT_EQ(c.id, std::uint64_t(completed++));
      EXPECT_EQ(completed, 5);
    }
  }
}

// describe_stall names the oldest chunk and who is missing, for a caller's deadline error.
TEST(SimStreamStall, DescribeStallNamesMissingMembers) {
  auto t = flat(2, stream_faults(0), 3, 2, 8);
  std::vector<std::int32_t> in(40, 1), out(40);
  for (std::uint16_t r = 0; r < 2; ++r)  // member 2 never submits
    t.c->submit(r, WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(in), wbytes(out), 40, 3));
  t.c->run_until([] { return false; }, 50 * kMillisecond);
  auto s = t.c->worker(0).describe_stall(t.c->now());
  EXPECT_NE(s.find("missing {2}"), std::string::npos) << s;
  EXPECT_NE(s.find("allreduce"), std::string::npos) << s;
  EXPECT_FALSE(t.c->worker(0).idle());
  EXPECT_TRUE(t.c->worker(2).idle());
}

// Lanes (D1): a member joins lane 0, learns the lanes, joins the others, and stripes the
// stream: global chunk c on lane c mod L as lane chunk c / L. Exactly-once and exact results
// hold on every lane under loss, duplication and reordering; every lane carries its share.
class SimLanes : public ::testing::TestWithParam<double> {};

TEST_P(SimLanes, MixedOpsStripedOverLanes) {
  const double loss = GetParam();
  for (std::uint64_t seed = 1; seed <= 24; ++seed) {
    std::mt19937_64 rng(seed * 104729 + std::uint64_t(loss * 1000));
    const std::uint16_t lanes = std::uint16_t(2 + rng() % 3);
    const std::uint32_t slots = std::uint32_t(1 + rng() % 4), E = std::uint32_t(8 * (1 + rng() % 3));
    const std::uint16_t n = std::uint16_t(1 + rng() % 5);
    Topo t = flat_lanes(seed, stream_faults(loss), n, slots, E, lanes);
    std::vector<StreamOp> ops;
    std::uint64_t chunks = 0;
    for (int i = 0; i < 12; ++i) {
      ops.push_back(make_op(rng, n, E));
      chunks += ops.back().chunks;
    }
    std::vector<Nanos> stagger(n, 0);
    std::string err = run_stream(t, n, ops, stagger);
    ASSERT_TRUE(err.empty()) << "seed " << seed << " loss " << loss << " lanes " << lanes << " n "
                             << n << " slots " << slots << " E " << E << ": " << err;
    for (std::uint16_t r = 0; r < n; ++r) ASSERT_EQ(t.c->worker(r).lanes(), lanes) << "seed " << seed;
    // Lane l aggregated exactly the chunks c with c mod L == l.
    for (std::uint16_t l = 0; l < lanes; ++l) {
      const std::uint64_t expect = chunks / lanes + (l < chunks % lanes ? 1 : 0);
      EXPECT_EQ(t.c->sw(l).counters().aggregations, expect) << "seed " << seed << " lane " << l;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Loss, SimLanes, ::testing::Values(0.0, 0.05, 0.20));

// A two-level tree whose leaves have more lanes than the spine: the job uses the spine's
// lanes (the path's minimum); the leaves' extra lanes carry nothing.
TEST(SimLanes, TreeUsesThePathMinimumOfLanes) {
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    std::mt19937_64 rng(seed);
    const std::vector<std::uint16_t> per = {2, 3};
    const std::uint16_t n = 5;
    Topo t = two_level_lanes(seed, stream_faults(0.05), per, 3, 16, /*spine*/ 2, /*leaves*/ 3);
    std::vector<StreamOp> ops;
    for (int i = 0; i < 10; ++i) ops.push_back(make_op(rng, n, 16));
    std::string err = run_stream(t, n, ops, std::vector<Nanos>(n, 0));
    ASSERT_TRUE(err.empty()) << "seed " << seed << ": " << err;
    for (std::uint16_t r = 0; r < n; ++r) ASSERT_EQ(t.c->worker(r).lanes(), 2) << "seed " << seed;
    // Switch indices: spine lanes 0-1, leaf 0 lanes 2-4, leaf 1 lanes 5-7; lane 2 of each leaf idle.
    EXPECT_EQ(t.c->sw(4).counters().aggregations, 0u);
    EXPECT_EQ(t.c->sw(7).counters().aggregations, 0u);
    EXPECT_GT(t.c->sw(0).counters().aggregations + t.c->sw(1).counters().aggregations, 0u);
  }
}

// A lane that answers with another job geometry than lane 0 is a misconfiguration: a clear
// error, never a stream striped over inconsistent lanes.
TEST(SimLanes, InconsistentLanesAreRefused) {
  Topo t = flat_lanes(5, stream_faults(0), 2, 4, 16, 2);
  // Lane 1 admitted the job with other slots than lane 0.
  ASSERT_TRUE(t.c->sw(1).release(7));
  ASSERT_EQ(t.c->sw(1).admit({7, 2, 2}, 0), proto::Reason::ok);
  std::vector<std::int32_t> in(100, 1), out(100);
  for (std::uint16_t r = 0; r < 2; ++r)
    t.c->submit(r, WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(in), wbytes(out), 100, 2));
  ASSERT_TRUE(t.c->run(10 * kSecond));
  for (std::uint16_t r = 0; r < 2; ++r) {
    ASSERT_TRUE(t.c->worker(r).failed());
    EXPECT_EQ(t.c->worker(r).error().kind, WorkerErrorKind::protocol);
    EXPECT_NE(t.c->worker(r).error().message.find("another configuration"), std::string::npos)
        << t.c->worker(r).error().message;
  }
}

}  // namespace
}  // namespace inc::sw
