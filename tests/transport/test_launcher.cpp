// Local launcher: output forwarding, failure propagation, timeouts, signals, sidecars, and
// real ranks bootstrapping through the store (store_probe). Children are /bin/sh scripts or
// the store_probe helper.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "api/launcher.hpp"
#include "inc/types.hpp"
#include "tests/transport/test_util.hpp"
#include "tools/commands.hpp"

using namespace inc::api;
using inc::testing::Capture;
using std::chrono::milliseconds;

namespace {

struct Job {
  Capture out, err;
  LaunchOptions opts;
  Job(int n, std::vector<std::string> argv) {
    opts.world_size = n;
    opts.argv = std::move(argv);
    opts.stdout_fd = out.fd();
    opts.stderr_fd = err.fd();
    opts.grace = milliseconds(5000);
  }
  LaunchResult run() { return launch_ranks(opts); }
};

std::vector<std::string> sh(const std::string& script) { return {"/bin/sh", "-c", script}; }

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST(Launcher, PrefixesEveryLineAndSeparatesStreams) {
  Job job(3, sh("echo \"hello from $INC_RANK of $INC_WORLD_SIZE\"; echo \"err $INC_RANK\" >&2; "
                "printf 'no newline %s' $INC_RANK"));
  auto r = job.run();
  EXPECT_EQ(r.exit_code, 0) << r.failure;
  ASSERT_EQ(r.ranks.size(), 3u);
  for (auto& p : r.ranks) EXPECT_TRUE(p.ok()) << p.name << " " << p.describe();
  auto out_lines = job.out.lines();
  std::set<std::string> got(out_lines.begin(), out_lines.end());
  for (int i = 0; i < 3; ++i) {
    auto s = std::to_string(i);
    EXPECT_TRUE(got.count("[" + s + "] hello from " + s + " of 3")) << job.out.text();
    EXPECT_TRUE(got.count("[" + s + "] no newline " + s)) << job.out.text();
    EXPECT_TRUE(contains(job.err.text(), "[" + s + "] err " + s + "\n")) << job.err.text();
  }
  EXPECT_EQ(out_lines.size(), 6u);
  EXPECT_FALSE(contains(job.out.text(), "err"));
}

TEST(Launcher, LongLinesAreNeverInterleaved) {
  // Each rank writes 300 lines of 3000 identical characters, in odd-sized pieces.
  Job job(4, sh("c=$(printf \"\\\\$(printf %o $((97 + INC_RANK)))\"); "
                "line=$(printf \"%3000s\" | tr ' ' \"$c\"); "
                "i=0; while [ $i -lt 300 ]; do printf '%s\\n' \"$line\"; i=$((i+1)); done"));
  auto r = job.run();
  EXPECT_EQ(r.exit_code, 0) << r.failure << job.err.text();
  auto lines = job.out.lines();
  EXPECT_EQ(lines.size(), 1200u);
  int per_rank[4] = {};
  for (auto& l : lines) {
    ASSERT_EQ(l.size(), 4u + 3000u) << l.substr(0, 80);
    int rank = l[1] - '0';
    ASSERT_TRUE(rank >= 0 && rank < 4);
    EXPECT_EQ(l[0], '[');
    EXPECT_EQ(l.compare(2, 2, "] "), 0);
    EXPECT_EQ(l.find_first_not_of(static_cast<char>('a' + rank), 4), std::string::npos);
    ++per_rank[rank];
  }
  for (int c : per_rank) EXPECT_EQ(c, 300);
}

TEST(Launcher, NoPrefix) {
  Job job(2, sh("echo plain"));
  job.opts.prefix_output = false;
  auto r = job.run();
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(job.out.text(), "plain\nplain\n");
}

TEST(Launcher, FailingRankStopsSleepingSibling) {
  Job job(3, sh("if [ \"$INC_RANK\" = 1 ]; then exit 3; fi; exec sleep 600"));
  auto r = job.run();
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.failure, "rank 1 exited with code 3");
  ASSERT_EQ(r.ranks.size(), 3u);
  EXPECT_TRUE(r.ranks[1].exited);
  EXPECT_EQ(r.ranks[1].code, 3);
  for (int i : {0, 2}) {
    // Stopped by our SIGTERM, not by the 600 s sleep ending.
    EXPECT_FALSE(r.ranks[i].exited) << r.ranks[i].describe();
    EXPECT_EQ(r.ranks[i].signal, SIGTERM) << r.ranks[i].describe();
    EXPECT_TRUE(r.ranks[i].stopped_by_launcher);
  }
  auto log = job.err.text();
  EXPECT_TRUE(contains(log, "rank 1 exited with code 3")) << log;
  EXPECT_TRUE(contains(log, "stopping 2 other processes")) << log;
}

