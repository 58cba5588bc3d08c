// inc testbed's system helpers that need no root: running commands (exit codes, stderr in the
// message, programs that cannot be started, the deadline), process start times, and the
// bookkeeping that tells a killed testbed's leftovers from a running one.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>

#include "inc/types.hpp"
#include "testbed/system.hpp"

using namespace inc::testbed;
namespace fs = std::filesystem;

namespace {
bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }
}  // namespace

TEST(TestbedSystem, RunCommandCapturesOutputAndStatus) {
  CommandResult r = run_command({"sh", "-c", "echo out; echo err >&2; exit 3"});
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_EQ(r.describe(), "exited with code 3: err");
  EXPECT_TRUE(run_command({"true"}).ok());
  CommandResult k = run_command({"sh", "-c", "kill -TERM $$"});
  EXPECT_EQ(k.signal, SIGTERM);
  EXPECT_TRUE(has(k.describe(), "was killed by signal 15")) << k.describe();
}

TEST(TestbedSystem, CheckCommandNamesTheCommandAndItsStderr) {
  try {
    check_command({"sh", "-c", "echo 'RTNETLINK answers: File exists' >&2; exit 2"});
    ADD_FAILURE() << "no exception";
  } catch (const inc::Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "`sh -c 'echo '\\''RTNETLINK answers: File exists'\\'' >&2; exit 2'` exited with code 2: "
              "RTNETLINK answers: File exists");
  }
  EXPECT_EQ(check_command({"echo", "hi"}), "hi\n");
}

TEST(TestbedSystem, MissingProgramAndDeadline) {
  CommandResult r = run_command({"/nonexistent/ip", "netns", "add", "x"});
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(has(r.describe(), "could not be started: /nonexistent/ip")) << r.describe();
  CommandResult t = run_command({"sleep", "30"}, std::chrono::milliseconds(100));
  EXPECT_TRUE(t.timed_out);  // killed at the deadline (else it would have exited 0)
  EXPECT_EQ(t.exit_code, -1);
  EXPECT_TRUE(has(t.describe(), "did not finish in time")) << t.describe();
}

TEST(TestbedSystem, ProcessStartTime) {
  auto mine = process_start_time(::getpid());
  ASSERT_TRUE(mine.has_value());
  EXPECT_EQ(process_start_time(::getpid()), mine);
  EXPECT_FALSE(process_start_time(0x7ffffff0).has_value());
}

TEST(TestbedSystem, FindsStateDirectoriesAndTellsLiveOwnersFromDeadOnes) {
  const fs::path dir = fs::temp_directory_path() / ("inc-testbed-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto owner = [&](long pid, const std::string& text) {
    fs::create_directories(dir / ("tbt-" + std::to_string(pid)));
    std::ofstream(dir / ("tbt-" + std::to_string(pid)) / "owner") << text;
  };
  const long me = ::getpid();
  owner(me, std::to_string(me) + " " + std::to_string(*process_start_time(me)) + "\n");
  const long dead = 999999999;  // above pid_max (at most 4194304): no such process
  owner(dead, std::to_string(dead) + " 12345\n");
  // A live pid whose start time differs: a reused pid, the testbed that made it is gone.
  const long ppid = ::getppid();
  owner(ppid, std::to_string(ppid) + " 1\n");
  fs::create_directories(dir / "other-1");  // another prefix: ignored
  auto found = find_testbeds(dir.string(), "tbt");
  fs::remove_all(dir);
  ASSERT_EQ(found.size(), 3u);
  for (const auto& t : found) {
    EXPECT_TRUE(t.has_state);
    if (t.pid == me) EXPECT_TRUE(t.owner_alive);
    else if (t.pid == dead) EXPECT_FALSE(t.owner_alive);
    else if (t.pid == ppid) EXPECT_FALSE(t.owner_alive) << "reused pid taken for the owner";
    else ADD_FAILURE() << "unexpected pid " << t.pid;
  }
}
