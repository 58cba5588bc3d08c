// Multi-process test of communicators whose trees come from `inc controller`
// (tests/scripts/controller.sh starts the controller and the switches, then runs this under
// `inc launch` with INC_CONTROLLER set). Usage: mp_controller GROUPS [ITERS] [COUNT]
// The world, a split into GROUPS groups (rank % GROUPS) and a dup of each group run i32
// allreduces through the network; every result is checked against a reference computed here,
// every report must say it ran in the network on a tree from the controller. GROUPS 0: the
// world only. Prints
// "created ... us" lines (communicator creation times) and "job throughput ..." for the
// benchmark scripts. MP_CONTROLLER_HOLD=FILE: hold the world's tree until FILE exists;
// MP_CONTROLLER_UNTIL=FILE: stop iterating once FILE exists (ITERS is then a bound).
// MP_CONTROLLER_EXPECT_HOSTS: the host path is expected; MP_CONTROLLER_EXPECT_ANY: either.
// Exit code 0 only if everything was exact and in the network.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <thread>
#include <string>
#include <vector>

#include "inc/inc.hpp"

using namespace inc;
using Clock = std::chrono::steady_clock;

namespace {

std::int32_t val(int r, std::uint64_t i, int it) {
  return static_cast<std::int32_t>((i * 2654435761u + static_cast<std::uint64_t>(r) * 40503u + it) % 20001) - 10000;
}

int failures = 0;

void check(Communicator& c, const std::vector<int>& world_ranks, const char* what, int iters, std::uint64_t n,
           bool want_network) {
  std::vector<std::int32_t> in(n), out(n);
  const auto t0 = Clock::now();
  const char* until = std::getenv("MP_CONTROLLER_UNTIL");
  int done = 0;
  for (int it = 0; it < iters; ++it) {
    if (until && it % 10 == 0) {  // stop once FILE exists (rank 0 looks; all agree)
      std::int32_t seen = c.rank() == 0 && std::ifstream(until) ? 1 : 0, any = 0;
      c.allreduce(&seen, &any, 1, DataType::i32, ReduceOp::max);
      if (any) break;
    }
    ++done;
    for (std::uint64_t i = 0; i < n; ++i) in[i] = val(world_ranks[static_cast<std::size_t>(c.rank())], i, it);
    c.allreduce(in.data(), out.data(), n, DataType::i32, ReduceOp::sum);
    auto rep = c.last_report();
    if (rep.in_network != want_network && !std::getenv("MP_CONTROLLER_EXPECT_ANY")) {
      std::fprintf(stderr, "FAIL %s: in_network=%d: %s\n", what, int(rep.in_network), rep.reason.c_str());
      ++failures;
      return;
    }
    if (it == 0 && c.rank() == 0) std::printf("%s: %s\n", what, rep.reason.c_str());
    std::uint64_t wrong = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
      std::int32_t s = 0;
      for (int r : world_ranks) s = static_cast<std::int32_t>(static_cast<std::uint32_t>(s) + static_cast<std::uint32_t>(val(r, i, it)));
      wrong += out[i] != s;
    }
    if (wrong) {
      std::fprintf(stderr, "FAIL %s: %llu of %llu elements wrong (iteration %d)\n", what,
                   static_cast<unsigned long long>(wrong), static_cast<unsigned long long>(n), it);
      ++failures;
      return;
    }
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (c.rank() == 0)
    std::printf("job throughput %s: %d x %llu i32 in %.3f s = %.1f MB/s\n", what, done,
                static_cast<unsigned long long>(n), s, done * n * 4 / s / 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  const int groups = argc > 1 ? std::atoi(argv[1]) : 2;
  const int iters = argc > 2 ? std::atoi(argv[2]) : 3;
  const std::uint64_t count = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 100003;
  const bool want_network = !std::getenv("MP_CONTROLLER_EXPECT_HOSTS");
  try {
    auto t0 = Clock::now();
    Communicator world = Communicator::init();
    const double t_world = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    const int p = world.size(), rank = world.rank();
    std::vector<int> all;
    for (int r = 0; r < p; ++r) all.push_back(r);
    if (const char* hold = std::getenv("MP_CONTROLLER_HOLD")) {
      // Hold the tree until the script creates this file (60 s bound), then run together with
      // the other jobs it started (concurrent jobs, fairness).
      for (int i = 0; i < 600 && rank == 0 && !std::ifstream(hold); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      world.barrier();
    }
    check(world, all, "world", iters, count, want_network);
    if (groups == 0) {
      world.barrier();
      if (rank == 0) std::printf("created world %.0f us\n", t_world);
      if (failures) return 1;
      std::printf("mp_controller: all exact\n");
      return 0;
    }
    t0 = Clock::now();
    Communicator sub = world.split(rank % groups, rank);
    const double t_split = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    std::vector<int> mine;
    for (int r = rank % groups; r < p; r += groups) mine.push_back(r);
    const std::string name = "group " + std::to_string(rank % groups) + " of " + std::to_string(groups);
    check(sub, mine, name.c_str(), iters, count, want_network && mine.size() > 1);
    t0 = Clock::now();
    Communicator twin = sub.dup();
    const double t_dup = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    check(twin, mine, (name + " (dup)").c_str(), iters, count, want_network && mine.size() > 1);
    if (rank == 0)
      std::printf("created world %.0f us, split into %d %.0f us, dup %.0f us\n", t_world, groups, t_split, t_dup);
    world.barrier();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "FAIL: %s\n", e.what());
    return 1;
  }
  if (failures) return 1;
  std::printf("mp_controller: all exact\n");
  return 0;
}