TEST(Launcher, SiblingIgnoringSigtermIsKilledAfterGrace) {
  // Rank 0 fails only once rank 1 ignores SIGTERM (it says so through the store).
  Job job(2, {"/bin/sh", "-c",
              "if [ \"$INC_RANK\" = 0 ]; then \"$0\" get ignoring; exit 1; fi; trap '' TERM; "
              "\"$0\" set ignoring 1; while :; do sleep 1; done",
              INC_STORE_PROBE});
  job.opts.grace = milliseconds(200);
  auto r = job.run();
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.ranks[1].signal, SIGKILL) << r.ranks[1].describe();
  EXPECT_TRUE(contains(job.err.text(), "SIGKILL")) << job.err.text();
}

TEST(Launcher, RankKilledBySignal) {
  Job job(2, sh("if [ \"$INC_RANK\" = 1 ]; then kill -SEGV $$; fi; exec sleep 600"));
  auto r = job.run();
  EXPECT_EQ(r.exit_code, 128 + SIGSEGV);
  EXPECT_TRUE(contains(r.failure, "rank 1 was killed by signal 11")) << r.failure;
}

TEST(Launcher, JobTimeout) {
  Job job(2, sh("exec sleep 600"));
  job.opts.timeout = milliseconds(100);
  auto r = job.run();
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.exit_code, 124);
  EXPECT_TRUE(contains(r.failure, "rank 0, rank 1")) << r.failure;
}

TEST(Launcher, ProgramNotFound) {
  Job job(2, {"no-such-program-for-inc-tests"});
  auto r = job.run();
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_TRUE(contains(r.failure, "no-such-program-for-inc-tests")) << r.failure;
  Job job2(1, {"/etc/passwd"});  // exists, not executable
  EXPECT_EQ(job2.run().exit_code, 127);
}

TEST(Launcher, BadOptionsThrow) {
  Job job(0, sh("true"));
  EXPECT_THROW(job.run(), inc::Error);
  Job job2(1, {});
  EXPECT_THROW(job2.run(), inc::Error);
}

TEST(Launcher, EnvironmentOfRanks) {
  ::setenv("OMPI_COMM_WORLD_RANK", "7", 1);  // a stale outer launcher must not leak in
  Job job(2, sh("echo \"$INC_RANK/$INC_WORLD_SIZE/$INC_LOCAL_RANK/$INC_LOCAL_SIZE "
                "$INC_STORE $INC_STORE_HOST [$OMPI_COMM_WORLD_RANK] $EXTRA\""));
  job.opts.env = {{"EXTRA", "x1"}};
  auto r = job.run();
  ::unsetenv("OMPI_COMM_WORLD_RANK");
  ASSERT_EQ(r.exit_code, 0);
  std::string store = "127.0.0.1:" + std::to_string(r.store_port);
  auto text = job.out.text();
  EXPECT_TRUE(contains(text, "[0] 0/2/0/2 " + store + " 0 [] x1")) << text;
  EXPECT_TRUE(contains(text, "[1] 1/2/1/2 " + store + " 0 [] x1")) << text;
}

