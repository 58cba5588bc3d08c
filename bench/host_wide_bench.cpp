// Accumulator policies on the hosts (docs/NUMERICS.md "Wide accumulators on the hosts"): for
// each host algorithm and narrow / widen / wide, the relative L2 error of an allreduce sum
// against the exact (f64) sum of the ranks' inputs, and the bytes each rank sends per element.
// The schedules are the runtime's, run by the local executor (src/coll/local_executor.hpp) on
// real buffers: the errors are exact figures and the bytes counted, independent of load.
//   host_wide_bench [--ranks 4,16] [--elems 65536] [--dtype bf16,mxfp8_e4m3] [--seed 9]
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "src/coll/local_executor.hpp"
#include "src/numerics/mx_type.hpp"
#include "src/numerics/reduce.hpp"

using namespace inc;

int main(int argc, char** argv) {
  CLI::App app{"error and bytes per element of host allreduce sums under each accumulator policy"};
  std::vector<int> ranks = {4, 16};
  std::vector<std::string> dtypes = {"bf16", "mxfp8_e4m3"};
  std::uint64_t elems = 65536, seed = 9;
  app.add_option("--ranks", ranks, "rank counts")->delimiter(',');
  app.add_option("--dtype", dtypes, "element types (f16 bf16 e4m3 e5m2 mx*)")->delimiter(',');
  app.add_option("--elems", elems, "elements per rank (MX: rounded down to whole blocks)")->check(CLI::Range(32, 1 << 24));
  app.add_option("--seed", seed, "input seed");
  CLI11_PARSE(app, argc, argv);

  std::printf("%-11s %5s %-19s %-7s %12s %14s\n", "dtype", "ranks", "algorithm", "policy", "rel.L2 err", "B/elem/rank");
  for (const std::string& dn : dtypes) {
    const auto t = parse_data_type(dn);
    if (!t) {
      std::fprintf(stderr, "unknown dtype %s\n", dn.c_str());
      return 2;
    }
    const std::uint64_t epu = elements_per_unit(*t), units = elems / epu, n = units * epu;
    for (int P : ranks) {
      // Inputs: N(0,1) x 2^k, k uniform in -8..8 per 256 elements (as mx_bench), rounded into t.
      std::mt19937_64 rng(seed);
      std::normal_distribution<double> g(0, 1);
      std::uniform_int_distribution<int> k(-8, 8);
      std::vector<std::vector<std::byte>> in(static_cast<std::size_t>(P));
      std::vector<double> exact(n, 0.0);
      for (auto& buf : in) {
        std::vector<float> v(n);
        int e = 0;
        for (std::uint64_t i = 0; i < n; ++i) {
          if (i % 256 == 0) e = k(rng);
          v[i] = static_cast<float>(std::ldexp(g(rng), e));
        }
        buf.resize(units * size_of(*t));
        if (is_mx(*t)) numerics::mx_encode_blocks(*t, v.data(), units, buf.data());
        else for (std::uint64_t i = 0; i < n; ++i) numerics::store_from_double(*t, buf.data(), i, v[i]);
        for (std::uint64_t i = 0; i < n; ++i) exact[i] += numerics::load_as_double(*t, buf.data(), i);
      }
      for (coll::Algorithm a : {coll::Algorithm::ring, coll::Algorithm::recursive_doubling, coll::Algorithm::rabenseifner})
        for (Accumulate acc : {Accumulate::narrow, Accumulate::widen, Accumulate::wide}) {
          coll::CollectiveParams p;
          p.algo = a;
          p.nranks = P;
          p.count = units;
          p.dtype = *t;
          p.accumulate = acc;
          std::vector<coll::LocalBuffers> bufs(static_cast<std::size_t>(P));
          for (int r = 0; r < P; ++r) {
            bufs[static_cast<std::size_t>(r)].input = in[static_cast<std::size_t>(r)];
            bufs[static_cast<std::size_t>(r)].output.resize(units * size_of(*t));
          }
          const auto res = coll::run_local(p, coll::build_schedules(p), bufs);
          double num = 0, den = 0;
          for (std::uint64_t i = 0; i < n; ++i) {
            const double d = numerics::load_as_double(*t, bufs[0].output.data(), i) - exact[i];
            num += d * d;
            den += exact[i] * exact[i];
          }
          std::printf("%-11s %5d %-19s %-7s %12.3e %14.3f\n", dn.c_str(), P, std::string(coll::name(a)).c_str(),
                      std::string(name(acc)).c_str(), std::sqrt(num / den),
                      static_cast<double>(res.message_bytes) / P / static_cast<double>(n));
        }
    }
  }
  return 0;
}
