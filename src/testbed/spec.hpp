// `inc testbed`: what the user asks for (docs/TESTBED.md). A `SpecInput` holds what a topology
// file and the command line said (unset = default); `build_spec` checks it and derives the
// complete `Spec`: hosts per leaf, link and uplink rates, queue and burst sizes, slot size.
// Every error names where the value came from: "tb.toml:7: key 'link': ..." or "--link: ...".
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace inc::testbed {

enum class Shaper { tbf, htb };
const char* name(Shaper s);

inline constexpr std::string_view kDefaultTcpCc = "reno";  // --tcp-cc; "inherit" keeps the machine's

// A size that is given as bytes, as time at the link's rate, or chosen by the testbed.
struct Amount {
  enum class Kind { automatic, bytes, time } kind = Kind::automatic;
  std::uint64_t bytes = 0;
  double seconds = 0;
};

// "1gbit", "500mbit", "2.5gbit", "100kbit", "1gbit/s", "none" (0 = unshaped). Bits per second,
// SI multiples as tc uses them. Throws inc::Error(config) with the reason.
std::uint64_t parse_rate(std::string_view s);
// "1 Gbit/s", "500 Mbit/s", "unshaped".
std::string format_rate(std::uint64_t bps);
// "auto", "4ms", "250us", "1s", "512KiB", "64k", "100000" (bytes). Throws inc::Error(config).
Amount parse_amount(std::string_view s);
std::string format_bytes(std::uint64_t bytes);  // "488 KiB", "9014 B"

// One leaf switch (or the single switch of a one-level testbed) and its hosts.
struct LeafSpec {
  int hosts = 0;
  std::uint64_t link_bps = 0;    // each host's link, both directions; 0 = unshaped
  std::uint64_t uplink_bps = 0;  // the leaf's uplink to the spine (two levels); 0 = unshaped
};

struct Spec {
  std::vector<LeafSpec> leaves;  // one entry: one level (hosts and the switch on one bridge)
  int ranks_per_host = 1;
  Shaper shaper = Shaper::tbf;
  int mtu = 9000;
  Amount queue;  // per shaped direction: bytes the queue holds (tbf limit / bfifo limit)
  Amount burst;  // token bucket size
  bool with_switch = true;
  // The job is keyed (a fresh key per run): every packet authenticated. Off, the switch path
  // runs unauthenticated (measuring the protocol without the MAC work of every emulated host
  // and switch concentrated on this machine's cores).
  bool auth = true;
  // Results every member gets alike go once to a multicast group the ranks join, replicated by
  // the bridge (as an ASIC's replication engine would), instead of once per member from the
  // switch (docs/PROTOCOL.md, "Multicast results"). On by default wherever it is correct (with a
  // switch); in a two-level tree each leaf has its own group, kept off its uplink.
  bool multicast = true;
  // `inc controller` builds the job's trees (docs/CONTROLLER.md): it runs beside the root switch
  // with a fabric derived from the plan, the switches register with it, and every communicator
  // (the world and each split) asks it for a tree and a fresh key.
  bool controller = false;
  int switch_port = 7710;
  int metrics_port = 9100;  // 0: no Prometheus endpoint
  int slot_elements = 0;    // resolved by build_spec (from the MTU unless given)
  bool slot_elements_given = false;
  int job_slots = 32;
  std::vector<std::string> switch_args;  // appended to every `inc switch` command line
  std::string prefix = "inctb";          // namespace names: PREFIX-PID-ROLE
  // TCP congestion control of every host namespace (net.ipv4.tcp_congestion_control, set per
  // namespace); empty = inherit the machine's. Default reno: a loss-based algorithm like Linux's
  // default cubic, whereas a rate-probing one (BBR) reads the token bucket's burst as link
  // bandwidth (docs/TESTBED.md, "TCP in the hosts").
  std::string tcp_cc = std::string(kDefaultTcpCc);

  int hosts() const;
  int world_size() const { return hosts() * ranks_per_host; }
  bool two_level() const { return leaves.size() > 1; }
  std::uint32_t frame_bytes() const { return static_cast<std::uint32_t>(mtu) + 14; }  // + Ethernet
  // The queue and burst of a direction shaped at `bps` (0 if unshaped).
  std::uint64_t queue_bytes(std::uint64_t bps) const;
  std::uint64_t burst_bytes(std::uint64_t bps) const;
};

// Defaults when nothing else is said (documented in docs/TESTBED.md).
inline constexpr std::string_view kDefaultLink = "1gbit";
inline constexpr double kAutoQueueSeconds = 0.004;   // queue: 4 ms at the link rate ...
inline constexpr std::uint32_t kAutoQueueFrames = 32;  // ... but at least 32 full frames
inline constexpr double kAutoBurstSeconds = 0.001;  // burst: 1 ms at the link rate ...
// ... but at least one GSO super-packet (veth hands tc up to 64 KiB at once) plus a frame: a
// smaller tbf bucket splits every such packet in software and the link falls far short of its
// rate (measured: 16 MiB ring allreduce, 8 hosts at 1 Gbit/s, 770 ms with a 62.5 KB bucket,
// 240 ms with 128 KiB, theory 235 ms).
inline constexpr std::uint32_t kMaxGsoBytes = 65536;
inline constexpr int kMaxHosts = 256;
inline constexpr int kMaxRanksPerHost = 64;
inline constexpr int kMaxLeaves = 64;
inline constexpr int kUdpIpHeaderBytes = 28;
inline constexpr int kSwitchHeaderBytes = 32 + 40;  // proto::kHeaderBytes + the auth trailer

// Largest power-of-two number of 4-byte elements whose datagram (IP + UDP + switch header +
// payload) fits the MTU, at most the protocol's limit.
int slot_elements_for_mtu(int mtu);

// What a file or the flags said. `where` maps a key to its origin for messages.
struct SpecInput {
  std::optional<int> hosts, ranks_per_host, leaves, mtu, switch_port, metrics_port, slot_elements,
      job_slots;
  std::optional<std::string> link, uplink, shaper, queue, burst, prefix, tcp_cc;
  std::optional<double> oversubscription;
  std::optional<bool> with_switch, auth, multicast, controller;
  std::optional<std::vector<std::string>> switch_args;
  struct Leaf {
    std::optional<int> hosts;
    std::optional<std::string> link, uplink;
    std::string where;  // "tb.toml:12: [[leaf]] #2"
  };
  std::vector<Leaf> leaf_tables;  // [[leaf]] in a file
  std::map<std::string, std::string> where;  // key -> "tb.toml:7: key 'link'" or "--link"

  // Values set in `over` replace those here (flags over a file).
  void merge(const SpecInput& over);
};

// Reads a topology file (TOML, docs/TESTBED.md). Throws inc::Error(config) "file:line: ...".
SpecInput load_spec_file(const std::string& path);
SpecInput parse_spec_text(std::string_view text, const std::string& name);

// Checks everything and derives the Spec. Throws inc::Error(config) naming the origin.
Spec build_spec(const SpecInput& in);

}  // namespace inc::testbed
