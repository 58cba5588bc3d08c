// `inc demo`: the README's main job. Without a launcher around it, it starts a local job of
// N ranks (default 8) through `inc launch`; each rank then runs a short, verified benchmark
// of every collective and rank 0 prints one readable table.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "inc/inc.hpp"
#include "tools/bench_core.hpp"
#include "tools/commands.hpp"

namespace inc::tools {

namespace {

const char* kDemoUsage = R"(usage: inc demo [-n RANKS] [--no-switch]

Starts RANKS local processes (default 8) and a software Core-INC switch, runs every collective
in the network and with the host algorithms at a small and a large size, each result verified,
and prints one table with the traffic each rank sent.
)";

int run_worker() {
  Communicator comm = Communicator::init();
  const bool lead = comm.rank() == 0;
  struct Row {
    Collective coll;
    std::uint64_t bytes;
    std::string algo;
  };
  std::vector<Row> rows;
  const bool have_switch = std::getenv("INC_SWITCH") || std::getenv("INC_TOPOLOGY");
  struct Plan {
    Collective coll;
    std::vector<const char*> algos;
  };
  // In-network first (when a switch runs), then the host algorithms, at a small and a large size.
  const Plan plans[] = {
      {Collective::allreduce, {"inc", "ring", "recursive_doubling", "rabenseifner"}},
      {Collective::reduce_scatter, {"inc", "ring"}},
      {Collective::allgather, {"inc", "ring", "recursive_doubling"}},
      {Collective::broadcast, {"inc", "binomial_tree", "pipelined_chain"}},
      {Collective::alltoall, {"pairwise"}},
  };
  for (const Plan& pl : plans)
    for (std::uint64_t b : {std::uint64_t{8} * static_cast<std::uint64_t>(comm.size()), std::uint64_t{1} << 20})
      for (const char* a : pl.algos)
        if (have_switch || std::string(a) != "inc") rows.push_back({pl.coll, b, a});

  if (lead) {
    std::printf("INC demo: %d ranks on this machine, f32 sum, every result verified\n"
                "host algorithms: TCP over loopback; in-network: %s\n\n",
                comm.size(), have_switch ? "a software Core-INC switch over UDP" : "no switch (--no-switch)");
    std::printf("%-15s %10s %-28s %11s %12s %12s %10s %8s\n", "collective", "size", "algorithm", "time(us)",
                "algbw(GB/s)", "busbw(GB/s)", "sent/size", "check");
    std::printf("%s\n", std::string(113, '-').c_str());
    std::fflush(stdout);
  }
  bool ok = true;
  for (const Row& r : rows) {
    BenchCase c;
    c.coll = r.coll;
    c.bytes = r.bytes;
    c.algo = r.algo;
    c.iters = r.bytes >= (1u << 20) ? 5 : 20;
    c.check = true;
    c.warmup = 2;
    BenchResult res = run_case(comm, c);
    ok &= res.correct == 1;
    if (lead) {
      std::string size = r.bytes >= (1u << 20) ? fmt::format("{} MiB", r.bytes >> 20)
                         : r.bytes >= 1024     ? fmt::format("{} KiB", r.bytes >> 10)
                                               : fmt::format("{} B", r.bytes);
      std::printf("%-15s %10s %-28s %11.1f %12.3f %12.3f %10.2f %8s\n", std::string(name(r.coll)).c_str(),
                  size.c_str(),
                  (res.algorithm + (res.in_network ? " (in-network)" : " (host)")).c_str(),
                  res.time_us, res.algbw, res.busbw,
                  static_cast<double>(res.bytes_sent) / static_cast<double>(std::max<std::uint64_t>(r.bytes, 1)),
                  res.correct == 1 ? "OK" : "WRONG");
      std::fflush(stdout);
    }
  }
  if (lead) {
    auto t = comm.traffic();
    std::printf("\nrank 0 host (TCP) traffic: %.1f MiB sent, %.1f MiB received in %llu + %llu messages\n",
                static_cast<double>(t.bytes_sent) / (1 << 20),
                static_cast<double>(t.bytes_received) / (1 << 20),
                static_cast<unsigned long long>(t.messages_sent),
                static_cast<unsigned long long>(t.messages_received));
    std::printf("%s\n", ok ? "all results verified correct" : "SOME RESULTS WERE WRONG");
  }
  return ok ? 0 : 3;
}

}  // namespace

int cmd_demo(int argc, char** argv) {
  int n = 8;
  bool worker = false, with_switch = true;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kDemoUsage, stdout);
      return 0;
    } else if ((a == "-n" || a == "--ranks") && i + 1 < argc) {
      char* end = nullptr;
      long v = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || v < 1 || v > 256) {
        std::fprintf(stderr, "inc demo: -n '%s' must be an integer in [1, 256]\n", argv[i]);
        return 2;
      }
      n = static_cast<int>(v);
    } else if (a == "--worker") {
      worker = true;
    } else if (a == "--no-switch") {
      with_switch = false;
    } else {
      std::fprintf(stderr, "inc demo: unknown option '%s'\n\n%s", a.c_str(), kDemoUsage);
      return 2;
    }
  }
  if (worker) {
    try {
      return run_worker();
    } catch (const Error& e) {
      std::fprintf(stderr, "inc demo: %s\n", e.what());
      return 1;
    }
  }
  // Re-run this binary under `inc launch` with the worker flag.
  std::string self = "/proc/self/exe";
  std::string ranks = std::to_string(n);
  std::vector<const char*> args{"inc", "launch", "-n", ranks.c_str(), "--no-prefix"};
  if (with_switch) args.push_back("--switch");
  for (const char* a : {"--", self.c_str(), "demo", "--worker"}) args.push_back(a);
  args.push_back(nullptr);
  ::execv(self.c_str(), const_cast<char* const*>(args.data()));
  std::perror("inc demo: exec");
  return 1;
}

}  // namespace inc::tools
