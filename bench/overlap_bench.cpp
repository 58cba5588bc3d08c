// Overlap of a non-blocking collective with computation (issue 7, "Measured"): an iallreduce
// (through the switch by default) is started before a compute loop as long as the collective
// alone, then waited for. Reported per rank count and size, as medians over iterations and the
// maximum over ranks:
//   t_comm      the collective alone (start, wait)
//   t_compute   the compute loop alone
//   t_overlap   start, compute loop (calling test() every K steps, or never), wait
//   overlap     100 x (1 - (t_overlap - t_compute) / t_comm): 100% hides the collective
//               entirely, 0% is no better than one after the other.
//   t_seq       the compute loop, then the collective, measured: on an oversubscribed machine
//               (ranks and switch sharing few cores) it exceeds t_compute + t_comm, and
//               t_overlap is best read against it.
// There is no progress thread: the collective advances in test() and wait() (as in MPI without
// asynchronous progress), which is what --test-every measures.
//
//   build/tools/inc launch -n 8 --switch -- build/bench/overlap_bench -b 1MiB -n 20
//   build/tools/inc launch -n 8 -- build/bench/overlap_bench -a ring       # host algorithm
//   build/tools/inc launch -n 4 --edge -- build/bench/overlap_bench --registered  # Edge-INC
// Also printed: the application's CPU time per collective alone (getrusage of the process:
// with the edge engine, its work is in the engine's process, not the application's).
// --sleep: the "computation" is a sleep of t_comm, which leaves the cores to the progress (engine,
// kernel): the overlap then shows what asynchronous progress achieves without competing for them.
// --memory: only the collective alone, then per byte of the vector: the bytes this process read
// from its sockets (/proc/self/io rchar: the transport reads with read(2); its sendmsg(2) is not
// counted there) and the payload the collective sent (Report::bytes_sent), the two host-memory
// transfers of the model's Edge-INC figures (docs/EDGE.md, "Memory traffic").
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <cstdlib>
#include <thread>
#include <span>
#include <vector>

#include "inc/inc.hpp"

using namespace inc;
using clk = std::chrono::steady_clock;

