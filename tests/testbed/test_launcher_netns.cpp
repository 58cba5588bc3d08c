// The launcher's extensions used by inc testbed: per-rank placement (label, local rank/size,
// variables), removed variables, readiness probes, and (as root) ranks, sidecars and the store
// in network namespaces. Tests that need namespaces skip, saying why, without privileges.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "api/launcher.hpp"
#include "inc/types.hpp"
#include "testbed/system.hpp"
#include "tests/transport/test_util.hpp"

using namespace inc::api;
using inc::testing::Capture;
using std::chrono::milliseconds;

namespace {

struct Job {
  Capture out, err;
  LaunchOptions opts;
  Job(int n, std::string script) {
    opts.world_size = n;
    opts.argv = {"/bin/sh", "-c", std::move(script)};
    opts.stdout_fd = out.fd();
    opts.stderr_fd = err.fd();
  }
  LaunchResult run() { return launch_ranks(opts); }
};

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// A network namespace for one test, removed afterwards (root only).
class Netns {
 public:
  explicit Netns(const std::string& role) : name_(fmt_name(role)) {
    inc::testbed::check_command({"ip", "netns", "add", name_});
    inc::testbed::check_command({"ip", "-n", name_, "link", "set", "lo", "up"});
  }
  ~Netns() { inc::testbed::run_command({"ip", "netns", "del", name_}); }
  std::string path() const { return "/run/netns/" + name_; }
  ino_t inode() const {
    struct stat st {};
    ::stat(path().c_str(), &st);
    return st.st_ino;
  }

 private:
  static std::string fmt_name(const std::string& role) {
    return "inctest-" + std::to_string(::getpid()) + "-" + role;
  }
  std::string name_;
};

#define REQUIRE_NETNS_PRIVILEGES()                                                   \
  do {                                                                               \
    if (auto why = inc::testbed::privilege_problem(); !why.empty())                  \
      GTEST_SKIP() << "SKIPPED: needs network namespaces: " << why;                  \
  } while (0)

}  // namespace

TEST(LauncherPlacement, LabelsLocalRanksAndVariables) {
  Job job(4, "echo local=$INC_LOCAL_RANK/$INC_LOCAL_SIZE color=$COLOR shared=$SHARED gone=${GONE:-unset}");
  ::setenv("GONE", "inherited", 1);
  job.opts.env = {{"SHARED", "job"}, {"COLOR", "none"}};
  job.opts.unset_env = {"GONE"};
  for (int r = 0; r < 4; ++r) {
    RankPlacement p;
    p.label = "h" + std::to_string(r / 2) + " r" + std::to_string(r);
    p.local_rank = r % 2;
    p.local_size = 2;
    p.env = {{"COLOR", r % 2 ? "blue" : "red"}};
    job.opts.placement.push_back(p);
  }
  auto r = job.run();
  ::unsetenv("GONE");
  ASSERT_EQ(r.exit_code, 0) << r.failure << job.err.text();
  const std::string t = job.out.text();
  EXPECT_TRUE(has(t, "[h0 r0] local=0/2 color=red shared=job gone=unset")) << t;
  EXPECT_TRUE(has(t, "[h0 r1] local=1/2 color=blue shared=job gone=unset")) << t;
  EXPECT_TRUE(has(t, "[h1 r2] local=0/2 color=red shared=job gone=unset")) << t;
  EXPECT_TRUE(has(t, "[h1 r3] local=1/2 color=blue shared=job gone=unset")) << t;
}

TEST(LauncherPlacement, BadPlacementsAreConfigErrors) {
  Job job(2, "true");
  job.opts.placement.resize(1);
  EXPECT_THROW(job.run(), inc::Error);
  job.opts.placement.resize(2);
  job.opts.placement[1].local_rank = 2;
  job.opts.placement[1].local_size = 2;
  EXPECT_THROW(job.run(), inc::Error);
  job.opts.placement[1] = RankPlacement{};
  job.opts.placement[1].netns = "/nonexistent/netns";
  try {
    job.run();
    ADD_FAILURE() << "a missing namespace file must fail the launch";
  } catch (const inc::Error& e) {
    EXPECT_TRUE(has(e.what(), "rank 1: cannot open network namespace '/nonexistent/netns'")) << e.what();
  }
}

TEST(LauncherPlacement, ReadyProbeGatesTheRanks) {
  const std::string flag = "/tmp/inc-ready-" + std::to_string(::getpid());
  std::remove(flag.c_str());
  Job job(2, "test -e " + flag + " && echo saw-ready");
  SidecarSpec side;
  side.name = "daemon";
  side.argv = {"/bin/sh", "-c", "sleep 0.2; touch " + flag + "; exec sleep 600"};
  int probes = 0;
  side.ready_probe = [&](pid_t pid) {
    ++probes;
    EXPECT_GT(pid, 0);
    return ::access(flag.c_str(), F_OK) == 0;
  };
  job.opts.sidecars.push_back(side);
  auto r = job.run();
  std::remove(flag.c_str());
  EXPECT_EQ(r.exit_code, 0) << r.failure << job.err.text();
  EXPECT_GT(probes, 1);
  const std::string t = job.out.text();
  EXPECT_TRUE(has(t, "[0] saw-ready") && has(t, "[1] saw-ready")) << t;

  Job never(1, "echo should-not-run");
  SidecarSpec s2;
  s2.name = "daemon";
  s2.argv = {"/bin/sh", "-c", "exec sleep 600"};
  s2.ready_probe = [](pid_t) { return false; };
  s2.ready_timeout = milliseconds(100);
  never.opts.sidecars.push_back(s2);
  auto r2 = never.run();
  EXPECT_NE(r2.exit_code, 0);
  EXPECT_TRUE(has(r2.failure, "daemon was not ready within 100 ms")) << r2.failure;
  EXPECT_FALSE(has(never.out.text(), "should-not-run"));
}

