// `inc bench`: an nccl-tests style benchmark. Run it under a launcher, e.g.
//   inc launch -n 8 -- inc bench -c allreduce -b 8 -e 64M -f 2
// Every rank runs the sweep; rank 0 prints one row per size: count, type, time, algbw,
// busbw and whether the result was verified correct.
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <new>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "coll/schedule.hpp"
#include "inc/inc.hpp"
#include "tools/bench_core.hpp"
#include "tools/commands.hpp"

namespace inc::tools {

namespace {

[[noreturn]] void usage_error(const std::string& msg) {
  std::fprintf(stderr, "inc bench: %s (see inc bench --help)\n", msg.c_str());
  std::exit(2);
}

std::uint64_t parse_bytes(const std::string& s, const char* flag) {
  if (s.empty()) usage_error(fmt::format("{} needs a size", flag));
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  std::string suf(end);
  double mul = 1;
  if (suf == "K" || suf == "k" || suf == "KiB") mul = 1024.0;
  else if (suf == "M" || suf == "m" || suf == "MiB") mul = 1024.0 * 1024;
  else if (suf == "G" || suf == "g" || suf == "GiB") mul = 1024.0 * 1024 * 1024;
  else if (!suf.empty() && suf != "B") usage_error(fmt::format("{} '{}': unknown size suffix", flag, s));
  if (!(v >= 0) || v * mul > 16.0 * 1024 * 1024 * 1024)
    usage_error(fmt::format("{} '{}' is not a size between 0 and 16G", flag, s));
  return static_cast<std::uint64_t>(v * mul);
}

std::string human_bytes(std::uint64_t b) {
  if (b >= (1ull << 30) && b % (1ull << 30) == 0) return fmt::format("{}G", b >> 30);
  if (b >= (1ull << 20) && b % (1ull << 20) == 0) return fmt::format("{}M", b >> 20);
  if (b >= (1ull << 10) && b % (1ull << 10) == 0) return fmt::format("{}K", b >> 10);
  return fmt::format("{}", b);
}

const char* check_text(int c) { return c == 1 ? "OK" : c == 0 ? "WRONG" : "-"; }

// `--report`: the numerics lines under a row (reductions only).
std::string numerics_text(const BenchResult& r) {
  if (r.hops.empty()) return "";
  std::string s = fmt::format("#   numerics: overflow events {}{}, non-finite inputs (rank 0) {}\n", r.overflow_events,
                              r.events_counted ? "" : " (not counted on this path)", r.nonfinite_inputs);
  for (const auto& h : r.hops)
    s += fmt::format("#     {:<16} {:>2}-bit {:>4g} B/element  {}\n", h.hop, h.accumulator_bits, h.bytes_per_element,
                     h.carries);
  return s;
}

nlohmann::json hops_json(const std::vector<NumericsHop>& hops) {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& h : hops)
    j.push_back({{"hop", h.hop}, {"accumulator_bits", h.accumulator_bits},
                 {"bytes_per_element", h.bytes_per_element}, {"carries", h.carries}});
  return j;
}

}  // namespace

