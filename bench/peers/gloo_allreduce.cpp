// Peer benchmark: Gloo's CPU allreduce (f32 sum) over its TCP transport on loopback, with the
// same methodology and CSV columns as `inc bench` so scripts/compare-peers.sh can put the
// numbers side by side (docs/PEERS.md).
//
//   inc_gloo_allreduce -n 8 -a ring,ring_chunked,halving_doubling,allreduce -b 8 -e 64M -f 4
//
// The driver forks its N ranks itself (before any Gloo object exists); they rendezvous through
// a gloo::rendezvous::FileStore in a fresh temporary directory and connect a full mesh of TCP
// pairs on 127.0.0.1. Rank 0 prints CSV on stdout.
//
// Algorithms (-a, CSV algo column in brackets):
//   ring              gloo::AllreduceRing            [gloo_ring]     passes the whole buffer
//                     around the ring n-1 times (latency-friendly, (n-1)*S bytes per rank)
//   ring_chunked      gloo::AllreduceRingChunked     [gloo_ring_chunked]  reduce-scatter +
//                     allgather in chunks (bandwidth-optimal, 2(n-1)/n*S bytes per rank)
//   halving_doubling  gloo::AllreduceHalvingDoubling [gloo_hd]       Rabenseifner-style
//   bcube             gloo::AllreduceBcube           [gloo_bcube]
//   allreduce         gloo::allreduce() (the newer unbound-buffer API that PyTorch's
//                     ProcessGroupGloo calls; ring with segments)           [gloo_allreduce]
//
// Methodology (mirrors tools/bench_core.cpp): per size, construct the algorithm once (buffer
// registration is not timed), one verified run on a fresh input pattern (every rank checks every
// element; the wrong-element counts are summed over ranks), `-w` untimed runs, a barrier, `-i`
// timed back-to-back runs; time_us = the slowest rank's mean per run. The classic algorithms
// (ring, ring_chunked, halving_doubling, bcube) are in-place only; allreduce() runs out of
// place like `inc bench` does by default. In-place timed runs start from zeros so repeated
// summation cannot overflow to inf (the cost of an f32 add does not depend on the value).
#include <gloo/allreduce.h>
#include <gloo/allreduce_bcube.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier_all_to_all.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace {

const char* kUsage =
    "usage: inc_gloo_allreduce [options]\n"
    "  -n N          ranks (forked locally)                                  [8]\n"
    "  -a LIST       ring,ring_chunked,halving_doubling,bcube,allreduce      [ring]\n"
    "  -b BYTES      smallest size (K, M, G suffixes = 2^10, 2^20, 2^30)     [8]\n"
    "  -e BYTES      largest size                                            [64M]\n"
    "  -f F          size factor                                             [2]\n"
    "  -i N          timed iterations per size                               [20]\n"
    "  -w N          untimed warm-up iterations per size                     [5]\n"
    "  --timeout S   Gloo operation timeout in seconds                       [300]\n"
    "  --no-header   do not print the CSV header\n";

[[noreturn]] void usage(const std::string& msg) {
  std::fprintf(stderr, "inc_gloo_allreduce: %s\n\n%s", msg.c_str(), kUsage);
  std::exit(2);
}

std::uint64_t parse_bytes(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  std::string suf(end);
  double mul = 1;
  if (suf == "K" || suf == "k")
    mul = 1024.0;
  else if (suf == "M" || suf == "m")
    mul = 1024.0 * 1024;
  else if (suf == "G" || suf == "g")
    mul = 1024.0 * 1024 * 1024;
  else if (!suf.empty() && suf != "B")
    usage(std::string("bad size ") + s);
  if (!(v >= 0) || v * mul > 4.0 * 1024 * 1024 * 1024) usage(std::string("bad size ") + s);
  return static_cast<std::uint64_t>(v * mul);
}

long parse_long(const char* s, long lo, long hi) {
  char* end = nullptr;
  long v = std::strtol(s, &end, 10);
  if (*s == '\0' || *end != '\0' || v < lo || v > hi) usage(std::string("bad number ") + s);
  return v;
}

struct Options {
  int ranks = 8;
  std::vector<std::string> algos{"ring"};
  std::uint64_t min_b = 8, max_b = 64ull << 20;
  double factor = 2;
  int iters = 20, warmup = 5;
  int timeout_s = 300;
  bool header = true;
};

