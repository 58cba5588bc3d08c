#include "sim/skew.hpp"

#include <algorithm>
#include <limits>
#include <random>

#include <fmt/format.h>

namespace inc::sim {

std::vector<double> draw_start_offsets(int ranks, double width_s, std::uint64_t seed, int draw, int job) {
  // mt19937_64's sequence is fixed by the standard; the uniform is taken from its top 53 bits
  // here rather than by std::uniform_real_distribution, whose algorithm is the library's.
  std::seed_seq ss{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32),
                   static_cast<std::uint32_t>(draw), static_cast<std::uint32_t>(job)};
  std::mt19937_64 rng(ss);
  std::vector<double> out(static_cast<std::size_t>(std::max(ranks, 0)));
  for (double& x : out) x = width_s * static_cast<double>(rng() >> 11) * 0x1.0p-53;
  return out;
}

SkewedRun run_skewed(const Topology& topo, const SimOptions& opt, const std::vector<JobSpec>& jobs,
                     const std::vector<double>& bytes) {
  if (bytes.size() != jobs.size())
    throw Error(Error::Kind::internal, fmt::format("run_skewed: {} sizes for {} jobs", bytes.size(), jobs.size()));
  if (opt.start_skew_draws < 1)
    throw Error(Error::Kind::invalid_argument,
                fmt::format("start skew: {} draws (at least 1)", opt.start_skew_draws));
  SkewedRun out;
  out.draws = opt.start_skew_draws;
  out.jobs.resize(jobs.size());
  std::vector<std::vector<double>> rank_sum(jobs.size());
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    out.jobs[j].width_s = opt.np.start_skew_s(bytes[j]);
    rank_sum[j].assign(jobs[j].hosts.size(), 0.0);
  }
  for (int d = 0; d < out.draws; ++d) {
    Simulator sim(topo, opt);
    std::vector<std::vector<double>> drawn(jobs.size());
    for (std::size_t j = 0; j < jobs.size(); ++j) {
      JobSpec s = jobs[j];
      // A stream of an earlier job (the same ranks on the same hosts, scenario `stream_of`) is
      // the same processes: its ranks start when that job's do.
      const auto same = std::find_if(jobs.begin(), jobs.begin() + static_cast<std::ptrdiff_t>(j),
                                     [&](const JobSpec& k) { return k.hosts == s.hosts; });
      drawn[j] = same != jobs.begin() + static_cast<std::ptrdiff_t>(j)
                     ? drawn[static_cast<std::size_t>(same - jobs.begin())]
                     : draw_start_offsets(static_cast<int>(s.hosts.size()), out.jobs[j].width_s, opt.start_skew_seed, d,
                                          static_cast<int>(j));
      s.rank_start_s = drawn[j];
      sim.add_job(std::move(s));
    }
    SimResult r = sim.run();
    out.events += r.events;
    out.wall_s += r.wall_s;
    for (std::size_t j = 0; j < jobs.size(); ++j) {
      const JobResult& jr = r.jobs[j];
      double first = std::numeric_limits<double>::infinity(), last = 0;
      for (std::size_t k = 0; k < jr.rank_end_s.size(); ++k) {
        rank_sum[j][k] += jr.rank_end_s[k] - jr.rank_start_s[k];
        first = std::min(first, jr.rank_start_s[k]);
        last = std::max(last, jr.rank_end_s[k]);
      }
      if (!jr.rank_end_s.empty()) out.jobs[j].span_s += (last - first) / out.draws;
    }
    if (d == 0) out.first = std::move(r);
  }
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    SkewedJob& s = out.jobs[j];
    const auto& v = rank_sum[j];
    for (std::size_t k = 0; k < v.size(); ++k) {
      const double mean = v[k] / out.draws;
      s.mean_rank_s += mean / static_cast<double>(v.size());
      if (k == 0 || mean > s.time_s) {
        s.time_s = mean;
        s.slowest_rank = static_cast<int>(k);
      }
    }
  }
  return out;
}

}  // namespace inc::sim