TEST(Launcher, RanksBootstrapThroughTheStore) {
  Job job(4, {INC_STORE_PROBE, "info", "add", "arrived", "1", "barrier", "b", "get", "arrived"});
  auto r = job.run();
  EXPECT_EQ(r.exit_code, 0) << r.failure << "\n" << job.err.text();
  auto text = job.out.text();
  for (int i = 0; i < 4; ++i) {
    auto s = std::to_string(i);
    EXPECT_TRUE(contains(text, "[" + s + "] rank " + s + " of 4 local " + s +
                                   "/4 source inc store 127.0.0.1:" + std::to_string(r.store_port)))
        << text;
    EXPECT_TRUE(contains(text, "[" + s + "] passed barrier")) << text;
    // After the barrier everybody has added.
    EXPECT_TRUE(contains(text, "[" + s + "] get arrived = 4")) << text;
  }
}

TEST(Launcher, ReportsThePublishedAbortReason) {
  Job job(3, {"/bin/sh", "-c",
              "if [ \"$INC_RANK\" = 2 ]; then exec \"$0\" abort 'disk full' exit 4; fi; "
              "exec \"$0\" get never",
              INC_STORE_PROBE});
  auto r = job.run();
  EXPECT_EQ(r.exit_code, 4);
  ASSERT_TRUE(r.abort_reason.has_value());
  EXPECT_EQ(*r.abort_reason, "rank 2 failed: disk full");
  EXPECT_TRUE(contains(job.err.text(), "rank 2 failed: disk full")) << job.err.text();
}

TEST(Launcher, SidecarRunsAlongsideAndIsStoppedAfterwards) {
  Job job(2, sh("echo rank $INC_RANK done"));
  SidecarSpec side;
  side.name = "switch";
  side.argv =
      sh("echo \"side up for $INC_LAUNCH_WORLD_SIZE ranks, rank='$INC_RANK' "
         "world='$INC_WORLD_SIZE'\"; exec sleep 600");
  job.opts.sidecars.push_back(side);
  auto r = job.run();
  EXPECT_EQ(r.exit_code, 0) << r.failure;
  ASSERT_EQ(r.sidecars.size(), 1u);
  EXPECT_EQ(r.sidecars[0].signal, SIGTERM) << r.sidecars[0].describe();
  EXPECT_TRUE(contains(job.out.text(), "[switch] side up for 2 ranks, rank='' world=''"))
      << job.out.text();
}

TEST(Launcher, SidecarFailingWhenStoppedFailsTheJob) {
  // As a switch whose leak check fails at exit: the ranks are fine, the job is not.
  Job job(2, sh("echo rank $INC_RANK done"));
  SidecarSpec side;
  side.name = "switch";
  // Ready (the ranks start) only once the trap is set, or the SIGTERM could come first.
  side.argv = {"/bin/sh", "-c",
               "trap 'echo leaked >&2; exit 23' TERM; \"$0\" set switch/ready 1; "
               "while :; do sleep 0.05; done",
               INC_STORE_PROBE};
  side.ready_key = "switch/ready";
  job.opts.sidecars.push_back(side);
  auto r = job.run();
  EXPECT_EQ(r.exit_code, 23) << r.failure;
  EXPECT_TRUE(contains(r.failure, "switch exited with code 23 when stopped after the ranks finished"))
      << r.failure;
  for (auto& p : r.ranks) EXPECT_TRUE(p.ok()) << p.describe();
  EXPECT_TRUE(contains(job.err.text(), "[switch] leaked")) << job.err.text();
}

TEST(Launcher, SidecarReadyKeyGatesTheRanks) {
  Job job(2, {INC_STORE_PROBE, "get", "switch/addr"});
  SidecarSpec side;
  side.name = "switch";
  side.argv = {"/bin/sh", "-c",
               "\"$0\" set switch/addr 10.1.2.3:9999 set switch/ready 1; exec sleep 600",
               INC_STORE_PROBE};
  side.ready_key = "switch/ready";
  job.opts.sidecars.push_back(side);
  auto r = job.run();
  EXPECT_EQ(r.exit_code, 0) << r.failure << job.err.text();
  EXPECT_TRUE(contains(job.out.text(), "[0] get switch/addr = 10.1.2.3:9999")) << job.out.text();
}

