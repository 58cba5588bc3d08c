// `inc launch`: start a rendezvous store and N local ranks of a program (see
// src/api/launcher.hpp for the behaviour, docs/USAGE.md for the user's view). Options are
// read with CLI11, like the other subcommands.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <fcntl.h>
#include <cerrno>
#include <cstring>

#include <climits>
#include <cstdlib>

#include "api/launcher.hpp"
#include "inc/types.hpp"
#include "src/proto/auth.hpp"
#include "src/proto/packet.hpp"
#include "src/switch/lanes.hpp"
#include "src/switch/topology.hpp"
#include "src/switch/udp.hpp"
#include "tools/commands.hpp"

namespace inc::tools {

namespace {

constexpr const char* kUsage =
    "usage: inc launch -n N [options] [--] program [args...]\n"
    "\n"
    "Starts a rendezvous store in this process and N ranks of `program` on this machine, each\n"
    "with INC_RANK, INC_WORLD_SIZE, INC_LOCAL_RANK, INC_LOCAL_SIZE, INC_STORE=127.0.0.1:<port>\n"
    "and INC_STORE_HOST=0. Output lines are forwarded with a \"[rank] \" prefix. If a rank fails\n"
    "(non-zero exit or signal) the others are stopped (SIGTERM, then SIGKILL after the grace\n"
    "period) and inc launch exits non-zero. SIGINT/SIGTERM are forwarded to the ranks.\n"
    "\n"
    "options:\n"
    "  -n, --np N          number of ranks (1..4096)\n"
    "  --timeout S         stop the job after S seconds (default: no limit); exit code 124\n"
    "  --store-port P      port of the store (default: an ephemeral port)\n"
    "  --grace S           seconds between SIGTERM and SIGKILL when stopping (default 3)\n"
    "  --no-prefix         forward output lines without the \"[rank] \" prefix\n"
    "  --switch            also start a Core-INC switch (`inc switch`) on free loopback UDP\n"
    "                      ports with the job admitted; ranks get INC_SWITCH and INC_SWITCH_JOB\n"
    "  --switch-lanes L    data-plane lanes (threads) of that switch (default: the CPUs this\n"
    "                      process may run on)\n"
    "  --switch-slots S    aggregation slots the job gets on each lane (default: enough for a\n"
    "                      10 Gb/s x 1 ms bandwidth-delay product over all lanes: 153 chunks of\n"
    "                      8 KiB, i.e. ceil(153 / L) per lane; the workers' congestion window\n"
    "                      decides how many are in flight)\n"
    "  --switch-slot-elements E  4-byte elements per slot = per packet (default 2048: 8 KiB,\n"
    "                      one datagram without IP fragmentation at MTU 9000)\n"
    "  --topology FILE     start every switch of a topology file (a tree); ranks get\n"
    "                      INC_TOPOLOGY and INC_SWITCH_JOB (the file's job with N ranks, or\n"
    "                      --switch-job)\n"
    "  --switch-job ID     job id to use from the topology file\n"
    "  --controller ADDR   every communicator asks `inc controller` at ADDR for its tree; ranks\n"
    "                      get INC_CONTROLLER and INC_CONTROL_KEY_FILE (docs/CONTROLLER.md)\n"
    "  --control-key-file F  the cluster's control secret (default: $INC_CONTROL_KEY_FILE)\n"
    "  --switch-args 'A'   appended to every switch's command line, split at spaces, e.g.\n"
    "                      --switch-args='--stats --fault-loss 0.05' (repeatable)\n"
    "  --edge              also start this host's Edge-INC engine (`inc edge`) on a private\n"
    "                      socket; ranks get INC_OFFLOAD=edge, INC_EDGE and a fresh INC_EDGE_TOKEN\n"
    "  -h, --help          this text\n"
    "\n"
    "exit code: 0 if every rank exited 0; else the failing rank's exit code, 128+signal if it\n"
    "was killed, 124 on --timeout, 127 if the program cannot be executed, 2 for usage errors,\n"
    "1 if the launcher itself fails (e.g. the store port is taken).\n";

struct UsageError {
  std::string message;
};

std::string self_exe() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw Error(Error::Kind::internal, "cannot find the inc executable (/proc/self/exe)");
  return std::string(buf, static_cast<std::size_t>(n));
}

// A UDP port free on loopback right now (the switch binds it a moment later).
int free_udp_port() {
  int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (fd >= 0) ::close(fd);
    throw Error(Error::Kind::network, "cannot find a free UDP port for the switch");
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

// The job's window at the switch by default: a 10 Gb/s x 1 ms bandwidth-delay product (a
// loopback or namespace round trip through a software switch under load stays below 1 ms), in
// chunks of `slot_elems` 4-byte elements, spread over the lanes.
int default_slots_per_lane(int slot_elems, int lanes) {
  constexpr double kBdpBytes = 10e9 / 8 * 1e-3;
  const int window = static_cast<int>(std::ceil(kBdpBytes / (4.0 * slot_elems)));
  return std::max(4, (window + lanes - 1) / lanes);
}

// L consecutive UDP ports free on loopback right now (the switch binds them a moment later).
int free_udp_ports(int lanes) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int base = free_udp_port();
    if (base + lanes - 1 > 65535) continue;
    bool ok = true;
    for (int l = 1; l < lanes && ok; ++l) {
      int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(static_cast<std::uint16_t>(base + l));
      ok = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
      if (fd >= 0) ::close(fd);
    }
    if (ok) return base;
  }
  throw Error(Error::Kind::network, fmt::format("cannot find {} consecutive free UDP ports for the switch", lanes));
}

