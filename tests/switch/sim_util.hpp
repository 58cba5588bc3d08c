// Helpers shared by the simulated-network tests: build flat and two-level clusters, make
// inputs, compute exact references.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "src/switch/arith.hpp"
#include "src/switch/simnet.hpp"

namespace inc::sw::testing {

// Loss, duplication at half the loss rate, and reordering.
inline SimFaults faults_for(double loss) {
  SimFaults f;
  f.loss = loss;
  f.dup = loss / 2;
  f.reorder = loss > 0 ? 0.1 : 0.02;
  return f;
}

inline WorkerConfig worker_cfg(std::uint32_t job, std::uint16_t member, Endpoint sw) {
  WorkerConfig w;
  w.job = job;
  w.member = member;
  w.switch_ep = sw;
  w.rto_initial = 100'000;          // 100 us simulated
  w.rto_min = 100'000;
  w.rto_max = 2 * kMillisecond;
  w.progress_timeout = 2 * kSecond;  // simulated time: never reached unless something is wrong
  w.join_timeout = 2 * kSecond;
  return w;
}

struct Topo {
  std::unique_ptr<SimCluster> c;
  std::vector<Endpoint> switches;
  // Worker rank r is worker index r.
};

// The configuration of a cluster's first switch (64 slots in its pool) and of the switches
// copied from it.
inline SwitchConfig root_config(std::uint64_t seed, std::uint32_t slot_elems) {
  SwitchConfig sc;
  sc.slots = 64;
  sc.slot_elems = slot_elems;
  sc.incarnation = seed * 2 + 1;
  return sc;
}

// Workers of `job` leaf by leaf: per_leaf[l] members at leaves[l] (ranks numbered leaf by leaf).
inline void add_workers(Topo& t, std::uint32_t job, const std::vector<std::uint16_t>& per_leaf,
                        const std::vector<Endpoint>& leaves) {
  for (std::size_t l = 0; l < per_leaf.size(); ++l)
    for (std::uint16_t m = 0; m < per_leaf[l]; ++m) t.c->add_worker(worker_cfg(job, m, leaves[l]));
}

// One switch (node 0), n workers.
inline Topo flat(std::uint64_t seed, const SimFaults& f, std::uint16_t n, std::uint32_t slots,
                 std::uint32_t slot_elems, std::uint32_t job = 7, std::uint32_t caps = proto::cap::all) {
  Topo t;
  t.c = std::make_unique<SimCluster>(seed, f);
  SwitchConfig sc = root_config(seed, slot_elems);
  sc.caps = caps;
  t.switches.push_back(t.c->add_switch(sc));
  EXPECT_EQ(t.c->sw(0).admit({job, n, slots}, 0), proto::Reason::ok);
  add_workers(t, job, {n}, {t.switches[0]});
  return t;
}

// Spine (node 0) with leaves (nodes 1..L); leaf l has per_leaf[l] workers. Worker ranks are
// numbered leaf by leaf. A leaf may have a different slot size than the spine.
inline Topo two_level(std::uint64_t seed, const SimFaults& f, const std::vector<std::uint16_t>& per_leaf,
                      std::uint32_t slots, std::uint32_t slot_elems, std::uint32_t job = 7) {
  Topo t;
  t.c = std::make_unique<SimCluster>(seed, f);
  SwitchConfig spine = root_config(seed, slot_elems);
  t.switches.push_back(t.c->add_switch(spine));
  EXPECT_EQ(t.c->sw(0).admit({job, std::uint16_t(per_leaf.size()), slots}, 0), proto::Reason::ok);
  for (std::size_t l = 0; l < per_leaf.size(); ++l) {
    SwitchConfig leaf = spine;
    leaf.slot_elems = slot_elems + 8 * std::uint32_t(l);  // the path minimum must win
    leaf.incarnation = seed * 2 + 3 + l;
    leaf.parent = t.switches[0];
    t.switches.push_back(t.c->add_switch(leaf));
    EXPECT_EQ(t.c->sw(l + 1).admit({job, per_leaf[l], slots, std::uint16_t(l)}, 0),
              proto::Reason::ok);
  }
  add_workers(t, job, per_leaf, std::vector<Endpoint>(t.switches.begin() + 1, t.switches.end()));
  return t;
}

// One switch for a single entry of `per_leaf`, else a two-level tree with those leaves.
inline Topo one_or_two_levels(std::uint64_t seed, const SimFaults& f, const std::vector<std::uint16_t>& per_leaf,
                              std::uint32_t slots, std::uint32_t slot_elems) {
  std::uint16_t n = 0;
  for (auto m : per_leaf) n += m;
  return per_leaf.size() == 1 ? flat(seed, f, n, slots, slot_elems) : two_level(seed, f, per_leaf, slots, slot_elems);
}

// One switch daemon with `lanes` lanes (nodes 0..lanes-1), n workers joined at lane 0.
inline Topo flat_lanes(std::uint64_t seed, const SimFaults& f, std::uint16_t n,
                       std::uint32_t slots_per_lane, std::uint32_t slot_elems,
                       std::uint16_t lanes, std::uint32_t job = 7) {
  Topo t;
  t.c = std::make_unique<SimCluster>(seed, f);
  SwitchConfig sc = root_config(seed, slot_elems);
  for (std::size_t i : t.c->add_switch_lanes(sc, lanes)) {
    t.switches.push_back(t.c->switch_endpoint(i));
    EXPECT_EQ(t.c->sw(i).admit({job, n, slots_per_lane}, 0), proto::Reason::ok);
  }
  add_workers(t, job, {n}, {t.switches[0]});
  return t;
}

// A spine with `spine_lanes` lanes and leaves with `leaf_lanes` lanes each (leaf l's lane k is
// a member of the spine's lane k); the job uses min(spine_lanes, leaf_lanes) lanes. Switch
// indices: spine lanes first, then each leaf's lanes.
inline Topo two_level_lanes(std::uint64_t seed, const SimFaults& f,
                            const std::vector<std::uint16_t>& per_leaf, std::uint32_t slots,
                            std::uint32_t slot_elems, std::uint16_t spine_lanes,
                            std::uint16_t leaf_lanes, std::uint32_t job = 7) {
  Topo t;
  t.c = std::make_unique<SimCluster>(seed, f);
  SwitchConfig spine = root_config(seed, slot_elems);
  for (std::size_t i : t.c->add_switch_lanes(spine, spine_lanes)) {
    t.switches.push_back(t.c->switch_endpoint(i));
    EXPECT_EQ(t.c->sw(i).admit({job, std::uint16_t(per_leaf.size()), slots}, 0), proto::Reason::ok);
  }
  std::vector<Endpoint> leaf0;
  for (std::size_t l = 0; l < per_leaf.size(); ++l) {
    SwitchConfig leaf = spine;
    leaf.incarnation = seed * 2 + 3 + l;
    leaf.parent = t.switches[0];
    auto idx = t.c->add_switch_lanes(leaf, leaf_lanes, spine_lanes);
    leaf0.push_back(t.c->switch_endpoint(idx[0]));
    for (std::size_t k = 0; k < idx.size(); ++k) {
      t.switches.push_back(t.c->switch_endpoint(idx[k]));
      const bool has_parent = k < spine_lanes;
      EXPECT_EQ(t.c->sw(idx[k]).admit({job, per_leaf[l], slots,
                                       has_parent ? std::uint16_t(l) : proto::kNoMember}, 0),
                proto::Reason::ok);
    }
  }
  add_workers(t, job, per_leaf, leaf0);
  return t;
}

template <class T>
std::span<const std::byte> cbytes(const std::vector<T>& v) {
  return std::as_bytes(std::span<const T>(v));
}
template <class T>
std::span<std::byte> wbytes(std::vector<T>& v) {
  return std::as_writable_bytes(std::span<T>(v));
}

// The fx32 result every member must get, computed block by block from all inputs.
inline std::vector<float> fx32_reference(const std::vector<std::vector<float>>& in,
                                         std::size_t first, std::size_t count,
                                         std::uint32_t block, std::uint32_t contributors) {
  std::vector<float> out(count);
  const int h = fx32_headroom(contributors);
  for (std::size_t b0 = 0; b0 < count; b0 += block) {
    std::size_t len = std::min<std::size_t>(block, count - b0);
    std::int32_t e = kFxZeroBlock;
    for (const auto& x : in) e = std::max(e, fx32_block_exponent(x.data() + first + b0, len));
    std::vector<std::int32_t> sum(len, 0), q(len);
    for (const auto& x : in) {
      fx32_encode(x.data() + first + b0, len, e, h, q.data());
      for (std::size_t i = 0; i < len; ++i) sum[i] += q[i];
    }
    fx32_decode(sum.data(), len, e, h, out.data() + b0);
  }
  return out;
}

// One switch (a single leaf size) or a spine over leaves of these sizes, 4 slots of 16 cells.
inline Topo tree_of(const std::vector<std::uint16_t>& leaves, std::uint64_t seed, const SimFaults& f) {
  std::uint16_t n = 0;
  for (auto m : leaves) n += m;
  return leaves.size() == 1 ? flat(seed, f, n, 4, 16) : two_level(seed, f, leaves, 4, 16);
}

// An Allreduce of byte-sized units (i8/u8, fp8, i4) by every member; their results and
// overflow flags.
struct ByteOutcome {
  std::vector<std::vector<std::uint8_t>> out;
  std::vector<bool> overflow;
};
inline ByteOutcome run_bytes(Topo& t, NumKind k, ReduceKind op, const std::vector<std::vector<std::uint8_t>>& in) {
  const auto n = std::uint16_t(in.size());
  const std::size_t count = in[0].size();
  ByteOutcome r{std::vector<std::vector<std::uint8_t>>(n, std::vector<std::uint8_t>(count)), {}};
  for (std::uint16_t m = 0; m < n; ++m)
    t.c->start(m, WorkerOp::allreduce(k, op, cbytes(in[m]), wbytes(r.out[m]), count, n));
  EXPECT_TRUE(t.c->run(100 * kSecond));
  for (std::uint16_t m = 0; m < n; ++m) {
    EXPECT_TRUE(t.c->worker(m).done()) << t.c->worker(m).error().message;
    r.overflow.push_back(t.c->worker(m).report().overflow);
  }
  return r;
}

// Live resize tests (resize_test.cpp, resize_tree_test.cpp): every member submits `ops`
// allreduces of `count` seeded i32; check() asserts that each member finished with the exact
// sums, completed every op once, and ended with the job at `slots`.
// After a shrink to `slots` on switches 0..switches-1 (lanes, or a tree's switches): each did
// `resizes` resizes, holds `slots` for job 7, and gives the rest of its 64 to another job (8).
inline void expect_moved(Topo& t, std::size_t switches, std::uint32_t slots, std::uint64_t resizes, std::uint64_t seed) {
  for (std::size_t s = 0; s < switches; ++s) {
    EXPECT_EQ(t.c->sw(s).counters().job_resizes, resizes) << "seed " << seed << " switch " << s;
    EXPECT_EQ(t.c->sw(s).snapshot().jobs.at(0).spec.slots, slots) << "seed " << seed << " switch " << s;
    EXPECT_EQ(t.c->sw(s).admit({8, 1, 64 - slots}, t.c->now()), proto::Reason::ok) << "seed " << seed << " switch " << s;
  }
}

// Whether every one of the n members joined again with `slots` slots.
inline bool members_hold(Topo& t, std::uint16_t n, std::uint32_t slots) {
  for (std::uint16_t r = 0; r < n; ++r)
    if (!t.c->worker(r).joined() || t.c->worker(r).join_info().slots != slots) return false;
  return true;
}

struct ResizeStream {
  std::uint16_t n = 0;
  int ops = 0;
  std::vector<std::vector<std::int32_t>> in;
  std::vector<std::int32_t> want;
  std::vector<std::vector<std::vector<std::int32_t>>> out;
  ResizeStream(Topo& t, std::uint16_t members, int n_ops, std::size_t count, std::uint64_t seed)
      : n(members), ops(n_ops), in(members, std::vector<std::int32_t>(count)), want(count, 0),
        out(members, std::vector<std::vector<std::int32_t>>(n_ops, std::vector<std::int32_t>(count))) {
    for (std::uint16_t r = 0; r < n; ++r)
      for (std::size_t i = 0; i < count; ++i) {
        in[r][i] = std::int32_t((seed * 7919 + r * 104729 + i * 31) % 100000) - 50000;
        want[i] += in[r][i];
      }
    for (std::uint16_t r = 0; r < n; ++r)
      for (int k = 0; k < ops; ++k)
        t.c->submit(r, WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(in[r]), wbytes(out[r][k]), count, n));
  }
  void check(Topo& t, std::uint32_t slots, std::uint64_t seed) const {
    for (std::uint16_t r = 0; r < n; ++r) {
      auto& w = t.c->worker(r);
      ASSERT_TRUE(w.done()) << "seed " << seed << " member " << r << ": " << w.error().message;
      EXPECT_EQ(w.join_info().slots, slots);
      for (int k = 0; k < ops; ++k) ASSERT_EQ(out[r][k], want) << "seed " << seed << " member " << r << " op " << k;
      int completed = 0;
      WorkerCompletion c;
      while (w.poll_completion(c)) ++completed;
      EXPECT_EQ(completed, ops);
    }
  }
};

}  // namespace inc::sw::testing
