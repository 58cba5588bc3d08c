// `inc demo`: the README's main job. Without a launcher around it, it starts a local job of
// N ranks (default 8) through `inc launch`; each rank then runs a short, verified benchmark
// of every collective and rank 0 prints one readable table.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "api/tuning.hpp"
#include "inc/inc.hpp"
#include "tools/bench_core.hpp"
#include "tools/commands.hpp"

namespace inc::tools {

namespace {

int run_worker() {
  Communicator comm = Communicator::init();
  const bool lead = comm.rank() == 0;
  const bool have_switch = std::getenv("INC_SWITCH") || std::getenv("INC_TOPOLOGY");
  const char* tuning = std::getenv("INC_TUNING");
  // Every path automatic selection weighs (api::candidates: in-network first, when a switch
  // runs; then the host algorithms) and the automatic choice, at a small, a medium and a
  // large size. The switch does not run alltoall.
  const Collective colls[] = {Collective::allreduce, Collective::reduce_scatter, Collective::allgather,
                              Collective::broadcast, Collective::alltoall};
  if (lead) {
    std::printf("INC demo: %d ranks on this machine, f32 sum, every result verified\n"
                "host algorithms: TCP over loopback; in-network: %s\n"
                "auto: %s\n\n",
                comm.size(), have_switch ? "a software Core-INC switch over UDP" : "no switch (--no-switch)",
                tuning && *tuning ? fmt::format("the cheapest path by the costs measured in {}", tuning).c_str()
                                  : "untuned (no tuning file): the switch when it can, else the hosts' crossovers");
    std::printf("%-15s %10s %-42s %11s %12s %12s %10s %8s\n", "collective", "size", "algorithm", "time(us)",
                "algbw(GB/s)", "busbw(GB/s)", "sent/size", "check");
    std::printf("%s\n", std::string(127, '-').c_str());
    std::fflush(stdout);
  }
  bool ok = true;
  double worst_auto = 0;
  for (const Collective coll : colls)
    for (std::uint64_t bytes : {std::uint64_t{8} * static_cast<std::uint64_t>(comm.size()), std::uint64_t{64} << 10,
                                std::uint64_t{1} << 20}) {
      double best = 0;
      std::string best_algo;
      std::vector<std::pair<std::string, double>> fixed;  // each fixed path's time in this run
      std::vector<std::string> algos;
      for (coll::Algorithm a : api::candidates(coll, have_switch && coll != Collective::alltoall))
        algos.emplace_back(coll::name(a));
      algos.emplace_back();  // automatic, last
      for (const std::string& a : algos) {
        BenchCase c;
        c.coll = coll;
        c.bytes = bytes;
        c.algo = a;
        c.iters = bytes >= (1u << 20) ? 5 : 20;
        c.check = true;
        c.warmup = 2;
        BenchResult res = run_case(comm, c);
        ok &= res.correct == 1;
        const bool automatic = c.algo.empty();
        if (!automatic) {
          fixed.emplace_back(res.algorithm, res.median_us);
          if (best == 0 || res.median_us < best) best = res.median_us, best_algo = res.algorithm;
        }
        if (!lead) continue;
        std::string size = bytes >= (1u << 20) ? fmt::format("{} MiB", bytes >> 20)
                           : bytes >= 1024     ? fmt::format("{} KiB", bytes >> 10)
                                               : fmt::format("{} B", bytes);
        std::string label = res.algorithm + (res.in_network ? " (in-network)" : " (host)");
        if (automatic && algos.size() > 2) {
          // How good was the choice? The chosen path's own time in this run against the
          // fastest path's (a second run of the same path would only measure noise).
          double chosen = 0;
          for (const auto& [a, us] : fixed)
            if (a == res.algorithm) chosen = us;
          const double ratio = best > 0 && chosen > 0 ? chosen / best : 1;
          worst_auto = std::max(worst_auto, ratio);
          label = res.algorithm == best_algo ? fmt::format("auto: {} (the fastest)", res.algorithm)
                                             : fmt::format("auto: {} ({:.2f}x {})", res.algorithm, ratio, best_algo);
        } else if (automatic) {
          label = fmt::format("auto: {}", res.algorithm);
        }
        std::printf("%-15s %10s %-42s %11.1f %12.3f %12.3f %10.2f %8s\n",
                    automatic ? "" : std::string(name(coll)).c_str(), automatic ? "" : size.c_str(),
                    label.c_str(), res.median_us, res.algbw, res.busbw,
                    static_cast<double>(res.bytes_sent) / static_cast<double>(std::max<std::uint64_t>(bytes, 1)),
                    res.correct == 1 ? "OK" : "WRONG");
        std::fflush(stdout);
      }
    }
  if (lead) {
    auto t = comm.traffic();
    std::printf("\ntimes: median per call. auto: the path chosen automatically; when it is not the fastest "
                "here, its time in this table against the fastest's (worst: %.2fx)\n", worst_auto);
    std::printf("rank 0 host (TCP) traffic: %.1f MiB sent, %.1f MiB received in %llu + %llu messages\n",
                static_cast<double>(t.bytes_sent) / (1 << 20),
                static_cast<double>(t.bytes_received) / (1 << 20),
                static_cast<unsigned long long>(t.messages_sent),
                static_cast<unsigned long long>(t.messages_received));
    std::printf("%s\n", ok ? "all results verified correct" : "SOME RESULTS WERE WRONG");
  }
  return ok ? 0 : 3;
}

// Runs `inc launch ... -- inc <args>` and waits for it; returns its exit status.
int run_launch(const std::vector<std::string>& launch_args) {
  std::vector<const char*> argv;
  for (const auto& a : launch_args) argv.push_back(a.c_str());
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    ::execv("/proc/self/exe", const_cast<char* const*>(argv.data()));
    std::perror("inc demo: exec");
    std::_Exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

int cmd_demo(int argc, char** argv) {
  CLI::App app{"The main job: starts RANKS local processes and a software Core-INC switch, measures "
               "every path (inc tune) for automatic selection, then runs every collective through the "
               "switch, with each host algorithm and with the automatic choice, at three sizes, each "
               "result verified, and prints one table.",
               "inc demo"};
  int n = 8;
  bool worker = false, no_switch = false, no_tune = false;
  std::string tuning;
  app.add_option("-n,--ranks", n, "local ranks")->check(CLI::Range(1, 256))->capture_default_str();
  app.add_flag("--no-switch", no_switch, "no switch: host algorithms only");
  app.add_option("--tuning", tuning, "use this tuning file (from inc tune) instead of measuring");
  app.add_flag("--no-tune", no_tune, "do not measure: automatic selection untuned");
  app.add_flag("--worker", worker, "internal: run as one rank of the demo")->group("");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (worker) {
    try {
      return run_worker();
    } catch (const Error& e) {
      std::fprintf(stderr, "inc demo: %s\n", e.what());
      return 1;
    }
  }
  const std::string ranks = std::to_string(n);
  std::vector<std::string> launch{"inc", "launch", "-n", ranks, "--no-prefix"};
  if (!no_switch) launch.push_back("--switch");
  launch.push_back("--");
  launch.push_back("/proc/self/exe");
  std::string tmp_tuning;
  if (tuning.empty() && !no_tune) {
    char path[] = "/tmp/inc-demo-tuning-XXXXXX";
    int fd = ::mkstemp(path);
    if (fd < 0) {
      std::perror("inc demo: mkstemp");
      return 1;
    }
    ::close(fd);
    tmp_tuning = tuning = path;
    std::printf("measuring every path of every collective for automatic selection (inc tune, %d ranks)...\n", n);
    std::fflush(stdout);
    auto tune = launch;
    for (const char* a : {"tune", "-b", "8", "-e", "1M", "-f", "2", "-n", "5", "-w", "1", "-r", "2", "--max-rounds", "4", "-o"}) tune.push_back(a);
    tune.push_back(tuning);
    if (int rc = run_launch(tune); rc != 0) {
      std::fprintf(stderr, "inc demo: inc tune failed (exit %d)\n", rc);
      std::remove(path);
      return rc;
    }
    std::printf("\n");
  }
  if (!tuning.empty()) ::setenv("INC_TUNING", tuning.c_str(), 1);
  auto demo = launch;
  demo.push_back("demo");
  demo.push_back("--worker");
  int rc = run_launch(demo);
  if (!tmp_tuning.empty()) std::remove(tmp_tuning.c_str());
  return rc;
}

}  // namespace inc::tools
