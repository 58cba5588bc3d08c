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
  int iters = 10, warmup = 2, rounds = 3, max_rounds = 6;
  double margin = 1.05;
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
  app.add_option("--max-rounds", max_rounds,
                 "more rounds, up to this many, at sizes where the fastest path is not yet clear: "
                 "a rival's best round within --margin of the leader's median")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("--margin", margin, "how much slower than a rival's best round the leader may be to settle a size")
      ->check(CLI::Range(1.0, 10.0))
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
  std::map<std::pair<Collective, std::uint64_t>, int> rounds_used;  // for the summary
  table.nranks = comm.size();
  table.dtype = dtype_name;
  table.created = fmt::format("{} by inc tune on {} ranks", now_text(), comm.size());
  try {
    for (const auto& cname : colls) {
      const Collective c = *parse_collective(cname);
      // The candidates automatic selection weighs (api::candidates): with the switch when it
      // runs this collective for this type; one small call says (all ranks get the same
      // answer from the same configuration).
      bool with_switch = false;
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
          with_switch = r.in_network;
          if (r.in_network && table.switch_path.empty()) table.switch_path = r.reason;
        } catch (const Error& e) {
          if (e.kind() != Error::Kind::invalid_argument) throw;  // no switch configured
        }
      }
      const std::vector<coll::Algorithm> algos = api::candidates(c, with_switch);
      // samples[size][candidate]: one median per round. Every rank takes the same decisions:
      // each sample is the slowest rank's median (run_case's allreduce).
      std::vector<std::vector<std::vector<double>>> samples(sizes.size(),
                                                            std::vector<std::vector<double>>(algos.size()));
      for (int round = 0; round < std::max(rounds, max_rounds); ++round)
        for (std::size_t si = 0; si < sizes.size(); ++si) {
          if (round >= rounds && api::settled(samples[si], margin)) continue;
          for (std::size_t ai = 0; ai < algos.size(); ++ai) {  // interleaved: a slow spell hits every path alike
            BenchCase bc;
            bc.coll = c;
            bc.algo = std::string(coll::name(algos[ai]));
            bc.dtype = *dtype;
            bc.bytes = sizes[si];
            bc.iters = iters;
            bc.warmup = warmup;
            if (count_for_bytes(c, bc.bytes, bc.dtype, comm.size()) == 0) continue;
            if (lead && progress)
              std::fprintf(stderr, "\r[round %d] %s %llu B %s ...        ", round + 1, cname.c_str(),
                           static_cast<unsigned long long>(bc.bytes), bc.algo.c_str());
            BenchResult r = run_case(comm, bc);
            if (r.correct == 0)
              throw Error(Error::Kind::internal,
                          fmt::format("{} {} B with {} gave WRONG results; not tuning on a broken path",
                                      cname, bc.bytes, bc.algo));
            samples[si][ai].push_back(r.median_us);
          }
        }
      for (std::size_t si = 0; si < sizes.size(); ++si)
        for (std::size_t ai = 0; ai < algos.size(); ++ai) {
          const auto& v = samples[si][ai];
          if (v.empty()) continue;
          table.add(c, algos[ai], sizes[si], api::median(v));
          rounds_used[{c, sizes[si]}] = static_cast<int>(v.size());
        }
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "\ninc tune (rank %d): %s\n", comm.rank(), e.what());
    return 1;
  }
  if (!lead) return 0;
  if (progress) std::fprintf(stderr, "\r\033[K");
  std::printf("# inc tune: %d ranks, %s, per point the median of %d-%d interleaved rounds (more where the "
              "fastest path was within %.2fx of a rival) of the median of %d calls\n",
              comm.size(), dtype_name.c_str(), rounds, std::max(rounds, max_rounds), margin, iters);
  std::printf("# %-14s %10s %6s  %-20s %s\n", "collective", "size(B)", "rounds", "fastest", "all paths (us)");
  for (const auto& cname : colls) {
    const Collective c = *parse_collective(cname);
    for (std::uint64_t s : sizes) {
      std::vector<api::PathCost> costs;
      auto best = api::choose(table, c, s, table.algorithms(c), costs);
      if (!best) continue;
      std::printf("  %-14s %10llu %6d  %-20s %s\n", cname.c_str(), static_cast<unsigned long long>(s),
                  rounds_used[{c, s}], std::string(coll::name(*best)).c_str(), api::describe(costs).c_str());
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
