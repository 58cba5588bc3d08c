// Shared by switch_bench's modes (switch_bench.cpp: data plane, lanes, keyed, auth;
// switch_bench_udp.cpp: UDP loopback against raw UDP): options, clocks, medians, JSON rows.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace inc_switch_bench {

struct Args {
  std::string mode = "all";
  int members = 8, runs = 5, workers = 4, slots = 64;
  double seconds = 0.3;
  std::uint64_t count = 1 << 20;
  std::vector<std::uint32_t> elems = {64, 256, 1024, 4096};
  std::vector<std::uint16_t> lanes = {1, 2};
  std::string offload = "both";  // on | off | both
  // UDP: off (unkeyed job), on (keyed: authenticated packets), both (keyed and unkeyed rounds
  // alternated in one run, ratios per round); dataplane: on/both add the keyed comparison.
  std::string auth = "off";
  int batch = 64;                // datagrams per recvmmsg at the switch, workers and echo
  std::vector<std::string> gmac;  // auth, keyed: the GMAC implementations to compare (empty: all)
  std::string json;
};

// CPU time of the calling thread: per-core figures that hold on a shared, loaded machine.
double cpu_s();
double now_s();
double median(std::vector<double> v);
// One JSON object for --json (written at exit).
void emit_json(const std::string& obj);

// switch_bench udp (switch_bench_udp.cpp).
void bench_udp(const Args& a);

}  // namespace inc_switch_bench