// A fresh key for the job in a private directory (0700, file 0600), removed when the launch
// ends: the switches get --key-file, the ranks INC_KEY_FILE, and every packet is authenticated.
struct KeyDir {
  std::string dir, file;
  KeyDir(const KeyDir&) = delete;
  KeyDir& operator=(const KeyDir&) = delete;
  KeyDir() = default;
  ~KeyDir() {
    if (!file.empty()) ::unlink(file.c_str());
    if (!dir.empty()) ::rmdir(dir.c_str());
  }
  void create(long long job) {
    std::string tmpl = (std::getenv("TMPDIR") ? std::string(std::getenv("TMPDIR")) : std::string("/tmp")) +
                       "/inc-launch-XXXXXX";
    if (!::mkdtemp(tmpl.data())) throw Error(Error::Kind::config, fmt::format("mkdtemp {}: {}", tmpl, std::strerror(errno)));
    dir = tmpl;
    file = dir + "/keys";
    std::string err;
    if (!proto::auth::write_key_file(file, std::uint32_t(job), proto::auth::random_key(), err))
      throw Error(Error::Kind::config, "cannot write the job's key: " + err);
  }
};

// Sidecars and rank environment for --switch / --topology.
void add_switches(api::LaunchOptions& o, int n, bool single, int lanes, int slots, int slot_elems,
                  const std::string& topo_path, long long job_id, KeyDir& keys) {
  const std::string exe = self_exe();
  if (single) {
    if (lanes <= 0) lanes = sw::default_lanes();
    if (slots <= 0) slots = default_slots_per_lane(slot_elems, lanes);
    if (static_cast<long long>(slots) * lanes > (1 << 20))
      throw UsageError{fmt::format("--switch-slots {} x {} lanes exceeds the switch's pool limit of {} slots",
                                   slots, lanes, 1 << 20)};
    int port = free_udp_ports(lanes);
    api::SidecarSpec sc;
    sc.name = "switch";
    sc.argv = {exe, "switch", "--bind", fmt::format("127.0.0.1:{}", port), "--lanes", std::to_string(lanes),
               "--slots", std::to_string(slots * lanes), "--job", fmt::format("1:{}:{}", n, slots),
               "--slot-elements", std::to_string(slot_elems)};
    keys.create(1);
    sc.argv.insert(sc.argv.end(), {"--key-file", keys.file});
    o.sidecars.push_back(std::move(sc));
    o.env.emplace_back("INC_SWITCH", fmt::format("127.0.0.1:{}", port));
    o.env.emplace_back("INC_SWITCH_JOB", "1");
    o.env.emplace_back("INC_KEY_FILE", keys.file);
    return;
  }
  std::string err;
  auto topo = sw::load_topology(topo_path, err);
  if (!topo) throw UsageError{fmt::format("--topology {}: {}", topo_path, err)};
  const sw::TopoJob* job = nullptr;
  for (const auto& j : topo->jobs)
    if (job_id > 0 ? j.id == job_id : static_cast<int>(j.nranks) == n) {
      job = &j;
      break;
    }
  if (!job)
    throw UsageError{job_id > 0 ? fmt::format("--topology {}: no 'job {}' line", topo_path, job_id)
                                : fmt::format("--topology {}: no job line attaches {} ranks", topo_path, n)};
  if (static_cast<int>(job->nranks) != n)
    throw UsageError{fmt::format("--topology {}: job {} attaches {} ranks, not -n {}", topo_path,
                                 job->id, job->nranks, n)};
  char abs[PATH_MAX];
  std::string path = ::realpath(topo_path.c_str(), abs) ? std::string(abs) : topo_path;
  auto plan = sw::plan_job(*topo, *job, err);
  if (!plan) throw UsageError{fmt::format("--topology {}: {}", topo_path, err)};
  keys.create(job->id);
  for (const auto& s : topo->switches) {
    api::SidecarSpec sc;
    sc.name = s.name;
    sc.argv = {exe, "switch", "--topology", path, "--name", s.name};
    if (plan->specs.count(s.name)) sc.argv.insert(sc.argv.end(), {"--key-file", keys.file});
    o.sidecars.push_back(std::move(sc));
  }
  o.env.emplace_back("INC_TOPOLOGY", path);
  o.env.emplace_back("INC_SWITCH_JOB", std::to_string(job->id));
  o.env.emplace_back("INC_KEY_FILE", keys.file);
}