namespace {

// Work that stays in the core (no memory traffic to compete with the network path): a few
// multiply-adds per element over an L1-resident vector, a fixed number of steps.
struct Compute {
  std::vector<float> v = std::vector<float>(2048, 1.0f);
  float sink = 0;
  void step() {
    for (auto& x : v) x = x * 0.999f + 0.001f;
    sink += v[0];
  }
};

double seconds_since(clk::time_point t0) {
  return std::chrono::duration<double>(clk::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

std::uint64_t parse_bytes(const std::string& s) {
  std::size_t pos = 0;
  double v = std::stod(s, &pos);
  std::string unit = s.substr(pos);
  double mul = 1;
  if (unit == "K" || unit == "KiB")
    mul = 1024;
  else if (unit == "M" || unit == "MiB")
    mul = 1024.0 * 1024;
  else if (unit == "G" || unit == "GiB")
    mul = 1024.0 * 1024 * 1024;
  else if (!unit.empty() && unit != "B")
    throw CLI::ValidationError("--bytes", "unknown unit '" + unit + "'");
  if (!(v > 0)) throw CLI::ValidationError("--bytes", "must be positive");
  return static_cast<std::uint64_t>(v * mul);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Overlap of a non-blocking collective with computation", "overlap_bench"};
  std::string bytes_s = "1MiB", algo;
  int iters = 20;
  std::vector<int> test_every = {0, 16, 256};
  app.add_option("-b,--bytes", bytes_s, "allreduce size (f32 sum), e.g. 64KiB, 1MiB")
      ->capture_default_str();
  app.add_option("-n,--iters", iters, "timed iterations per measurement")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  app.add_option("-a,--algo", algo, "algorithm (default: the communicator's: inc with a switch)");
  app.add_option("--test-every", test_every,
                 "call test() every K compute steps (0 = never); repeatable")
      ->capture_default_str();
  bool registered = false;
  app.add_flag("--registered", registered,
               "buffers from Communicator::alloc_registered (zero copy through the edge engine)");
  bool sleep_mode = false;
  app.add_flag("--sleep", sleep_mode,
               "sleep for t_comm instead of computing: the cores are left to the progress (the ceiling of "
               "asynchronous progress, without the competition for the cores)");
  bool memory = false;
  app.add_flag("--memory", memory, "measure the collective alone and this process's syscall bytes per byte, then stop");
  CLI11_PARSE(app, argc, argv);
  std::uint64_t bytes = 0;
  try {
    bytes = parse_bytes(bytes_s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "overlap_bench: --bytes '%s': %s\n", bytes_s.c_str(), e.what());
    return 2;
  }

  try {
    Communicator comm = Communicator::init();
    const bool lead = comm.rank() == 0;
    const std::size_t n = std::max<std::uint64_t>(1, bytes / 4);
    auto* in_p = static_cast<float*>(registered ? comm.alloc_registered(n * 4) : std::malloc(n * 4));
    auto* out_p = static_cast<float*>(registered ? comm.alloc_registered(n * 4) : std::malloc(n * 4));
    std::span<float> in(in_p, n), out(out_p, n);
    auto release = [&] {
      if (registered) {
        comm.free_registered(in_p);
        comm.free_registered(out_p);
      } else {
        std::free(in_p);
        std::free(out_p);
      }
    };
    std::fill(in.begin(), in.end(), 1.0f);
    auto cpu_now = [] {
      rusage u{};
      ::getrusage(RUSAGE_SELF, &u);
      return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
             1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
    };
    CallOptions opt;
    opt.algo = algo;
    auto comm_once = [&] {
      comm.iallreduce(in.data(), out.data(), n, DataType::f32, ReduceOp::sum, opt).wait();
    };
    for (int i = 0; i < 3; ++i) comm_once();
    const Report rep = comm.last_report();

    auto io_bytes = [] {  // rchar: bytes through read(2) and friends
      std::FILE* f = std::fopen("/proc/self/io", "r");
      unsigned long long v = 0, sum = 0;
      char key[64];
      while (f && std::fscanf(f, "%63s %llu", key, &v) == 2)
        if (std::string(key) == "rchar:") sum += v;
      if (f) std::fclose(f);
      return static_cast<double>(sum);
    };
    std::vector<double> t;
    double resent_comm = 0, cpu_comm = 0;
    const double io0 = io_bytes();
    for (int i = 0; i < iters; ++i) {
      comm.barrier();
      auto t0 = clk::now();
      const double c0 = cpu_now();
      comm_once();
      cpu_comm += cpu_now() - c0;
      t.push_back(seconds_since(t0));
      resent_comm += static_cast<double>(comm.last_report().retransmissions);
    }
    cpu_comm /= iters;
    const double t_comm = median(t);
    if (memory) {  // per rank, the sum and the slowest
      const double io = (io_bytes() - io0) / iters / static_cast<double>(n * 4);
      const double sent = static_cast<double>(comm.last_report().bytes_sent) / static_cast<double>(n * 4);
      double mine[2] = {io, sent}, sum[2] = {0, 0}, worst = 0;
      CallOptions host;
      host.algo = "recursive_doubling";
      comm.allreduce(mine, sum, 2, DataType::f64, ReduceOp::sum, host);
      comm.allreduce(&t_comm, &worst, 1, DataType::f64, ReduceOp::max, host);
      if (lead)
        std::printf("memory: allreduce of %s on %d ranks, %s (%s%s): t_comm %.1f us (slowest); application "
                    "process read from sockets %.3f B per byte, the collective sent %.3f B per byte (means over "
                    "ranks; %d collectives of %zu B + 3 warm-up)\n",
                    bytes_s.c_str(), comm.size(), rep.algorithm.c_str(), rep.offload == "edge" ? "edge engine" : "hosts",
                    registered ? ", registered buffers" : "", worst * 1e6, sum[0] / comm.size(), sum[1] / comm.size(),
                    iters, n * 4);
      release();
      return 0;
    }

    // Calibrate the loop to t_comm on this rank.
    Compute work;
    std::uint64_t steps = 64;
    const auto nap = std::chrono::duration<double>(t_comm);
    for (; !sleep_mode;) {
      auto t0 = clk::now();
      for (std::uint64_t s = 0; s < steps; ++s) work.step();
      const double dt = seconds_since(t0);
      if (dt >= 0.2 * t_comm || steps > (1ull << 40)) {
        steps = std::max<std::uint64_t>(
            1, static_cast<std::uint64_t>(static_cast<double>(steps) * t_comm / dt));
        break;
      }
      steps *= 4;
    }
    t.clear();
    for (int i = 0; i < iters; ++i) {
      comm.barrier();
      auto t0 = clk::now();
      if (sleep_mode) std::this_thread::sleep_for(nap);
      for (std::uint64_t s = 0; s < steps && !sleep_mode; ++s) work.step();
      t.push_back(seconds_since(t0));
    }
    const double t_compute = median(t);

    // One after the other, measured (on an oversubscribed machine not quite the sum).
    t.clear();
    for (int i = 0; i < iters; ++i) {
      comm.barrier();
      auto t0 = clk::now();
      if (sleep_mode) std::this_thread::sleep_for(nap);
      for (std::uint64_t s = 0; s < steps && !sleep_mode; ++s) work.step();
      comm_once();
      t.push_back(seconds_since(t0));
    }
    const double t_sequential = median(t);

    std::vector<double> t_overlap, resent;
    for (int k : test_every) {
      t.clear();
      double retx = 0;
      for (int i = 0; i < iters; ++i) {
        comm.barrier();
        auto t0 = clk::now();
        Request r = comm.iallreduce(in.data(), out.data(), n, DataType::f32, ReduceOp::sum, opt);
        bool done = false;
        if (sleep_mode) std::this_thread::sleep_for(nap);
        for (std::uint64_t s = 0; s < steps && !sleep_mode; ++s) {
          work.step();
          if (k > 0 && !done && (s + 1) % static_cast<std::uint64_t>(k) == 0) done = r.test();
        }
        r.wait();
        t.push_back(seconds_since(t0));
        retx += static_cast<double>(r.report().retransmissions);
      }
      t_overlap.push_back(median(t));
      resent.push_back(retx / iters);
    }

    // The slowest rank's medians (and the most retransmissions per collective).
    std::vector<double> mine = {t_comm, t_compute, t_sequential, resent_comm / iters, cpu_comm};
    mine.insert(mine.end(), t_overlap.begin(), t_overlap.end());
    mine.insert(mine.end(), resent.begin(), resent.end());
    std::rotate(mine.begin() + 4, mine.begin() + 5, mine.end());
    std::vector<double> worst(mine.size());
    CallOptions host;
    host.algo = "recursive_doubling";
    comm.allreduce(mine.data(), worst.data(), mine.size(), DataType::f64, ReduceOp::max, host);
    if (lead) {
      std::printf(
          "overlap: allreduce of %s (%zu x f32 sum) on %d ranks, %s (%s%s); medians of %d, "
          "slowest rank; compute loop of %llu steps per rank\n",
          bytes_s.c_str(), n, comm.size(), rep.algorithm.c_str(),
          rep.offload == "edge" ? "edge engine" : rep.in_network ? "in the network" : "on the hosts",
          registered ? ", registered buffers" : "", iters,
          static_cast<unsigned long long>(steps));
      const std::size_t K = test_every.size();
      std::printf("  %-36s %10.1f us   %5.1f retransmissions\n", "collective alone (t_comm)",
                  worst[0] * 1e6, worst[3]);
      std::printf("  %-36s %10.1f us\n", "compute alone (t_compute)", worst[1] * 1e6);
      std::printf("  %-36s %10.1f us\n", "application CPU per collective alone", worst[4 + 2 * K] * 1e6);
      std::printf("  %-36s %10.1f us   (sum of the two: %.1f us)\n", "compute, then collective",
                  worst[2] * 1e6, (worst[0] + worst[1]) * 1e6);
      for (std::size_t j = 0; j < K; ++j) {
        const double tov = worst[4 + j];
        const double overlap = 100.0 * (1.0 - (tov - worst[1]) / worst[0]);
        std::string label = test_every[j] > 0
                                ? fmt::format("overlapped, test() every {} steps", test_every[j])
                                : std::string("overlapped, no test() until wait()");
        std::printf("  %-36s %10.1f us   overlap %6.1f %%   %5.1f retransmissions   %+.1f us "
                    "against compute-then-collective\n",
                    label.c_str(), tov * 1e6, overlap, worst[4 + K + j], (tov - worst[2]) * 1e6);
      }
      std::fflush(stdout);
    }
    if (work.sink == 12345.0f) std::puts("");  // keep the loop
    release();
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "overlap_bench: %s\n", e.what());
    return 1;
  }
}
