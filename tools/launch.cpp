// `inc launch`: start a rendezvous store and N local ranks of a program (see
// src/api/launcher.hpp for the behaviour, docs/USAGE.md for the user's view).
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "api/launcher.hpp"
#include "inc/types.hpp"
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
    "  -h, --help          this text\n"
    "\n"
    "exit code: 0 if every rank exited 0; else the failing rank's exit code, 128+signal if it\n"
    "was killed, 124 on --timeout, 127 if the program cannot be executed, 2 for usage errors,\n"
    "1 if the launcher itself fails (e.g. the store port is taken).\n";

struct UsageError {
  std::string message;
};

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
  api::LaunchOptions o;
  o.forward_signals = true;
  int n = -1;
  try {
    int i = 1;
    // Options come first; the first non-option (or whatever follows "--") is the program.
    for (; i < argc; ++i) {
      std::string_view a = argv[i];
      if (a == "--") {
        ++i;
        break;
      }
      if (a.empty() || a[0] != '-') break;
      std::string_view flag = a, value;
      bool inline_value = false;
      if (auto eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string_view::npos) {
        flag = a.substr(0, eq);
        value = a.substr(eq + 1);
        inline_value = true;
      }
      auto take_value = [&]() -> std::string_view {
        if (inline_value) return value;
        if (i + 1 >= argc) throw UsageError{fmt::format("{} needs a value", flag)};
        return argv[++i];
      };
      auto no_value = [&] {
        if (inline_value) throw UsageError{fmt::format("{} takes no value", flag)};
      };
      if (flag == "-h" || flag == "--help") {
        no_value();
        std::fputs(kUsage, stdout);
        return 0;
      } else if (flag == "-n" || flag == "--np") {
        n = static_cast<int>(parse_int_arg(flag, take_value(), 1, 4096));
      } else if (flag == "--timeout") {
        o.timeout = parse_seconds_arg(flag, take_value());
      } else if (flag == "--grace") {
        o.grace = parse_seconds_arg(flag, take_value());
      } else if (flag == "--store-port") {
        o.store_port = static_cast<int>(parse_int_arg(flag, take_value(), 0, 65535));
      } else if (flag == "--no-prefix") {
        no_value();
        o.prefix_output = false;
      } else {
        throw UsageError{fmt::format("unknown option '{}'", a)};
      }
    }
    if (n < 0) throw UsageError{"-n N is required"};
    if (i >= argc) throw UsageError{"no program given"};
    for (; i < argc; ++i) o.argv.emplace_back(argv[i]);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "inc launch: %s\n\n%s", e.message.c_str(), kUsage);
    return 2;
  }
  o.world_size = n;
  try {
    auto r = api::launch_ranks(o);
    return r.exit_code;
  } catch (const Error& e) {
    std::fprintf(stderr, "inc launch: %s\n", e.what());
    return 1;
  }
}

}  // namespace inc::tools