// --edge: one engine for this host (all ranks run here), its socket in a private directory.
struct EdgeDir {
  std::string dir, sock;
  EdgeDir() = default;
  EdgeDir(const EdgeDir&) = delete;
  EdgeDir& operator=(const EdgeDir&) = delete;
  ~EdgeDir() {
    if (!sock.empty()) ::unlink(sock.c_str());
    if (!dir.empty()) ::rmdir(dir.c_str());
  }
};

void add_edge(api::LaunchOptions& o, EdgeDir& d) {
  std::string tmpl = (std::getenv("TMPDIR") ? std::string(std::getenv("TMPDIR")) : std::string("/tmp")) +
                     "/inc-edge-XXXXXX";
  if (!::mkdtemp(tmpl.data())) throw Error(Error::Kind::config, fmt::format("mkdtemp {}: {}", tmpl, std::strerror(errno)));
  d.dir = tmpl;
  d.sock = d.dir + "/edge.sock";
  api::SidecarSpec sc;
  sc.name = "edge";
  sc.argv = {self_exe(), "edge", "--socket", d.sock};
  const std::string path = d.sock;
  sc.ready_probe = [path](pid_t) { return ::access(path.c_str(), F_OK) == 0; };
  o.sidecars.push_back(std::move(sc));
  auto key = proto::auth::random_key();
  std::string token;
  for (auto b : key) token += fmt::format("{:02x}", static_cast<unsigned>(b));
  o.env.emplace_back("INC_OFFLOAD", "edge");
  o.env.emplace_back("INC_EDGE", d.sock);
  o.env.emplace_back("INC_EDGE_TOKEN", token);
}

long long parse_int_arg(std::string_view flag, std::string_view v, long long lo, long long hi) {
  long long x = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (v.empty() || ec != std::errc() || p != v.data() + v.size() || x < lo || x > hi)
    throw UsageError{fmt::format("{} '{}': expected an integer in {}..{}", flag, v, lo, hi)};
  return x;
}

std::chrono::milliseconds parse_seconds_arg(std::string_view flag, std::string_view v) {
  double s = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), s);
  if (v.empty() || ec != std::errc() || p != v.data() + v.size() || !std::isfinite(s) || s < 0 ||
      s > 1e7)
    throw UsageError{fmt::format("{} '{}': expected a number of seconds >= 0", flag, v)};
  return std::chrono::milliseconds(static_cast<long long>(std::llround(s * 1000)));
}

}  // namespace

