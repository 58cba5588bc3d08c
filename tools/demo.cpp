// `inc demo`: the README's main job. Without a launcher around it, it starts a local job of
// N ranks (default 8) through `inc launch`; each rank then runs a short, verified benchmark
// of every collective and rank 0 prints one readable table.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "inc/inc.hpp"
#include "tools/bench_core.hpp"
#include "tools/commands.hpp"

namespace inc::tools {

namespace {

const char* kDemoUsage = R"(usage: inc demo [-n RANKS]

Starts RANKS local processes (default 8) that join one INC job over TCP on loopback and run
every collective at a few sizes, each result verified, and prints a table.
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
  for (Collective c : {Collective::allreduce, Collective::reduce_scatter, Collective::allgather,
                       Collective::broadcast, Collective::alltoall})
    for (std::uint64_t b : {std::uint64_t{8} * static_cast<std::uint64_t>(comm.size()),
                            std::uint64_t{64} << 10, std::uint64_t{4} << 20})
      rows.push_back({c, b, ""});
  // The host allreduce algorithms side by side at one size.
  for (const char* a : {"ring", "recursive_doubling", "rabenseifner"})
    rows.push_back({Collective::allreduce, std::uint64_t{4} << 20, a});

  if (lead) {
    std::printf("INC demo: %d ranks on this machine, TCP over loopback, f32 sum, results verified\n\n",
                comm.size());
    std::printf("%-15s %10s %-28s %11s %12s %12s %8s\n", "collective", "size", "algorithm", "time(us)",
                "algbw(GB/s)", "busbw(GB/s)", "check");
    std::printf("%s\n", std::string(102, '-').c_str());
    std::fflush(stdout);
  }
  bool ok = true;
  for (const Row& r : rows) {
    BenchCase c;
    c.coll = r.coll;
    c.bytes = r.bytes;
    c.algo = r.algo;
    c.iters = r.bytes >= (1u << 20) ? 5 : 20;
    c.warmup = 2;
    BenchResult res = run_case(comm, c);
    ok &= res.correct == 1;
    if (lead) {
      std::string size = r.bytes >= (1u << 20) ? fmt::format("{} MiB", r.bytes >> 20)
                         : r.bytes >= 1024     ? fmt::format("{} KiB", r.bytes >> 10)
                                               : fmt::format("{} B", r.bytes);
      std::printf("%-15s %10s %-28s %11.1f %12.3f %12.3f %8s\n", std::string(name(r.coll)).c_str(),
                  size.c_str(),
                  (res.algorithm + (res.in_network ? " (in-network)" : " (host)")).c_str(),
                  res.time_us, res.algbw, res.busbw, res.correct == 1 ? "OK" : "WRONG");
      std::fflush(stdout);
    }
  }
  if (lead) {
    auto t = comm.traffic();
    std::printf("\nrank 0 traffic: %.1f MiB sent, %.1f MiB received in %llu + %llu messages\n",
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
  bool worker = false;
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
  std::vector<const char*> args{"inc", "launch", "-n", ranks.c_str(), "--no-prefix", "--",
                                self.c_str(), "demo", "--worker", nullptr};
  ::execv(self.c_str(), const_cast<char* const*>(args.data()));
  std::perror("inc demo: exec");
  return 1;
}

}  // namespace inc::tools
