// `inc switch` as a real process: flag validation, serving, SIGTERM shutdown with --stats; and
// the option parser and topology files in-process.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "src/switch/daemon.hpp"
#include "src/switch/topology.hpp"
#include "src/switch/udp.hpp"
#include "tests/switch/sim_util.hpp"

namespace inc::sw {
namespace {

using namespace inc::sw::testing;

struct Proc {
  pid_t pid = -1;
  int err_fd = -1;
  std::string err;
  // Reads stderr until `needle` shows up or the stream ends.
  bool read_until(const std::string& needle) {
    char buf[4096];
    while (err.find(needle) == std::string::npos) {
      ssize_t n = ::read(err_fd, buf, sizeof buf);
      if (n <= 0) return false;
      err.append(buf, std::size_t(n));
    }
    return true;
  }
  int wait() {
    char buf[4096];
    ssize_t n;
    while ((n = ::read(err_fd, buf, sizeof buf)) > 0) err.append(buf, std::size_t(n));
    int st = 0;
    ::waitpid(pid, &st, 0);
    ::close(err_fd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
};

Proc spawn(std::vector<std::string> args) {
  args.insert(args.begin(), INC_SWITCH_CLI);
  int p[2];
  EXPECT_EQ(::pipe(p), 0);
  Proc pr;
  pr.pid = ::fork();
  if (pr.pid == 0) {
    ::dup2(p[1], 2);
    ::dup2(p[1], 1);
    ::close(p[0]);
    std::vector<char*> av;
    for (auto& a : args) av.push_back(a.data());
    av.push_back(nullptr);
    ::execv(av[0], av.data());
    _exit(127);
  }
  ::close(p[1]);
  pr.err_fd = p[0];
  return pr;
}

TEST(SwitchCli, HelpAndStrictFlags) {
  auto h = spawn({"--help"});
  EXPECT_EQ(h.wait(), 0);
  EXPECT_NE(h.err.find("--metrics-port"), std::string::npos);
  struct Bad {
    std::vector<std::string> args;
    std::string msg;
  } bad[] = {
      {{"--frobnicate", "1"}, "not expected: 1 --frobnicate"},
      {{"--slots"}, "--slots: 1 required"},
      {{"--slots", "0"}, "invalid value for --slots: '0'"},
      {{"--slots", "12x"}, "invalid value for --slots: '12x'"},
      {{"--slot-elements", "20000"}, "invalid value for --slot-elements: '20000'"},
      {{"--types", "i32,f64"}, "invalid value for --types: 'i32,f64'"},
      {{"--bind", "localhost"}, "invalid value for --bind: 'localhost'"},
      {{"--bind", "1.2.3.4:70000"}, "invalid value for --bind"},
      {{"--parent", "127.0.0.1:0"}, "invalid value for --parent"},
      {{"--job", "7:1025:4"}, "invalid value for --job: '7:1025:4' (want ID:MEMBERS(1..1024)"},
      {{"--job", "7:2:4:1"}, "names a parent member but no --parent"},
      {{"--control-key", "0"}, "--control-key is gone"},
      {{"--controller", "127.0.0.1:7700"}, "--controller needs --control-key-file"},
      {{"--fault-loss", "1.5"}, "invalid value for --fault-loss"},
      {{"--metrics-port", "-1"}, "invalid value for --metrics-port"},
      {{"--topology", "/nonexistent"}, "--topology and --name go together"},
      {{"--topology", "/nonexistent", "--name", "x"}, "cannot read topology file '/nonexistent'"},
      {{"stray"}, "not expected: stray"},
      {{"--job", "1:2:3", "1:2:4"}, "not expected: 1:2:4"},  // one job per --job
      {{"--lanes", "0"}, "invalid value for --lanes: '0' (1..1024)"},
      {{"--lanes", "1025"}, "invalid value for --lanes: '1025'"},
      {{"--lanes", "two"}, "invalid value for --lanes: 'two'"},
      {{"--lanes", "3", "--slots", "2"}, "--slots 2 cannot be split over 3 lanes"},
      {{"--bind", "127.0.0.1:65535", "--lanes", "2"}, "--lanes 2 from port 65535 go beyond port 65535"},
      {{"--lanes", "2", "--slots", "64", "--job", "1:4:40"},
       "--job 1 needs 40 slots per lane, but each of the 2 lanes has 32"},
      {{"--topology", "/nonexistent", "--name", "x", "--lanes", "2"}, "do not combine"},
      {{"--job", "1:2:3", "--multicast", "1=10.0.0.1"}, "'10.0.0.1' is not an IPv4 multicast group"},
      {{"--job", "1:2:3", "--multicast", "2=239.1.1.1"}, "job 2 is not a static job of this switch"},
      {{"--job", "1:2:3", "--multicast", "x=239.1.1.1"}, "write JOB=GROUP"},
      {{"--job", "1:2:3", "--multicast", "1=239.1.1.1", "--multicast", "1=239.1.1.2"}, "job 1 given twice"},
      {{"--bind", "0.0.0.0:0", "--job", "1:2:3", "--multicast", "1=239.1.1.1"},
       "--multicast needs --bind with an address"},
      {{"--multicast-groups", "239.255.0.0"}, "invalid value for --multicast-groups: '239.255.0.0' (write BASE/LEN"},
      {{"--multicast-groups", "239.255.0.0/3"}, "(write BASE/LEN"},
      {{"--multicast-groups", "10.0.0.0/8"}, "BASE must be the first address of a range inside 224.0.0.0/4"},
      {{"--multicast-groups", "239.255.0.1/24"}, "BASE must be the first address of a range"},
      {{"--bind", "0.0.0.0:0", "--multicast-groups", "239.255.0.0/16"},
       "--multicast-groups needs --bind with an address"},
  };
  for (auto& b : bad) {
    auto p = spawn(b.args);
    EXPECT_EQ(p.wait(), 2) << b.msg;
    EXPECT_NE(p.err.find(b.msg), std::string::npos) << "got: " << p.err;
  }
}

TEST(SwitchCli, ServesAndStopsCleanlyOnSigterm) {
  auto p = spawn({"--bind", "127.0.0.1:0", "--slots", "16", "--slot-elements", "64", "--job",
                  "5:2:4", "--stats", "--name", "unused-without-topology"});
  // --name without --topology is refused: a strict parser.
  EXPECT_EQ(p.wait(), 2);
  p = spawn({"--bind", "127.0.0.1:0", "--slots", "16", "--slot-elements", "64", "--job", "5:2:4",
             "--stats"});
  ASSERT_TRUE(p.read_until("\n")) << p.err;
  auto at = p.err.find("serving ");
  ASSERT_NE(at, std::string::npos) << p.err;
  auto ep = parse_endpoint(p.err.substr(at + 8, p.err.find(',', at) - at - 8));
  ASSERT_TRUE(ep) << p.err;
  std::vector<std::thread> ts;
  std::vector<std::string> errs(2);
  for (int r = 0; r < 2; ++r)
    ts.emplace_back([&, r] {
      WorkerConfig c;
      c.job = 5;
      c.member = std::uint16_t(r);
      c.switch_ep = *ep;
      c.progress_timeout = 20 * kSecond;
      c.join_timeout = 20 * kSecond;
      UdpWorker w(c);
      std::vector<std::int32_t> in(1000, r + 1), out(1000);
      if (!w.run(WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(in), wbytes(out), 1000, 2)))
        errs[std::size_t(r)] = w.protocol().error().message;
      else if (out != std::vector<std::int32_t>(1000, 3))
        errs[std::size_t(r)] = "wrong result";
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(errs[0], "");
  EXPECT_EQ(errs[1], "");
  ::kill(p.pid, SIGTERM);
  EXPECT_EQ(p.wait(), 0) << p.err;
  EXPECT_NE(p.err.find("aggregations 16"), std::string::npos) << p.err;  // 1000 / 64 chunks
  EXPECT_NE(p.err.find("job 5: members 2"), std::string::npos) << p.err;
  EXPECT_NE(p.err.find("stopped"), std::string::npos) << p.err;
}

// Two lanes as a process: consecutive ports, each lane a switch of its own, --stats per lane.
TEST(SwitchCli, TwoLanesServeOnConsecutivePorts) {
  auto p = spawn({"--bind", "127.0.0.1:0", "--lanes", "2", "--slots", "16", "--slot-elements", "64",
                  "--job", "5:2:8", "--stats"});
  ASSERT_TRUE(p.read_until("\n")) << p.err;
  auto at = p.err.find("serving ");
  ASSERT_NE(at, std::string::npos) << p.err;
  auto ep = parse_endpoint(p.err.substr(at + 8, p.err.find(',', at) - at - 8));
  ASSERT_TRUE(ep) << p.err;
  const unsigned port = ep->port();
  EXPECT_NE(p.err.find("2 lanes (ports " + std::to_string(port) + "-" + std::to_string(port + 1) +
                       "), 16 slots (8 per lane)"),
            std::string::npos) << p.err;
  // Two members join lane 0, learn the lanes, join lane 1 and stripe the stream over both:
  // 1280 elements = 20 chunks of 64, 10 per lane.
  std::vector<std::thread> ts;
  std::vector<std::string> errs(2);
  for (int r = 0; r < 2; ++r)
    ts.emplace_back([&, r] {
      WorkerConfig c;
      c.job = 5;
      c.member = std::uint16_t(r);
      c.switch_ep = Endpoint::ipv4(ep->ipv4_addr(), std::uint16_t(port));
      c.progress_timeout = 20 * kSecond;
      c.join_timeout = 20 * kSecond;
      UdpWorker w(c);
      std::vector<std::int32_t> in(1280, r + 1), out(1280);
      auto& e = errs[std::size_t(r)];
      if (!w.run(WorkerOp::allreduce(NumKind::i32, ReduceKind::sum, cbytes(in), wbytes(out), 1280, 2)))
        e = w.protocol().error().message;
      else if (out != std::vector<std::int32_t>(1280, 3))
        e = "wrong result";
      else if (w.protocol().lanes() != 2 || w.protocol().join_info().lanes != 2)
        e = "join_info lanes";
    });
  for (auto& t : ts) t.join();
  for (auto& e : errs) EXPECT_EQ(e, "");
  ::kill(p.pid, SIGTERM);
  EXPECT_EQ(p.wait(), 0) << p.err;
  EXPECT_NE(p.err.find("aggregations 20,"), std::string::npos) << p.err;  // 10 per lane
  EXPECT_NE(p.err.find("  lane 0 127.0.0.1:" + std::to_string(port) + ": "), std::string::npos) << p.err;
  EXPECT_NE(p.err.find("  lane 1 127.0.0.1:" + std::to_string(port + 1) + ": "), std::string::npos) << p.err;
}

TEST(SwitchCli, TakenPortOfALaneIsAClearError) {
  UdpPort taken(Endpoint::ipv4(0x7F000001, 0), 1);
  const unsigned p = taken.local().port();
  auto proc = spawn({"--bind", "127.0.0.1:" + std::to_string(p - 2), "--lanes", "3"});
  EXPECT_EQ(proc.wait(), 1) << proc.err;
  // Lane 2 needs the taken port (or an earlier lane's port was taken too): named either way.
  EXPECT_NE(proc.err.find("inc switch: lane "), std::string::npos) << proc.err;
  EXPECT_NE(proc.err.find("Address already in use"), std::string::npos) << proc.err;
}

TEST(SwitchCli, TopologyFileSelectsTheSwitch) {
  std::string path = ::testing::TempDir() + "/inc_topo_test." + std::to_string(::getpid()) + ".txt";
  std::ofstream(path) << "# two leaves under a spine\n"
                         "switch spine 127.0.0.1:7298 slots=64 lanes=2\n"
                         "switch leaf0 127.0.0.1:7301 parent=spine\n"
                         "switch leaf1 127.0.0.1:7302 parent=spine slot-elements=128 types=i32\n"
                         "job 7 slots=8 leaf0=0-1 leaf1=2,3\n"
                         "job 8 slots=4 leaf1=0-2\n";
  SwitchDaemonOptions o;
  bool help;
  char* argv1[] = {(char*)"switch", (char*)"--topology", path.data(), (char*)"--name", (char*)"leaf1"};
  ASSERT_EQ(parse_switch_args(5, argv1, o, help), "");
  EXPECT_EQ(o.bind.str(), "127.0.0.1:7302");
  EXPECT_EQ(o.cfg.parent.str(), "127.0.0.1:7298");
  EXPECT_EQ(o.lanes, 1);  // lanes=1 unless the file says otherwise
  EXPECT_EQ(o.cfg.slot_elems, 128u);
  EXPECT_EQ(o.cfg.caps & proto::cap::f32_sum, 0u);
  ASSERT_EQ(o.jobs.size(), 2u);
  EXPECT_EQ(o.jobs[0].job, 7u);
  EXPECT_EQ(o.jobs[0].members, 2);
  EXPECT_EQ(o.jobs[0].parent_member, 1);
  // Job 8 lives on leaf1 only: the spine adds nothing and leaf1 is its root.
  EXPECT_EQ(o.jobs[1].job, 8u);
  EXPECT_EQ(o.jobs[1].members, 3);
  EXPECT_EQ(o.jobs[1].parent_member, proto::kNoMember);
  SwitchDaemonOptions o2;
  char* argv2[] = {(char*)"switch", (char*)"--topology", path.data(), (char*)"--name", (char*)"spine"};
  ASSERT_EQ(parse_switch_args(5, argv2, o2, help), "");
  ASSERT_EQ(o2.jobs.size(), 1u);  // not on job 8's tree
  EXPECT_EQ(o2.lanes, 2);
  EXPECT_EQ(o2.bind.str(), "127.0.0.1:7298");
  EXPECT_EQ(o2.jobs[0].members, 2);
  SwitchDaemonOptions o3;
  char* argv3[] = {(char*)"switch", (char*)"--topology", path.data(), (char*)"--name", (char*)"leaf0", (char*)"--slots", (char*)"9"};
  EXPECT_NE(parse_switch_args(7, argv3, o3, help).find("do not combine"), std::string::npos);
  std::remove(path.c_str());
}

// Multicast results in a tree: a switch whose members in a job are hosts may give that job a
// group (its results replicate under it); one with a child switch as a member may not, as a
// leaf whose parent announces a group fails the job (docs/PROTOCOL.md, "Multicast results").
TEST(SwitchCli, TopologyLeafTakesAGroupTheSpineDoesNot) {
  std::string path = ::testing::TempDir() + "/inc_topo_mcast_test." + std::to_string(::getpid()) + ".txt";
  std::ofstream(path) << "switch spine 127.0.0.1:7298\n"
                         "switch leaf0 127.0.0.1:7301 parent=spine\n"
                         "switch leaf1 127.0.0.1:7302 parent=spine\n"
                         "job 7 slots=8 leaf0=0-1 leaf1=2,3\n"
                         "job 8 slots=4 spine=0 leaf1=1-2\n";
  bool help;
  SwitchDaemonOptions leaf;
  char* a1[] = {(char*)"switch", (char*)"--topology", path.data(), (char*)"--name", (char*)"leaf1",
                (char*)"--multicast", (char*)"7=239.255.0.2", (char*)"--multicast", (char*)"8=239.255.0.3"};
  ASSERT_EQ(parse_switch_args(9, a1, leaf, help), "");
  ASSERT_EQ(leaf.jobs.size(), 2u);
  EXPECT_EQ(leaf.jobs[0].multicast.str(), "239.255.0.2:0");  // lane 0's port once bound
  EXPECT_EQ(leaf.jobs[1].multicast.str(), "239.255.0.3:0");
  EXPECT_NE(leaf.jobs[0].parent_member, proto::kNoMember);  // a leaf: it still has a parent
  SwitchDaemonOptions spine;
  char* a2[] = {(char*)"switch", (char*)"--topology", path.data(), (char*)"--name", (char*)"spine",
                (char*)"--multicast", (char*)"7=239.255.0.1"};
  EXPECT_NE(parse_switch_args(7, a2, spine, help).find("switch 'spine' has switch 'leaf0' as a member of job 7"),
            std::string::npos);
  // Job 8: the spine has a rank of its own and leaf1 below it: still no group for the spine.
  SwitchDaemonOptions mixed;
  char* a3[] = {(char*)"switch", (char*)"--topology", path.data(), (char*)"--name", (char*)"spine",
                (char*)"--multicast", (char*)"8=239.255.0.1"};
  EXPECT_NE(parse_switch_args(7, a3, mixed, help).find("has switch 'leaf1' as a member of job 8"), std::string::npos);
  std::remove(path.c_str());
}

TEST(Topology, ErrorsNameTheLine) {
  struct Case {
    const char* text;
    const char* err;
  } cases[] = {
      {"switch a 127.0.0.1:1\nswitch a 127.0.0.1:2\n", "line 2: switch 'a' defined twice"},
      {"switch a 127.0.0.1\n", "line 1: bad address"},
      {"switch a 127.0.0.1:1 parent=b\n", "line 1: unknown parent 'b'"},
      {"switch a 127.0.0.1:1 parent=b\nswitch b 127.0.0.1:2 parent=a\n", "form a cycle"},
      {"switch a 127.0.0.1:1 colour=red\n", "line 1: unknown key 'colour'"},
      {"router a\n", "line 1: unknown statement 'router'"},
      {"switch a 127.0.0.1:1\njob 1 a=0,2\n", "line 2: ranks of job 1 must be exactly 0..n-1"},
      {"switch a 127.0.0.1:1\njob 1 a=0-1 b=2\n", "line 2: unknown switch 'b'"},
      {"switch a 127.0.0.1:1\njob 1 a=0-1,1\n", "line 2: rank 1 attached twice"},
      {"switch a 127.0.0.1:1\njob 1 slots=0 a=0\n", "line 2: bad slots '0'"},
      {"switch a 127.0.0.1:1 lanes=0\n", "line 1: bad lanes '0'"},
      {"switch a 127.0.0.1:1 ports=0\n", "line 1: bad ports '0' (1..1024)"},
      {"switch a 127.0.0.1:1 ports=1025\n", "line 1: bad ports '1025' (1..1024)"},
      {"switch a 127.0.0.1:65535 lanes=2\n", "line 1: switch 'a': 2 lanes from port 65535 go beyond"},
      {"switch a 127.0.0.1:1 lanes=4 slots=3\n", "line 1: switch 'a': slots=3 cannot be split over 4 lanes"},
      {"switch a 127.0.0.1:7000 lanes=3\nswitch b 127.0.0.1:7002\n",
       "line 2: switch 'b' (ports 7002-7002) overlaps the lanes of switch 'a' (ports 7000-7002)"},
  };
  for (auto& c : cases) {
    std::string err;
    EXPECT_FALSE(parse_topology(c.text, err).has_value()) << c.text;
    EXPECT_NE(err.find(c.err), std::string::npos) << "got: " << err;
  }
  std::string err;
  auto t = parse_topology("switch a 127.0.0.1:1\nswitch b 127.0.0.1:2\njob 1 a=0 b=1\n", err);
  ASSERT_TRUE(t);
  EXPECT_FALSE(plan_job(*t, t->jobs[0], err).has_value());
  EXPECT_NE(err.find("separate trees"), std::string::npos);
  // A switch's ports bound the members of a job there (ranks and child switches).
  t = parse_topology("switch a 127.0.0.1:1 ports=3\njob 1 a=0-3\n", err);
  ASSERT_TRUE(t) << err;
  EXPECT_FALSE(plan_job(*t, t->jobs[0], err).has_value());
  EXPECT_NE(err.find("switch 'a' would have 4 members in job 1 (at most 3, its ports=3)"), std::string::npos) << err;
  t = parse_topology("switch a 127.0.0.1:1\njob 1 a=0-299\n", err);  // no ports=: up to 1024
  ASSERT_TRUE(t) << err;
  auto big = plan_job(*t, t->jobs[0], err);
  ASSERT_TRUE(big) << err;
  EXPECT_EQ(big->specs.at("a").members, 300);
  // Job slots are per lane: they must fit each lane's share of the pool.
  t = parse_topology("switch a 127.0.0.1:7000 lanes=2 slots=16\njob 1 slots=9 a=0\n", err);
  ASSERT_TRUE(t) << err;
  EXPECT_FALSE(plan_job(*t, t->jobs[0], err).has_value());
  EXPECT_NE(err.find("needs 9 slots per lane, switch 'a' has 8 per lane (slots=16 over 2 lanes)"),
            std::string::npos) << err;
}

}  // namespace
}  // namespace inc::sw