int cmd_launch(int argc, char** argv) {
  KeyDir keys;  // outlives the ranks and switches
  EdgeDir edge_dir;
  api::LaunchOptions o;
  o.forward_signals = true;
  int n = -1;
  bool with_switch = false;
  bool with_edge = false;
  int switch_lanes = 0;   // 0: the CPUs available
  int switch_slots = 0;   // 0: default_slots_per_lane
  int slot_elems = 2048;
  bool switch_flags = false;  // --switch-lanes/--switch-slots/--switch-slot-elements given
  std::string topology, controller, control_key_file;
  long long switch_job = 0;
  try {
    // CLI11 reads the options; the first argument that is not one (or whatever follows "--")
    // starts the program and its arguments. Values are text, checked below with messages that
    // name the flag, the value and the accepted range. The usage text stays hand-written.
    CLI::App app{"", "inc launch"};
    app.set_help_flag();
    app.prefix_command();
    bool help = false, no_prefix = false;
    std::string np, timeout, grace, store_port, lanes_s, slots_s, elems_s, job_s;
    std::vector<std::string> switch_args;
    app.add_flag("-h,--help", help)->disable_flag_override();
    app.add_option("-n,--np", np);
    app.add_option("--timeout", timeout);
    app.add_option("--grace", grace);
    app.add_option("--store-port", store_port);
    app.add_flag("--no-prefix", no_prefix)->disable_flag_override();
    app.add_flag("--edge", with_edge)->disable_flag_override();
    app.add_flag("--switch", with_switch)->disable_flag_override();
    app.add_option("--switch-lanes", lanes_s);
    app.add_option("--switch-slots", slots_s);
    app.add_option("--switch-slot-elements", elems_s);
    app.add_option("--topology", topology);
    app.add_option("--switch-job", job_s);
    app.add_option("--controller", controller);
    app.add_option("--control-key-file", control_key_file);
    app.add_option("--switch-args", switch_args)->expected(1)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      throw UsageError{e.what()};
    }
    if (help) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    std::vector<std::string> rest = app.remaining();
    if (!rest.empty() && rest.front() == "--") rest.erase(rest.begin());
    else if (!rest.empty() && rest.front().size() > 1 && rest.front()[0] == '-')
      throw UsageError{fmt::format("unknown option '{}'", rest.front())};
    auto given = [&](const char* f) { return app.count(f) > 0; };
    if (given("--np")) n = static_cast<int>(parse_int_arg("-n", np, 1, 4096));
    if (given("--timeout")) o.timeout = parse_seconds_arg("--timeout", timeout);
    if (given("--grace")) o.grace = parse_seconds_arg("--grace", grace);
    if (given("--store-port")) o.store_port = static_cast<int>(parse_int_arg("--store-port", store_port, 0, 65535));
    if (no_prefix) o.prefix_output = false;
    if (given("--switch-lanes"))
      switch_lanes = static_cast<int>(parse_int_arg("--switch-lanes", lanes_s, 1, proto::kMaxLanes));
    if (given("--switch-slots")) switch_slots = static_cast<int>(parse_int_arg("--switch-slots", slots_s, 1, 0xFFFF));
    if (given("--switch-slot-elements"))
      slot_elems = static_cast<int>(parse_int_arg("--switch-slot-elements", elems_s, 1, 16358));
    switch_flags = given("--switch-lanes") || given("--switch-slots") || given("--switch-slot-elements");
    if (given("--switch-job")) switch_job = parse_int_arg("--switch-job", job_s, 1, 0xffffffffll);
    if (given("--topology") && topology.empty()) throw UsageError{"--topology needs a file"};
    if (n < 0) throw UsageError{"-n N is required"};
    if (rest.empty()) throw UsageError{"no program given"};
    o.argv = std::move(rest);
    if (with_switch && !topology.empty()) throw UsageError{"--switch and --topology exclude each other"};
    if (switch_job > 0 && topology.empty()) throw UsageError{"--switch-job goes with --topology"};
    if (!with_switch && switch_flags)
      throw UsageError{"--switch-lanes/--switch-slots/--switch-slot-elements go with --switch"};
    if (with_switch && n > static_cast<int>(proto::kMaxMembers))
      throw UsageError{fmt::format("--switch: one switch aggregates at most {} members; use "
                                   "--topology with a tree of switches for -n {}",
                                   proto::kMaxMembers, n)};
    if (!controller.empty()) {
      if (with_switch || !topology.empty()) throw UsageError{"--controller excludes --switch and --topology"};
      auto ep = sw::parse_endpoint(controller);
      if (!ep || ep->port() == 0) throw UsageError{fmt::format("--controller '{}' is not an IPv4 ADDR:PORT", controller)};
      if (control_key_file.empty())
        if (const char* k = std::getenv("INC_CONTROL_KEY_FILE")) control_key_file = k;
      if (control_key_file.empty())
        throw UsageError{"--controller needs --control-key-file (or INC_CONTROL_KEY_FILE)"};
      o.env.emplace_back("INC_CONTROLLER", controller);
      o.env.emplace_back("INC_CONTROL_KEY_FILE", control_key_file);
    } else if (!control_key_file.empty()) {
      throw UsageError{"--control-key-file goes with --controller"};
    }
    if (!with_switch && topology.empty() && !switch_args.empty())
      throw UsageError{"--switch-args goes with --switch or --topology"};
    if (with_switch || !topology.empty())
      add_switches(o, n, with_switch, switch_lanes, switch_slots, slot_elems, topology, switch_job, keys);
    for (auto& sc : o.sidecars)
      for (const auto& a : switch_args) {
        std::size_t i = 0;
        while (i < a.size()) {
          std::size_t j = a.find(' ', i);
          if (j == std::string::npos) j = a.size();
          if (j > i) sc.argv.push_back(a.substr(i, j - i));
          i = j + 1;
        }
      }
  } catch (const UsageError& e) {
    std::fprintf(stderr, "inc launch: %s\n\n%s", e.message.c_str(), kUsage);
    return 2;
  }
  o.world_size = n;
  try {
    if (with_edge) add_edge(o, edge_dir);
    auto r = api::launch_ranks(o);
    return r.exit_code;
  } catch (const Error& e) {
    std::fprintf(stderr, "inc launch: %s\n", e.what());
    return 1;
  }
}

}  // namespace inc::tools
