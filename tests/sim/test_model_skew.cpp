// The analytical model's start-skew term (sim/analytical.hpp start_skew_*; docs/MODEL.md "Start
// skew"): its closed form against exact values and against the offsets inc sim draws, and against
// inc sim itself (run_skewed) on a one-switch ring and Core-INC. Small sizes; no timing assertions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "sim/analytical.hpp"
#include "sim/engine.hpp"
#include "sim/skew.hpp"
#include "sim/topology.hpp"

namespace inc::sim {
namespace {

// inc bench's statistic, less the collective's own time, for ranks that all end together T after
// the latest start: the mean over draws of the latest offset less the least over ranks of the
// rank's mean offset. `first` is the first draw's index; offsets as inc sim draws them (job 0).
double ideal_wait(int p, int draws, double width, std::uint64_t seed, int first = 0) {
  std::vector<double> mean(static_cast<std::size_t>(p), 0.0);
  double latest = 0;
  for (int d = first; d < first + draws; ++d) {
    const auto o = draw_start_offsets(p, width, seed, d, 0);
    latest += *std::max_element(o.begin(), o.end()) / draws;
    for (int k = 0; k < p; ++k)
      mean[static_cast<std::size_t>(k)] += o[static_cast<std::size_t>(k)] / draws;
  }
  return latest - *std::min_element(mean.begin(), mean.end());
}

// Mean and standard deviation of ideal_wait over `reps` independent sets of draws (width 1).
struct Sample {
  double mean = 0, sd = 0;
};
Sample sample_wait(int p, int draws, int reps) {
  double sum = 0, sum2 = 0;
  for (int r = 0; r < reps; ++r) {
    const double z = ideal_wait(p, draws, 1.0, 1000 + static_cast<std::uint64_t>(r));
    sum += z;
    sum2 += z * z;
  }
  Sample s;
  s.mean = sum / reps;
  s.sd = std::sqrt(std::max(0.0, sum2 / reps - s.mean * s.mean));
  return s;
}

// One draw: the expected range of p uniforms, (p - 1)/(p + 1). Two ranks, two draws: the least of
// two means A, B of two uniforms is 1/2 - E|A - B|/2, E|A - B| = E|U1 + U2 - U3 - U4|/2 = 7/30,
// so the wait is 2/3 - 1/2 + 7/60 = 17/60. Many draws: the means all tend to 1/2, the wait to
// p/(p+1) - 1/2 = (p - 1)/(2(p + 1)), from above and falling with the draws.
TEST(ModelSkew, WaitIsTheRangeForOneDrawAndHalfOfItForMany) {
  for (int p : {2, 3, 8, 100})
    EXPECT_NEAR(start_skew_wait(p, 1), (p - 1.0) / (p + 1.0), 1e-15) << p;
  EXPECT_NEAR(start_skew_wait(2, 2), 17.0 / 60.0, 1e-9);
  EXPECT_EQ(start_skew_wait(1, 16), 0.0);
  for (int p : {2, 8, 64}) {
    double prev = start_skew_wait(p, 1);
    for (int K : {2, 5, 16, 64, 256, 257, 4096}) {
      const double w = start_skew_wait(p, K);
      EXPECT_LT(w, prev) << p << " ranks, " << K << " draws";
      EXPECT_GT(w, (p - 1.0) / (2 * (p + 1.0))) << p << " ranks, " << K << " draws";
      prev = w;
    }
    // A million draws: the means' sd is 2.9e-4, the least of 64 about 2.4 sd below 1/2.
    EXPECT_NEAR(start_skew_wait(p, 1 << 20), (p - 1.0) / (2 * (p + 1.0)), 1e-3) << p;
  }
  EXPECT_THROW(start_skew_wait(8, 0), Error);
}

// The closed form against the statistic over the offsets inc sim draws (draw_start_offsets), 2,000
// independent sets of K draws each (400 of 300): within 4 standard errors of the sample mean (a
// chance of 6e-5 per case for a true mean). K = 300 takes the normal limit.
TEST(ModelSkew, WaitIsTheMeanOfTheStatisticOverDrawnOffsets) {
  struct Case {
    int p, K, reps;
  };
  for (const Case& k :
       {Case{2, 1, 2000}, Case{2, 4, 2000}, Case{2, 16, 2000}, Case{8, 1, 2000}, Case{8, 4, 2000},
        Case{8, 16, 2000}, Case{16, 4, 2000}, Case{16, 16, 2000}, Case{8, 300, 400}}) {
    const Sample s = sample_wait(k.p, k.K, k.reps);
    EXPECT_NEAR(start_skew_wait(k.p, k.K), s.mean, 4 * s.sd / std::sqrt(k.reps))
        << k.p << " ranks, " << k.K << " draws";
  }
}

// Skew off, one rank, a broadcast or the Core-INC allgather: no term; otherwise S(n) x the wait,
// in total_s; the model's default draws are inc sim's.
TEST(ModelSkew, ChargedOnlyWhenOnAndEveryRankWaitsForTheLatest) {
  EXPECT_EQ(kStartSkewDraws, SimOptions{}.start_skew_draws);
  NetParams np;
  const double n = 4 << 20;
  const auto plain =
      cost(closed_form_counts(Collective::allreduce, coll::Algorithm::ring, 8, n), np);
  const auto off = collective_cost(Collective::allreduce, coll::Algorithm::ring, 8, n, np);
  EXPECT_EQ(off.skew_s, 0.0);
  EXPECT_EQ(off.total_s, plain.total_s);
  np.start_skew_us = 500;
  np.start_skew_us_per_MiB = 250;  // S = 1.5 ms at 4 MiB
  using A = coll::Algorithm;
  struct Case {
    Collective c;
    A a;
    bool charged;
  };
  for (const Case& k :
       {Case{Collective::allreduce, A::ring, true},
        Case{Collective::allreduce, A::rabenseifner, true},
        Case{Collective::allreduce, A::recursive_doubling, true},
        Case{Collective::allreduce, A::inc, true}, Case{Collective::reduce_scatter, A::inc, true},
        Case{Collective::allgather, A::ring, true}, Case{Collective::alltoall, A::pairwise, true},
        Case{Collective::barrier, A::dissemination, true},
        Case{Collective::allgather, A::inc, false},
        Case{Collective::broadcast, A::binomial_tree, false},
        Case{Collective::broadcast, A::pipelined_chain, false},
        Case{Collective::broadcast, A::inc, false}}) {
    const double want = k.charged ? 1.5e-3 * start_skew_wait(8, 5) : 0.0;
    const auto c = collective_cost(k.c, k.a, 8, n, np, Offload::host, 5);
    EXPECT_NEAR(c.skew_s, want, 1e-15) << name(k.c) << " " << coll::name(k.a);
    EXPECT_EQ(start_skew_couples(k.c, k.a), k.charged) << name(k.c) << " " << coll::name(k.a);
    EXPECT_NEAR(c.total_s, c.latency_s + c.bandwidth_s + c.reduce_s + want, 1e-15) << name(k.c);
  }
  EXPECT_EQ(start_skew_cost(Collective::allreduce, A::ring, 1, n, np), 0.0);
}

// inc sim (run_skewed, 256 draws) on one switch, 8 ranks, 1 MiB at 10 Gb/s, S = 1 ms: its figure
// less the lock-step run's is the model's skew term. Two checks: (1) on the same draws, every rank
// ends together T after the latest start: the simulator's excess equals the ideal statistic of
// those offsets within 1% of S (the ring's excess is 0.5% of S short of it: a late rank's ring
// neighbours have done a little before it starts; Core-INC's is equal); (2) the model's
// expectation equals that statistic within 4 of its standard deviations over sets of 256 draws
// (measured here from 400 other sets of the same draws).
TEST(ModelSkew, SimulatedRingAndCoreIncWaitAsTheModelSays) {
  TopoSpec ts;
  ts.kind = TopoKind::single_switch;
  ts.hosts = 8;
  ts.link_gbps = 10;
  const Topology topo(ts);
  const int p = 8, K = 256;
  const double n = 1 << 20, S = 1e-3;
  SimOptions opt;
  opt.np.link_gbps = 10;
  opt.np.start_skew_us = S * 1e6;
  opt.start_skew_draws = K;
  double sum = 0, sum2 = 0;
  const int reps = 400;
  for (int r = 0; r < reps; ++r) {
    const double z =
        ideal_wait(p, K, 1.0, opt.start_skew_seed, K * (r + 1));  // draws after the simulated ones
    sum += z;
    sum2 += z * z;
  }
  const double sd = S * std::sqrt(sum2 / reps - (sum / reps) * (sum / reps));
  const double same_draws = ideal_wait(p, K, S, opt.start_skew_seed);
  const double model =
      start_skew_cost(Collective::allreduce, coll::Algorithm::ring, p, n, opt.np, K);
  EXPECT_NEAR(model, S * start_skew_wait(p, K), 1e-15);
  EXPECT_NEAR(same_draws, model, 4 * sd) << "sd " << sd;
  for (coll::Algorithm a : {coll::Algorithm::ring, coll::Algorithm::inc}) {
    JobSpec j;
    j.name = "j";
    j.params.coll = Collective::allreduce;
    j.params.algo = a;
    j.params.nranks = p;
    j.params.count = static_cast<std::uint64_t>(n) / 4;
    for (int h = 0; h < p; ++h) j.hosts.push_back(h);
    SimOptions none = opt;
    none.np.start_skew_us = 0;
    Simulator lockstep(topo, none);
    lockstep.add_job(j);
    const double T = lockstep.run().jobs[0].time_s();
    const SkewedRun r = run_skewed(topo, opt, {j}, {n});
    const double excess = r.jobs[0].time_s - T;
    EXPECT_NEAR(excess, same_draws, 0.01 * S) << coll::name(a);
    EXPECT_NEAR(excess, model, 0.01 * S + 4 * sd) << coll::name(a);
  }
}

}  // namespace
}  // namespace inc::sim