TEST(Launcher, SidecarDyingEarlyFailsTheJob) {
  Job job(2, sh("exec sleep 600"));
  SidecarSpec side;
  side.name = "switch";
  side.argv = sh("echo 'cannot bind'; exit 5");
  job.opts.sidecars.push_back(side);
  auto r = job.run();
  EXPECT_EQ(r.exit_code, 5);
  EXPECT_TRUE(contains(r.failure, "switch exited with code 5")) << r.failure;
  for (auto& p : r.ranks) EXPECT_EQ(p.signal, SIGTERM) << p.describe();
}

TEST(Launcher, SidecarNeverReady) {
  Job job(1, sh("echo should-not-run"));
  SidecarSpec side;
  side.name = "switch";
  side.argv = sh("exec sleep 600");
  side.ready_key = "switch/ready";
  side.ready_timeout = milliseconds(50);
  job.opts.sidecars.push_back(side);
  auto r = job.run();
  EXPECT_NE(r.exit_code, 0);
  EXPECT_TRUE(contains(r.failure, "switch/ready")) << r.failure;
  EXPECT_TRUE(r.ranks.empty());
  EXPECT_FALSE(contains(job.out.text(), "should-not-run"));
}

TEST(Launcher, ForwardsSigintToRanks) {
  Job job(2, sh("trap 'echo got INT; exit 7' INT; echo ready; while :; do sleep 0.05; done"));
  job.opts.forward_signals = true;
  std::thread interrupter([&] {
    // Wait (bounded) until both ranks run, then interrupt the launcher like Ctrl-C would.
    for (int i = 0; i < 6000; ++i) {
      auto t = job.out.text();
      if (t.find("[0] ready") != std::string::npos && t.find("[1] ready") != std::string::npos)
        break;
      std::this_thread::sleep_for(milliseconds(10));
    }
    ::kill(::getpid(), SIGINT);
  });
  auto r = job.run();
  interrupter.join();
  EXPECT_EQ(r.interrupted_by, SIGINT);
  EXPECT_EQ(r.exit_code, 128 + SIGINT);
  auto text = job.out.text();
  EXPECT_TRUE(contains(text, "[0] got INT")) << text;
  EXPECT_TRUE(contains(text, "[1] got INT")) << text;
  for (auto& p : r.ranks) EXPECT_EQ(p.code, 7) << p.describe();
}

// ---- the `inc launch` command line ----------------------------------------------------------

namespace {
int cli(std::vector<std::string> args) {
  args.insert(args.begin(), "launch");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return inc::tools::cmd_launch(static_cast<int>(args.size()), argv.data());
}
}  // namespace

TEST(LaunchCli, StrictArguments) {
  testing::internal::CaptureStderr();
  EXPECT_EQ(cli({"-n", "2", "--bogus", "true"}), 2);
  EXPECT_EQ(cli({"true"}), 2);             // -n missing
  EXPECT_EQ(cli({"-n", "0", "true"}), 2);  // out of range
  EXPECT_EQ(cli({"-n", "x", "true"}), 2);
  EXPECT_EQ(cli({"-n", "2"}), 2);  // no program
  EXPECT_EQ(cli({"-n"}), 2);       // missing value
  EXPECT_EQ(cli({"-n", "1", "--timeout", "-1", "true"}), 2);
  EXPECT_EQ(cli({"-n", "1", "--store-port", "70000", "true"}), 2);
  EXPECT_EQ(cli({"-n", "1", "--no-prefix=1", "true"}), 2);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(contains(err, "unknown option '--bogus'")) << err;
  EXPECT_TRUE(contains(err, "usage: inc launch")) << err;
}

TEST(LaunchCli, RunsAndPropagatesExitCodes) {
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  EXPECT_EQ(cli({"--help"}), 0);
  EXPECT_EQ(cli({"-n", "2", "--", "/bin/sh", "-c", "exit 0"}), 0);
  EXPECT_EQ(cli({"--np=2", "--no-prefix", "--timeout", "60", "/bin/sh", "-c",
                 "[ \"$INC_RANK\" = 0 ] && exit 9; exec sleep 600"}),
            9);
  EXPECT_EQ(cli({"-n", "1", "--timeout", "0.05", "/bin/sh", "-c", "exec sleep 600"}), 124);
  testing::internal::GetCapturedStdout();
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_TRUE(contains(err, "rank 0 exited with code 9")) << err;
}
