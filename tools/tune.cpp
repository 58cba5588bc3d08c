// `inc tune`: measure every path of every collective (the switch, if the job has one, and
// each host algorithm) at a sweep of sizes on this job's own ranks, links and switch, and
// write a tuning file. Jobs that set INC_TUNING=FILE then choose per call the path with the
// smallest predicted time (src/api/tuning.hpp). Run it under a launcher, like `inc bench`:
//   inc launch -n 8 --switch -- inc tune -o tuning.json
#include <CLI/CLI.hpp>
#include <unistd.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>
#include <string>
#include <vector>

#include "api/tuning.hpp"
#include "inc/inc.hpp"
#include "tools/bench_core.hpp"
#include "tools/commands.hpp"

namespace inc::tools {

namespace {

std::vector<coll::Algorithm> host_algorithms(Collective c) {
  std::vector<coll::Algorithm> out;
  for (int a = 1; a < coll::kNumAlgorithms; ++a) {
    auto algo = static_cast<coll::Algorithm>(a);
    if (algo != coll::Algorithm::inc && coll::supports(c, algo)) out.push_back(algo);
  }
  return out;
}

std::string now_text() {
  std::time_t t = std::time(nullptr);
  char b[64];
  std::strftime(b, sizeof b, "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&t));
  return b;
}

}  // namespace

int cmd_tune(int argc, char** argv) {
  CLI::App app{"Measure every path of every collective on this job and write a tuning file "
               "for automatic selection (INC_TUNING=FILE). Run under a launcher, e.g.\n"
               "  inc launch -n 8 --switch -- inc tune -o tuning.json",
               "inc tune"};
  std::vector<std::string> colls{"allreduce", "reduce_scatter", "allgather", "broadcast"};
  std::uint64_t min_b = 8, max_b = 16u << 20;
  double factor = 4;
  int iters = 10, warmup = 2, rounds = 3;
  std::string dtype_name = "f32", output = "inc-tuning.json";
  app.add_option("-c,--coll", colls, "collectives to measure (alltoall and barrier have one path each)")
      ->delimiter(',')
      ->check(CLI::IsMember({"allreduce", "reduce_scatter", "allgather", "broadcast"}))
      ->capture_default_str();
  app.add_option("-b,--min-bytes", min_b, "smallest size (K, M, G suffixes)")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  app.add_option("-e,--max-bytes", max_b, "largest size")->transform(CLI::AsSizeValue(false))->capture_default_str();
  app.add_option("-f,--factor", factor, "size step factor")->check(CLI::Range(1.1, 1024.0))->capture_default_str();
  app.add_option("-n,--iters", iters, "timed calls per point (median taken)")->check(CLI::Range(1, 100000))->capture_default_str();
  app.add_option("-w,--warmup", warmup, "untimed calls per point")->check(CLI::Range(0, 100000))->capture_default_str();
  app.add_option("-r,--rounds", rounds, "interleaved rounds over all paths (median taken)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  app.add_option("-d,--dtype", dtype_name, "element type of the measurements")->capture_default_str();
  app.add_option("-o,--output", output, "tuning file to write (rank 0)")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  auto dtype = parse_data_type(dtype_name);
  if (!dtype) {
    std::fprintf(stderr, "inc tune: unknown data type '%s'\n", dtype_name.c_str());
    return 2;
  }
  if (min_b > max_b) {
    std::fprintf(stderr, "inc tune: --min-bytes is larger than --max-bytes\n");
    return 2;
  }

  Communicator comm;
  try {
    comm = Communicator::init();
  } catch (const Error& e) {
    std::fprintf(stderr, "inc tune: %s\n", e.what());
    return 1;
  }
  const bool lead = comm.rank() == 0;
  const bool progress = isatty(STDERR_FILENO) != 0;
  std::vector<std::uint64_t> sizes;
  for (double s = static_cast<double>(min_b); s <= static_cast<double>(max_b) * 1.0000001; s *= factor)
    sizes.push_back(static_cast<std::uint64_t>(std::llround(std::max(1.0, s))));
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());

  api::CostTable table;
  table.nranks = comm.size();
  table.dtype = dtype_name;
  table.created = fmt::format("{} by inc tune on {} ranks", now_text(), comm.size());
  try {
    for (const auto& cname : colls) {
      const Collective c = *parse_collective(cname);
      std::vector<coll::Algorithm> algos = host_algorithms(c);
      // Does the switch run this collective for this type? One small call says (all ranks
      // get the same answer from the same configuration).
      {
        BenchCase probe;
        probe.coll = c;
        probe.algo = "inc";
        probe.dtype = *dtype;
        probe.bytes = std::max<std::uint64_t>(1024, min_b);
        probe.iters = 1;
        probe.warmup = 0;
        try {
          BenchResult r = run_case(comm, probe);
          if (r.in_network) {
            algos.insert(algos.begin(), coll::Algorithm::inc);
            if (table.switch_path.empty()) table.switch_path = r.reason;
          }
        } catch (const Error& e) {
          if (e.kind() != Error::Kind::invalid_argument) throw;  // no switch configured
        }
      }
      // samples[algo][size index] over rounds
      std::map<coll::Algorithm, std::vector<std::vector<double>>> samples;
      for (int round = 0; round < rounds; ++round)
        for (std::size_t si = 0; si < sizes.size(); ++si)
          for (coll::Algorithm a : algos) {  // interleaved: a slow spell hits every path alike
            BenchCase bc;
            bc.coll = c;
            bc.algo = std::string(coll::name(a));
            bc.dtype = *dtype;
            bc.bytes = sizes[si];
            bc.iters = iters;
            bc.warmup = warmup;
            if (count_for_bytes(c, bc.bytes, bc.dtype, comm.size()) == 0) continue;
            if (lead && progress)
              std::fprintf(stderr, "\r[round %d/%d] %s %llu B %s ...        ", round + 1, rounds,
                           cname.c_str(), static_cast<unsigned long long>(bc.bytes), bc.algo.c_str());
            BenchResult r = run_case(comm, bc);
            if (r.correct == 0)
              throw Error(Error::Kind::internal,
                          fmt::format("{} {} B with {} gave WRONG results; not tuning on a broken path",
                                      cname, bc.bytes, bc.algo));
            auto& v = samples[a];
            v.resize(sizes.size());
            v[si].push_back(r.median_us);
          }
      for (auto& [a, per_size] : samples)
        for (std::size_t si = 0; si < per_size.size(); ++si) {
          auto& v = per_size[si];
          if (v.empty()) continue;
          std::sort(v.begin(), v.end());
          table.add(c, a, sizes[si], v[v.size() / 2]);
        }
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "\ninc tune (rank %d): %s\n", comm.rank(), e.what());
    return 1;
  }
  if (!lead) return 0;
  if (progress) std::fprintf(stderr, "\r\033[K");
  std::printf("# inc tune: %d ranks, %s, median of %d rounds x %d calls per point\n", comm.size(),
              dtype_name.c_str(), rounds, iters);
  std::printf("# %-14s %10s  %-20s %s\n", "collective", "size(B)", "fastest", "all paths (us)");
  for (const auto& cname : colls) {
    const Collective c = *parse_collective(cname);
    for (std::uint64_t s : sizes) {
      std::vector<api::PathCost> costs;
      auto best = api::choose(table, c, s, table.algorithms(c), costs);
      if (!best) continue;
      std::printf("  %-14s %10llu  %-20s %s\n", cname.c_str(), static_cast<unsigned long long>(s),
                  std::string(coll::name(*best)).c_str(), api::describe(costs).c_str());
    }
  }
  try {
    table.save(output);
  } catch (const Error& e) {
    std::fprintf(stderr, "inc tune: %s\n", e.what());
    return 1;
  }
  std::printf("# written to %s (use it with INC_TUNING=%s)\n", output.c_str(), output.c_str());
  return 0;
}

}  // namespace inc::tools