TEST(LauncherPlacement, SignalCaughtBeforeTheLaunchStopsIt) {
  // The caller's handler caught SIGINT while it prepared the job: nothing is started.
  std::atomic<int> pending{SIGINT};
  Job job(2, "echo should-not-run");
  job.opts.forward_signals = true;
  job.opts.pending_signal = &pending;
  auto r = job.run();
  EXPECT_EQ(r.exit_code, 128 + SIGINT) << r.failure;
  EXPECT_EQ(r.interrupted_by, SIGINT);
  EXPECT_TRUE(r.ranks.empty());
  EXPECT_FALSE(has(job.out.text(), "should-not-run"));
  // With a sidecar: nothing is started either.
  Job side_job(1, "echo should-not-run");
  side_job.opts.forward_signals = true;
  side_job.opts.pending_signal = &pending;
  SidecarSpec side;
  side.name = "daemon";
  side.argv = {"/bin/sh", "-c", "exec sleep 600"};
  side_job.opts.sidecars.push_back(side);
  r = side_job.run();
  EXPECT_EQ(r.exit_code, 128 + SIGINT) << r.failure;
  EXPECT_TRUE(r.ranks.empty());
  EXPECT_TRUE(r.sidecars.empty());
  // No signal: the job runs.
  pending = 0;
  Job ok(1, "echo ran");
  ok.opts.forward_signals = true;
  ok.opts.pending_signal = &pending;
  EXPECT_EQ(ok.run().exit_code, 0);
  EXPECT_TRUE(has(ok.out.text(), "[0] ran"));
}

TEST(LauncherNetns, RanksAndSidecarsRunInTheirNamespaces) {
  REQUIRE_NETNS_PRIVILEGES();
  Netns a("a"), b("b");
  Job job(2, "echo ns=$(stat -L -c %i /proc/self/ns/net)");
  job.opts.placement.resize(2);
  job.opts.placement[0].netns = a.path();
  job.opts.placement[1].netns = b.path();
  // The sidecar has printed before the ranks start (else it could be stopped before it prints).
  const std::string flag = "/tmp/inc-side-" + std::to_string(::getpid());
  std::remove(flag.c_str());
  SidecarSpec side;
  side.name = "side";
  side.argv = {"/bin/sh", "-c",
               "echo ns=$(stat -L -c %i /proc/self/ns/net); touch " + flag + "; exec sleep 600"};
  side.netns = b.path();
  side.ready_probe = [&](pid_t) { return ::access(flag.c_str(), F_OK) == 0; };
  job.opts.sidecars.push_back(side);
  auto r = job.run();
  std::remove(flag.c_str());
  ASSERT_EQ(r.exit_code, 0) << r.failure << job.err.text();
  const std::string t = job.out.text();
  EXPECT_TRUE(has(t, "[0] ns=" + std::to_string(a.inode()))) << t;
  EXPECT_TRUE(has(t, "[1] ns=" + std::to_string(b.inode()))) << t;
  EXPECT_TRUE(has(t, "[side] ns=" + std::to_string(b.inode()))) << t;
}

TEST(LauncherNetns, StoreInANamespaceIsReachedFromThere) {
  REQUIRE_NETNS_PRIVILEGES();
  Netns a("store");
  // The store listens on 127.0.0.1 of namespace `a`: only ranks inside `a` can reach it.
  Job job(3, std::string(INC_STORE_PROBE) + " add arrived 1 barrier b get arrived");
  job.opts.store_netns = a.path();
  job.opts.placement.resize(3);
  for (auto& p : job.opts.placement) p.netns = a.path();
  auto r = job.run();
  ASSERT_EQ(r.exit_code, 0) << r.failure << job.err.text();
  EXPECT_TRUE(has(job.out.text(), "[2] get arrived = 3")) << job.out.text();
  // ... and not from the launcher's namespace (a connection is refused there, or another store
  // answers; either way this is not the job's store): the listening socket is not here.
  std::ifstream tcp("/proc/net/tcp");
  std::stringstream ss;
  ss << tcp.rdbuf();
  char port_hex[8];
  std::snprintf(port_hex, sizeof port_hex, ":%04X", r.store_port);
  EXPECT_FALSE(has(ss.str(), std::string("0100007F") + port_hex + " 00000000:0000 0A")) << "listening here";
}

TEST(LauncherNetns, UdpPortProbeSeesTheSidecarsSocket) {
  REQUIRE_NETNS_PRIVILEGES();
  Netns a("udp");
  Job job(1, "grep -qi ':1F3F ' /proc/net/udp && echo port-bound");  // 7999
  job.opts.placement.resize(1);
  job.opts.placement[0].netns = a.path();
  SidecarSpec side;
  side.name = "udp";
  side.argv = {"python3", "-c",
               "import socket, time; time.sleep(0.2); s = socket.socket(socket.AF_INET, "
               "socket.SOCK_DGRAM); s.bind(('127.0.0.1', 7999)); time.sleep(600)"};
  side.netns = a.path();
  side.ready_probe = [path = a.path()](pid_t pid) {
    return inc::testbed::udp_port_bound(pid, path, "127.0.0.1", 7999);
  };
  job.opts.sidecars.push_back(side);
  auto r = job.run();
  ASSERT_EQ(r.exit_code, 0) << r.failure << job.err.text();
  EXPECT_TRUE(has(job.out.text(), "[0] port-bound")) << job.out.text();
}