std::string csv_name(const std::string& a) {
  if (a == "ring") return "gloo_ring";
  if (a == "ring_chunked") return "gloo_ring_chunked";
  if (a == "halving_doubling") return "gloo_hd";
  if (a == "bcube") return "gloo_bcube";
  if (a == "allreduce") return "gloo_allreduce";
  return "";
}

// Same input pattern as `inc bench` (tools/bench_core.cpp): small integers, exact in f32.
float pattern(int rank, std::uint64_t i) {
  return 1.0f + static_cast<float>((static_cast<std::uint64_t>(rank) * 7 + i * 3) % 4);
}

int run_rank(const Options& o, int rank, const std::string& store_dir) {
  using clock = std::chrono::steady_clock;
  const int n = o.ranks;
  gloo::transport::tcp::attr attr("127.0.0.1");
  attr.ai_family = AF_INET;
  auto dev = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(store_dir);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, n);
  ctx->setTimeout(std::chrono::seconds(o.timeout_s));
  ctx->connectFullMesh(store, dev);

  gloo::BarrierAllToAll barrier(ctx);
  // Cross-rank scalar reductions for the verdict and the timing (not timed themselves).
  double scalar = 0;
  gloo::AllreduceRing<double> sum_scalar(ctx, {&scalar}, 1, gloo::ReductionFunction<double>::sum);
  gloo::AllreduceRing<double> max_scalar(ctx, {&scalar}, 1, gloo::ReductionFunction<double>::max);

  float expect[12];
  for (int k = 0; k < 12; ++k) {
    float s = 0;
    for (int r = 0; r < n; ++r) s += pattern(r, static_cast<std::uint64_t>(k));
    expect[k] = s;
  }

  if (rank == 0 && o.header)
    std::printf(
        "collective,size_bytes,count,dtype,op,algo,in_network,ranks,time_us,algbw_GBps,busbw_GBps,"
        "correct\n");
  std::fflush(stdout);

  bool any_wrong = false;
  for (const auto& algo : o.algos) {
    for (std::uint64_t bytes = o.min_b; bytes <= o.max_b;) {
      const std::uint64_t count = bytes / sizeof(float);
      if (count > 0) {
        std::vector<float> in(count), out(count);
        auto fill_input = [&](std::vector<float>& v) {
          for (std::uint64_t i = 0; i < count; ++i) v[i] = pattern(rank, i);
        };
        std::unique_ptr<gloo::Algorithm> classic;
        std::unique_ptr<gloo::AllreduceOptions> opts;
        const int c = static_cast<int>(count);
        if (algo == "ring")
          classic =
              std::make_unique<gloo::AllreduceRing<float>>(ctx, std::vector<float*>{out.data()}, c);
        else if (algo == "ring_chunked")
          classic = std::make_unique<gloo::AllreduceRingChunked<float>>(
              ctx, std::vector<float*>{out.data()}, c);
        else if (algo == "halving_doubling")
          classic = std::make_unique<gloo::AllreduceHalvingDoubling<float>>(
              ctx, std::vector<float*>{out.data()}, c);
        else if (algo == "bcube")
          classic = std::make_unique<gloo::AllreduceBcube<float>>(
              ctx, std::vector<float*>{out.data()}, c);
        else {
          opts = std::make_unique<gloo::AllreduceOptions>(ctx);
          opts->setInput(in.data(), count);
          opts->setOutput(out.data(), count);
          opts->setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
          opts->setReduceFunction(
              static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
          opts->setTag(7);
        }
        auto run_once = [&] {
          if (classic)
            classic->run();
          else
            gloo::allreduce(*opts);
        };

        // Verified run on a fresh pattern.
        if (classic)
          fill_input(out);
        else {
          fill_input(in);
          std::fill(out.begin(), out.end(), 0.0f);
        }
        run_once();
        std::uint64_t wrong = 0;
        for (std::uint64_t i = 0; i < count; ++i)
          if (out[i] != expect[i % 12]) ++wrong;
        scalar = static_cast<double>(wrong);
        sum_scalar.run();
        const bool correct = scalar == 0;
        if (!correct) any_wrong = true;

        if (classic) std::fill(out.begin(), out.end(), 0.0f);
        for (int i = 0; i < o.warmup; ++i) run_once();
        barrier.run();
        auto t0 = clock::now();
        for (int i = 0; i < o.iters; ++i) run_once();
        double local_us = std::chrono::duration<double, std::micro>(clock::now() - t0).count() /
                          std::max(1, o.iters);
        scalar = local_us;
        max_scalar.run();
        const double us = scalar;
        const double used = static_cast<double>(count * sizeof(float));
        const double algbw = us > 0 ? used / (us * 1e-6) / 1e9 : 0;
        const double busbw = algbw * 2.0 * (n - 1) / n;
        if (rank == 0) {
          std::printf("allreduce,%llu,%llu,f32,sum,%s,0,%d,%.3f,%.4f,%.4f,%d\n",
                      static_cast<unsigned long long>(count * sizeof(float)),
                      static_cast<unsigned long long>(count), csv_name(algo).c_str(), n, us, algbw,
                      busbw, correct ? 1 : 0);
          std::fflush(stdout);
        }
        if (!correct && rank == 0)
          std::fprintf(stderr, "inc_gloo_allreduce: %s at %llu bytes: %.0f wrong elements\n",
                       algo.c_str(), static_cast<unsigned long long>(bytes),
                       static_cast<double>(wrong));
      }
      auto next = static_cast<std::uint64_t>(std::llround(static_cast<double>(bytes) * o.factor));
      bytes = next > bytes ? next : bytes + 1;
    }
  }
  barrier.run();
  return any_wrong ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&]() -> const char* {
      if (i + 1 >= argc) usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "-n")
      o.ranks = static_cast<int>(parse_long(val(), 1, 1024));
    else if (a == "-a") {
      o.algos.clear();
      std::string s = val();
      std::size_t start = 0;
      while (true) {
        auto c = s.find(',', start);
        std::string name = s.substr(start, c - start);
        if (csv_name(name).empty()) usage("unknown algorithm '" + name + "'");
        o.algos.push_back(name);
        if (c == std::string::npos) break;
        start = c + 1;
      }
    } else if (a == "-b")
      o.min_b = parse_bytes(val());
    else if (a == "-e")
      o.max_b = parse_bytes(val());
    else if (a == "-f") {
      o.factor = std::strtod(val(), nullptr);
      if (!(o.factor > 1)) usage("-f must be > 1");
    } else if (a == "-i")
      o.iters = static_cast<int>(parse_long(val(), 1, 1000000));
    else if (a == "-w")
      o.warmup = static_cast<int>(parse_long(val(), 0, 1000000));
    else if (a == "--timeout")
      o.timeout_s = static_cast<int>(parse_long(val(), 1, 86400));
    else if (a == "--no-header")
      o.header = false;
    else
      usage("unknown option " + a);
  }
  if (o.max_b < o.min_b) usage("-e is smaller than -b");

  char tmpl[] = "/tmp/inc-gloo-store.XXXXXX";
  if (!mkdtemp(tmpl)) {
    std::perror("mkdtemp");
    return 1;
  }
  const std::string dir = tmpl;
  std::fflush(stdout);

  std::vector<pid_t> pids;
  for (int r = 0; r < o.ranks; ++r) {
    pid_t p = fork();
    if (p < 0) {
      std::perror("fork");
      for (pid_t q : pids) kill(q, SIGKILL);
      return 1;
    }
    if (p == 0) {
      int rc = 1;
      try {
        rc = run_rank(o, r, dir);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "inc_gloo_allreduce: rank %d: %s\n", r, e.what());
      }
      std::fflush(stdout);
      _exit(rc);
    }
    pids.push_back(p);
  }

  // Wait for every rank; if one fails, stop the others (they would block until the timeout).
  int failed = 0;
  std::size_t alive = pids.size();
  while (alive > 0) {
    int st = 0;
    pid_t p = wait(&st);
    if (p < 0) break;
    --alive;
    bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    if (!ok && !failed) {
      failed = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      std::fprintf(stderr, "inc_gloo_allreduce: a rank failed (status %d); stopping the others\n",
                   failed);
      for (pid_t q : pids)
        if (q != p) kill(q, SIGTERM);
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return failed;
}