int cmd_bench(int argc, char** argv) {
  std::vector<Collective> colls{Collective::allreduce};
  std::vector<std::string> algos{""};
  BenchCase base;
  std::uint64_t min_b = 8, max_b = 64ull << 20;
  double factor = 2;
  std::string format = "table", csv_path, json_path;
  bool progress = isatty(STDERR_FILENO) != 0;

  CLI::App app{"An nccl-tests style collective benchmark. Run it under a launcher (inc launch, "
               "mpirun, srun, torchrun); rank 0 prints one row per size.",
               "inc bench"};
  std::vector<std::string> coll_names{"allreduce"}, algo_names{"auto"};
  std::string dtype_name = "f32", op_name = "sum", min_s = "8", max_s = "64M";
  int check = 1;
  bool no_progress = false, interleave = false, show_report = false, cpu_column = false;
  app.add_option("-c,--coll", coll_names,
                 "allreduce | reduce_scatter | allgather | broadcast | alltoall | all (comma list)")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("-a,--algo", algo_names,
                 "auto | ring | recursive_doubling | rabenseifner | binomial_tree | pipelined_chain | "
                 "pairwise | inc; a comma list runs each")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("-d,--dtype", dtype_name, "f64 f32 f16 bf16 i8 u8 i32 u32 i64 u64 e4m3 e5m2 i4 mxfp8_e4m3 mxfp8_e5m2 mxint8 mxfp4 mxfp6_e2m3 mxfp6_e3m2 (MX: sizes are rounded to whole blocks of 32 elements)")->capture_default_str();
  app.add_option("-o,--op", op_name, "sum | prod | min | max | avg")->capture_default_str();
  app.add_option("-b,--min-bytes", min_s, "smallest size (suffixes K, M, G = 2^10, 2^20, 2^30)")->capture_default_str();
  app.add_option("-e,--max-bytes", max_s, "largest size")->capture_default_str();
  app.add_option("-f,--factor", factor, "multiply the size by F each step")->check(CLI::Range(1.0000001, 1024.0))->capture_default_str();
  app.add_option("-n,--iters", base.iters, "timed iterations per size")->check(CLI::Range(1, 1000000))->capture_default_str();
  app.add_option("-w,--warmup", base.warmup, "untimed iterations per size")->check(CLI::Range(0, 1000000))->capture_default_str();
  app.add_option("-r,--root", base.root, "broadcast root")->check(CLI::NonNegativeNumber)->capture_default_str();
  app.add_flag("--inplace", base.in_place, "in-place buffers (NCCL conventions)");
  app.add_option("--check", check,
                 "1: fresh inputs every iteration, every result verified, only the call timed "
                 "(between barriers); 0: back-to-back timing as nccl-tests, no check")
      ->check(CLI::Range(0, 1))
      ->capture_default_str();
  app.add_option("--format", format, "table | csv | json (on stdout)")
      ->check(CLI::IsMember({"table", "csv", "json"}))
      ->capture_default_str();
  app.add_option("--csv", csv_path, "also write CSV to FILE");
  app.add_option("--json", json_path, "also write JSON to FILE");
  app.add_flag("--no-progress", no_progress, "no progress line on stderr");
  app.add_flag("--report", show_report,
               "after each row, the numerics of rank 0's report of its last call: overflow events "
               "and, per hop, accumulator width and bytes per element (docs/NUMERICS.md)");
  app.add_flag("--cpu", cpu_column,
               "add a column cpu_us to the CSV: each rank's process CPU time (all threads, user + "
               "system) per timed call, mean over the ranks (always in the JSON); with INC_SPIN_US=0 "
               "it is work, not polling");
  app.add_flag("--interleave", interleave,
               "per size, every algorithm in turn (default: per algorithm, every size): a slow "
               "spell of a shared machine then hits every path of a size alike");
  std::string offload;
  app.add_option("--offload", offload,
                 "host | edge: post every collective to this host's Edge-INC engine (INC_OFFLOAD; "
                 "`inc launch --edge` starts one)")
      ->check(CLI::IsMember({"host", "edge"}));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (no_progress) progress = false;
  base.check = check == 1;
  colls.clear();
  for (const auto& n : coll_names) {
    if (n == "all") {
      colls.insert(colls.end(), {Collective::allreduce, Collective::reduce_scatter, Collective::allgather,
                                 Collective::broadcast, Collective::alltoall});
      continue;
    }
    auto c = parse_collective(n);
    if (!c || *c == Collective::barrier) usage_error(fmt::format("unknown collective '{}'", n));
    colls.push_back(*c);
  }
  algos.clear();
  for (const auto& x : algo_names) {
    coll::Algorithm parsed;
    if (!coll::parse_algorithm(x, parsed)) usage_error(fmt::format("unknown algorithm '{}'", x));
    algos.push_back(x == "auto" || x == "automatic" ? std::string() : x);
  }
  auto t = parse_data_type(dtype_name);
  if (!t) usage_error(fmt::format("unknown data type '{}'", dtype_name));
  base.dtype = *t;
  auto o = parse_reduce_op(op_name);
  if (!o) usage_error(fmt::format("unknown reduction op '{}'", op_name));
  base.op = *o;
  min_b = parse_bytes(min_s, "--min-bytes");
  max_b = parse_bytes(max_s, "--max-bytes");
  if (min_b > max_b) usage_error("--min-bytes is larger than --max-bytes");

  Communicator comm;
  try {
    Options opts;
    opts.offload = offload;
    comm = Communicator::init(opts);
  } catch (const Error& e) {
    std::fprintf(stderr, "inc bench: %s\n", e.what());
    return 1;
  }
  const bool lead = comm.rank() == 0;
  if (base.root >= comm.size()) usage_error(fmt::format("--root {} but only {} ranks", base.root, comm.size()));

  std::vector<std::uint64_t> sizes;
  for (double s = static_cast<double>(min_b); s <= static_cast<double>(max_b) * 1.0000001; s *= factor) {
    sizes.push_back(static_cast<std::uint64_t>(std::llround(s)));
    if (s == 0) break;
  }
  std::vector<BenchResult> results;
  std::size_t total = sizes.size() * colls.size() * algos.size(), done = 0;
  bool any_wrong = false;

  if (lead && format == "table") {
    std::printf("# inc bench: %d ranks, dtype %s, op %s, %s, %d iters (+%d warm-up)\n", comm.size(),
                std::string(name(base.dtype)).c_str(), std::string(name(base.op)).c_str(),
                base.in_place ? "in-place" : "out-of-place", base.iters, base.warmup);
    std::printf("#\n# %-14s %10s %12s %5s %5s %-20s %12s %11s %11s %6s\n", "collective", "size(B)",
                "count", "type", "op", "algorithm", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "check");
    std::fflush(stdout);
  }
  try {
    std::vector<std::pair<std::size_t, std::size_t>> order;  // (algorithm, size) per collective
    for (std::size_t ai = 0; ai < algos.size(); ++ai)
      for (std::size_t si = 0; si < sizes.size(); ++si) order.emplace_back(ai, si);
    if (interleave)
      std::stable_sort(order.begin(), order.end(), [](const auto& x, const auto& y) { return x.second < y.second; });
    for (Collective coll : colls)
      for (const auto& [ai, si] : order) {
        const std::string& algo = algos[ai];
        const std::uint64_t s = sizes[si];
        coll::Algorithm a = coll::Algorithm::automatic;
        coll::parse_algorithm(algo.empty() ? "auto" : algo, a);
        // `-c all -a ring,inc`: skip the pairs that do not exist (ring has no broadcast);
        // 'inc' always runs (it falls back to the hosts with a reason where it must).
        if (a != coll::Algorithm::inc && !coll::supports(coll, a)) {
          ++done;
          continue;
        }
        BenchCase c = base;
        c.coll = coll;
        c.algo = algo;
        c.bytes = s;
        if (lead && progress)
          std::fprintf(stderr, "\r[%zu/%zu] %s %s ...   ", done + 1, total,
                       std::string(name(coll)).c_str(), human_bytes(s).c_str());
        BenchResult r;
        try {
          r = run_case(comm, c);
        } catch (const std::bad_alloc&) {
          // Inputs, outputs and the check's expectations are allocated per size.
          throw Error(Error::Kind::invalid_argument,
                      fmt::format("out of memory: {} of {} ({} B) needs buffers this process "
                                  "cannot allocate; lower --max-bytes (-e) or free memory",
                                  name(coll), human_bytes(s), s));
        }
        ++done;
        any_wrong |= r.correct == 0;
        results.push_back(r);
        if (lead && format == "table") {
          if (progress) std::fprintf(stderr, "\r\033[K");
          std::printf("  %-14s %10llu %12llu %5s %5s %-20s %12.2f %11.3f %11.3f %6s\n",
                      std::string(name(coll)).c_str(), static_cast<unsigned long long>(s),
                      static_cast<unsigned long long>(r.count), std::string(name(c.dtype)).c_str(),
                      (coll == Collective::allreduce || coll == Collective::reduce_scatter)
                          ? std::string(name(c.op)).c_str()
                          : "-",
                      (r.algorithm + (r.in_network ? "*" : "")).c_str(), r.time_us, r.algbw,
                      r.busbw, check_text(r.correct));
          if (show_report) std::printf("%s", numerics_text(r).c_str());
          std::fflush(stdout);
        }
      }
  } catch (const Error& e) {
    std::fprintf(stderr, "%sinc bench (rank %d): %s\n", progress ? "\n" : "", comm.rank(), e.what());
    return 1;
  }
  if (lead && progress) std::fprintf(stderr, "\r\033[K");

  if (lead) {
    auto csv = [&](std::FILE* f) {
      // The columns nccl-tests-like parsers expect; `--cpu` appends cpu_us after them.
      std::fprintf(f, "collective,size_bytes,count,dtype,op,algo,in_network,ranks,time_us,algbw_GBps,busbw_GBps,correct%s\n",
                   cpu_column ? ",cpu_us" : "");
      for (auto& r : results) {
        std::fprintf(f, "%s,%llu,%llu,%s,%s,%s,%d,%d,%.3f,%.4f,%.4f,%d",
                     std::string(name(r.c.coll)).c_str(), static_cast<unsigned long long>(r.c.bytes),
                     static_cast<unsigned long long>(r.count), std::string(name(r.c.dtype)).c_str(),
                     std::string(name(r.c.op)).c_str(), r.algorithm.c_str(), r.in_network ? 1 : 0,
                     comm.size(), r.time_us, r.algbw, r.busbw, r.correct);
        if (cpu_column) std::fprintf(f, ",%.3f", r.cpu_us);
        std::fprintf(f, "\n");
      }
    };
    auto json = [&]() {
      nlohmann::json j = nlohmann::json::array();
      for (auto& r : results)
        j.push_back({{"collective", name(r.c.coll)}, {"size_bytes", r.c.bytes}, {"count", r.count},
                     {"dtype", name(r.c.dtype)}, {"op", name(r.c.op)}, {"algo", r.algorithm},
                     {"requested", r.c.algo.empty() ? std::string("auto") : r.c.algo}, {"in_network", r.in_network}, {"ranks", comm.size()}, {"time_us", r.time_us}, {"median_us", r.median_us}, {"cpu_us", r.cpu_us},
                     {"algbw_GBps", r.algbw}, {"busbw_GBps", r.busbw}, {"correct", r.correct},
                     {"wrong_elements", r.wrong_elements}, {"reason", r.reason},
                     {"bytes_sent", r.bytes_sent}, {"messages_sent", r.messages_sent},
                     {"switch_operations", r.switch_operations}, {"iters", r.c.iters},
                     {"warmup", r.c.warmup}, {"overflow_events", r.overflow_events},
                     {"events_counted", r.events_counted}, {"nonfinite_inputs", r.nonfinite_inputs},
                     {"hops", hops_json(r.hops)}});
      return j.dump(2);
    };
    if (format == "csv") csv(stdout);
    if (format == "json") std::printf("%s\n", json().c_str());
    if (!csv_path.empty()) {
      std::FILE* f = std::fopen(csv_path.c_str(), "w");
      if (!f) {
        std::fprintf(stderr, "inc bench: cannot write %s\n", csv_path.c_str());
        return 1;
      }
      csv(f);
      std::fclose(f);
    }
    if (!json_path.empty()) {
      std::ofstream f(json_path);
      f << json() << "\n";
      if (!f) {
        std::fprintf(stderr, "inc bench: cannot write %s\n", json_path.c_str());
        return 1;
      }
    }
    if (format == "table" && any_wrong) std::printf("# WRONG results were found: see the check column\n");
  }
  return any_wrong ? 3 : 0;
}

}  // namespace inc::tools
