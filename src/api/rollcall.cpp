#include "api/rollcall.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "inc/types.hpp"

namespace inc::api {

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct Arrival {
  int rank = -1;
  int world = 0;
  long pid = 0;
  std::string host;
  std::string token;  // random per process: tells processes apart (pids repeat across hosts)

  std::string who() const { return fmt::format("pid {} on {}", pid, host); }
};

const Arrival& this_process() {
  static const Arrival me = [] {
    Arrival a;
    a.pid = static_cast<long>(::getpid());
    char h[256] = {};
    if (::gethostname(h, sizeof h - 1) != 0 || h[0] == '\0') std::snprintf(h, sizeof h, "?");
    for (char* c = h; *c; ++c)
      if (*c == ' ') *c = '_';
    a.host = h;
    std::random_device rd;
    a.token = fmt::format("{:08x}{:08x}", rd(), rd());
    return a;
  }();
  return me;
}

std::string encode(const Arrival& a) {
  return fmt::format("{} {} {} {} {}", a.rank, a.world, a.pid, a.host, a.token);
}

std::optional<Arrival> decode(const std::string& s) {
  std::istringstream in(s);
  Arrival a;
  if (!(in >> a.rank >> a.world >> a.pid >> a.host >> a.token)) return std::nullopt;
  return a;
}

std::string key(std::int64_t generation, const std::string& what) {
  return fmt::format("inc/{}/roll/{}", generation, what);
}

std::string missing_ranks(const std::vector<Arrival>& seen, int world) {
  std::vector<char> here(static_cast<std::size_t>(world), 0);
  for (const auto& a : seen)
    if (a.rank >= 0 && a.rank < world) here[static_cast<std::size_t>(a.rank)] = 1;
  std::string out;
  int listed = 0;
  for (int r = 0; r < world; ++r)
    if (!here[static_cast<std::size_t>(r)]) {
      if (++listed > 16) return out + ", ...";
      out += (out.empty() ? "" : ", ") + std::to_string(r);
    }
  return out;
}

[[noreturn]] void conflict(transport::StoreClient& store, std::int64_t generation, std::string msg) {
  // Every rank of this generation (and of the one the duplicate is in) stops with it.
  store.set_if_absent(key(generation, "conflict"), msg);
  throw Error(Error::Kind::config, std::move(msg));
}

// This rank already arrived in the previous generation from another process, and that
// generation is still incomplete: two processes were given this rank.
void check_previous(transport::StoreClient& store, std::int64_t generation, const Arrival& me) {
  if (generation == 0) return;
  const std::int64_t prev = generation - 1;
  auto n = store.try_get(key(prev, "n"));
  if (!n) return;
  const std::int64_t count = std::strtoll(n->c_str(), nullptr, 10);
  // Complete (the usual case: this rank's previous program finished its start-up): done,
  // without reading every arrival.
  auto first = store.try_get(key(prev, "0"));
  auto a0 = first ? decode(*first) : std::nullopt;
  if (a0 && count >= a0->world) return;
  std::vector<Arrival> seen;
  std::optional<Arrival> twin;
  for (std::int64_t i = 0; i < count && i < 65536; ++i) {
    auto v = store.try_get(key(prev, std::to_string(i)));
    auto a = v ? decode(*v) : std::nullopt;
    if (!a) continue;
    if (a->rank == me.rank && a->token != me.token) twin = a;
    seen.push_back(*a);
  }
  if (!twin || seen.empty() || static_cast<int>(seen.size()) >= seen.front().world) return;
  std::string msg = fmt::format(
      "rank {} is claimed by two processes: {} and {}; the job's start-up is still waiting for "
      "rank(s) {}. Each process needs its own rank: check the launcher's rank variables "
      "(INC_RANK, OMPI_COMM_WORLD_RANK, PMI_RANK, RANK, SLURM_PROCID) or Options::rank",
      me.rank, twin->who(), me.who(), missing_ranks(seen, seen.front().world));
  store.set_if_absent(key(prev, "conflict"), msg);
  conflict(store, generation, msg);
}

}  // namespace

void roll_call(transport::StoreClient& store, std::int64_t generation, int rank, int world,
               milliseconds timeout) {
  Arrival me = this_process();
  me.rank = rank;
  me.world = world;
  const std::int64_t index = store.add(key(generation, "n"), 1) - 1;
  store.set(key(generation, std::to_string(index)), encode(me));
  const auto deadline = Clock::now() + timeout;
  std::vector<Arrival> seen;
  while (static_cast<int>(seen.size()) < world) {
    auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    std::optional<std::string> v;
    if (left.count() > 0) {
      try {
        v = store.get(key(generation, std::to_string(seen.size())),
                      std::min(left, milliseconds(200)));
      } catch (const Error& e) {
        if (e.kind() != Error::Kind::timeout) throw;
      }
    }
    if (v) {
      auto a = decode(*v);
      if (!a) throw Error(Error::Kind::internal, fmt::format("start-up: bad roll-call entry '{}'", *v));
      if (a->world != world)
        conflict(store, generation,
                 fmt::format("ranks disagree on the world size: rank {} ({}) says the job has {} "
                             "ranks, rank {} ({}) says {}; every process must be started with the "
                             "same world size (INC_WORLD_SIZE, OMPI_COMM_WORLD_SIZE, PMI_SIZE, "
                             "WORLD_SIZE, SLURM_NTASKS or Options::world_size)",
                             a->rank, a->who(), a->world, me.rank, me.who(), world));
      seen.push_back(*a);
      continue;
    }
    if (auto c = store.try_get(key(generation, "conflict"))) throw Error(Error::Kind::config, *c);
    check_previous(store, generation, me);
    if (Clock::now() >= deadline)
      throw Error(Error::Kind::timeout,
                  fmt::format("rank {}: start-up: only {} of {} ranks arrived within {} ms "
                              "(missing: rank(s) {})",
                              rank, seen.size(), world, timeout.count(), missing_ranks(seen, world)));
  }
}

}  // namespace inc::api
