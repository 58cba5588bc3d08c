// `inc numerics sweep`, the host algorithms: input type x host algorithm x host accumulator policy
// (narrow, widen, wide; docs/NUMERICS.md "Wide accumulators on the hosts") x ranks, against the
// exact sum. Nothing is re-implemented here: each case is the library's own schedules
// (coll::build_schedules, the widened ones of src/coll/widened.cpp) run by coll::run_local, the
// in-memory executor, whose adds and roundings are the host runtime's (and the edge engine's);
// its overflow events are theirs too. Bytes per element per rank are the schedules' sends.
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "coll/local_executor.hpp"
#include "coll/schedule.hpp"
#include "numerics/reduce.hpp"
#include "tools/numerics_tool.hpp"

namespace inc::tools {
namespace {

double float_max(DataType t) {
  switch (t) {
    case DataType::e4m3: return 448;
    case DataType::e5m2: return 57344;
    case DataType::f16: return 65504;
    default: return 3.3895313892515355e38;  // bf16
  }
}

struct HostCase {
  Collective coll;
  coll::Algorithm algo;
};
constexpr HostCase kCases[] = {{Collective::allreduce, coll::Algorithm::ring},
                               {Collective::allreduce, coll::Algorithm::recursive_doubling},
                               {Collective::allreduce, coll::Algorithm::rabenseifner},
                               {Collective::reduce_scatter, coll::Algorithm::ring}};
constexpr DataType kTypes[] = {DataType::e4m3, DataType::e5m2, DataType::f16, DataType::bf16};
constexpr Accumulate kPolicies[] = {Accumulate::narrow, Accumulate::widen, Accumulate::wide};

// One (type, case, ranks) with the same inputs under the three policies.
void run_cases(DataType t, const HostCase& c, int P, std::size_t elements, std::uint64_t seed,
               std::vector<HostSweepRow>& rows) {
  const bool rs = c.coll == Collective::reduce_scatter;
  // Elements per rank's input: `elements` (reduce_scatter: rounded down to a multiple of P).
  const std::uint64_t count = rs ? std::max<std::uint64_t>(1, elements / static_cast<std::uint64_t>(P)) : elements;
  const std::uint64_t in_n = rs ? count * static_cast<std::uint64_t>(P) : count;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> dist(0.0, float_max(t) / 16.0);
  std::vector<std::vector<std::byte>> in(static_cast<std::size_t>(P), std::vector<std::byte>(in_n * size_of(t)));
  std::vector<long double> exact(in_n, 0.0L), magnitude(in_n, 0.0L);
  for (auto& b : in)
    for (std::uint64_t i = 0; i < in_n; ++i) {
      numerics::store_from_double(t, b.data(), i, dist(rng));
      exact[i] += numerics::load_as_double(t, b.data(), i);
      magnitude[i] += std::fabs(numerics::load_as_double(t, b.data(), i));
    }
  for (Accumulate a : kPolicies) {
    coll::CollectiveParams p;
    p.coll = c.coll;
    p.algo = c.algo;
    p.dtype = t;
    p.op = ReduceOp::sum;
    p.nranks = P;
    p.count = count;
    p.accumulate = a;
    const auto scheds = coll::build_schedules(p);
    std::vector<coll::LocalBuffers> bufs(static_cast<std::size_t>(P));
    std::uint64_t sent = 0;
    for (int r = 0; r < P; ++r) {
      bufs[static_cast<std::size_t>(r)].input = in[static_cast<std::size_t>(r)];
      bufs[static_cast<std::size_t>(r)].output.assign(count * size_of(t), std::byte{0});
      sent += coll::summarize(scheds[static_cast<std::size_t>(r)]).send_bytes;
    }
    const auto res = coll::run_local(p, scheds, bufs);
    // The result of element i: rank 0's output (allreduce: every rank holds the same bits under
    // widen/wide, and the allgather's copies under narrow), or its owner's shard.
    double sum_err = 0, max_err = 0, sum_norm = 0;
    std::uint64_t finite = 0, nonfinite = 0;
    for (std::uint64_t i = 0; i < in_n; ++i) {
      const auto& out = bufs[rs ? static_cast<std::size_t>(i / count) : 0].output;
      const double v = numerics::load_as_double(t, out.data(), rs ? i % count : i);
      if (!std::isfinite(v)) {
        ++nonfinite;
        continue;
      }
      const double e = static_cast<double>(exact[i]);
      const double err = std::fabs(v - e) / (e != 0 ? std::fabs(e) : 1.0);
      sum_err += err;
      max_err = std::max(max_err, err);
      // Against the sum of magnitudes (the scale of a summation's error bound): a total that
      // cancels to near 0 does not make this one explode as |result - exact| / |exact| does.
      sum_norm += std::fabs(v - e) / std::max(static_cast<double>(magnitude[i]), 1e-300);
      ++finite;
    }
    const double n = static_cast<double>(in_n);
    const double fin = static_cast<double>(finite);
    rows.push_back(HostSweepRow{t, c.coll, c.algo, a, P, finite ? sum_err / fin : NAN, max_err,
                                finite ? sum_norm / fin : NAN, static_cast<double>(nonfinite) / n,
                                static_cast<double>(res.overflow_events) / n,
                                static_cast<double>(sent) / (n * P)});
  }
}

std::string label(const HostSweepRow& r) {
  return fmt::format("{} {}", name(r.coll), coll::name(r.algo));
}

}  // namespace

std::vector<HostSweepRow> host_sweep(const SweepOptions& o) {
  std::vector<HostSweepRow> rows;
  std::uint64_t seed = o.seed * 1000003;
  for (DataType t : kTypes)
    for (const HostCase& c : kCases)
      for (int m : o.members)
        if (m >= 2) run_cases(t, c, m, o.elements, ++seed, rows);
  return rows;
}

void print_host_sweep(const SweepOptions& o, const std::vector<HostSweepRow>& rows) {
  fmt::print("\nThe host algorithms: the library's schedules for each policy run by coll::run_local (the host\n"
             "runtime's and the edge engine's arithmetic), {} elements per rank (reduce_scatter: its input),\n"
             "the same inputs for the three policies. rel.err = |result - exact| / |exact| (as above; a total\n"
             "that cancels to near 0 makes it large), err/sum|x| = |result - exact| / sum of the inputs'\n"
             "magnitudes; overflow = non-finite results; events/elem = overflow events of every rank's adds\n"
             "and roundings per element; B/elem/rank = bytes each rank sends per element of its input.\n\n",
             o.elements);
  fmt::print("{:<5} {:<33} {:<7} {:>5} {:>12} {:>12} {:>12} {:>9} {:>11} {:>11}\n", "type", "algorithm", "policy",
             "ranks", "mean rel.err", "max rel.err", "err/sum|x|", "overflow", "events/elem", "B/elem/rank");
  for (const auto& r : rows)
    fmt::print("{:<5} {:<33} {:<7} {:>5} {:>12.3e} {:>12.3e} {:>12.3e} {:>9.4f} {:>11.4f} {:>11.3f}\n", name(r.t),
               label(r), name(r.policy), r.members, r.mean_rel_err, r.max_rel_err, r.mean_norm_err, r.overflow_rate,
               r.events_per_element, r.bytes_per_element_per_rank);
  if (o.out_dir.empty()) return;
  const std::string csv = o.out_dir + "/numerics_sweep_hosts.csv";
  std::ofstream f(csv);
  if (!f) throw Error(Error::Kind::config, fmt::format("inc numerics: cannot write {}", csv));
  f << "type,collective,algorithm,policy,ranks,mean_rel_err,max_rel_err,mean_err_over_sum_abs,overflow_rate,"
       "overflow_events_per_elem,bytes_per_elem_per_rank\n";
  for (const auto& r : rows)
    f << fmt::format("{},{},{},{},{},{:.6e},{:.6e},{:.6e},{:.6f},{:.6f},{:.4f}\n", name(r.t), name(r.coll),
                     coll::name(r.algo), name(r.policy), r.members, r.mean_rel_err, r.max_rel_err, r.mean_norm_err,
                     r.overflow_rate, r.events_per_element, r.bytes_per_element_per_rank);
  f.close();
  fmt::print("\nwrote {}\n", csv);
  if (!o.plot) return;
  // The ring allreduce, one column per (type, policy), rows = ranks: error and bytes.
  const std::string data = o.out_dir + "/numerics_sweep_hosts_ring.csv";
  std::ofstream d(data);
  d << "ranks";
  for (DataType t : kTypes)
    for (Accumulate a : kPolicies) d << "," << name(t) << " " << name(a) << "," << name(t) << " " << name(a) << " B";
  d << "\n";
  for (int m : o.members) {
    if (m < 2) continue;
    d << m;
    for (DataType t : kTypes)
      for (Accumulate a : kPolicies)
        for (const auto& r : rows)
          if (r.t == t && r.policy == a && r.members == m && r.coll == Collective::allreduce &&
              r.algo == coll::Algorithm::ring)
            d << fmt::format(",{:.6e},{:.4f}", std::max(r.mean_norm_err, 1e-12), r.bytes_per_element_per_rank);
    d << "\n";
  }
  d.close();
  const int series = static_cast<int>(std::size(kTypes) * std::size(kPolicies));
  plot_column_pairs(o.out_dir + "/numerics_hosts_error", "Ring allreduce on the hosts: mean error / sum |x| vs ranks",
                    "ranks", "mean |result - exact| / sum |x|", true, data, series, 2);
  plot_column_pairs(o.out_dir + "/numerics_hosts_bytes", "Ring allreduce on the hosts: bytes sent per element per rank",
                    "ranks", "B/element/rank", false, data, series, 3);
  fmt::print("wrote {0}/numerics_sweep_hosts_ring.csv, {0}/numerics_hosts_error.png/.svg, "
             "{0}/numerics_hosts_bytes.png/.svg\n",
             o.out_dir);
}

}  // namespace inc::tools
