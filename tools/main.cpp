// `inc`: the project's single command. Each subcommand lives in its own file and is
// registered here; `inc help` lists them.
#include <cstdio>
#include <cstring>
#include <string_view>

#include "tools/commands.hpp"

namespace {
struct Command {
  const char* name;
  int (*run)(int argc, char** argv);  // argv[0] is the subcommand name
  const char* summary;
};

const Command kCommands[] = {
    {"launch", inc::tools::cmd_launch, "start a rendezvous store and N local ranks of a program"},
    {"bench", inc::tools::cmd_bench, "nccl-tests style collective benchmark (run under a launcher)"},
    {"controller", inc::tools::cmd_controller, "builds switch trees for every communicator, shares switch memory"},
    {"demo", inc::tools::cmd_demo, "the main job: a local INC cluster running the collectives"},
    {"model", inc::tools::cmd_model, "analytical model: collective costs, training iterations, paper-figure5"},
    {"sim", inc::tools::cmd_sim, "discrete-event simulator: jobs on fat trees / rail clusters, links touched"},
    {"switch", inc::tools::cmd_switch, "software Core-INC aggregation switch (UDP daemon)"},
    {"testbed", inc::tools::cmd_testbed, "emulated cluster: namespaces, shaped links, switches; runs a job"},
    {"tune", inc::tools::cmd_tune, "measure every path of every collective; write a tuning file for auto"},
    {"edge", inc::tools::cmd_edge, "Edge-INC offload engine of this host: runs collectives posted by its ranks"},
    {"numerics", inc::tools::cmd_numerics, "int4 examples and accumulator-policy sweep against exact sums"},
};

void usage(std::FILE* out) {
  std::fprintf(out, "usage: inc <command> [options]\n\ncommands:\n");
  for (const auto& c : kCommands) std::fprintf(out, "  %-10s %s\n", c.name, c.summary);
  std::fprintf(out, "\n`inc <command> --help` describes a command.\n");
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  std::string_view cmd = argv[1];
  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
    usage(stdout);
    return 0;
  }
  for (const auto& c : kCommands)
    if (cmd == c.name) return c.run(argc - 1, argv + 1);
  std::fprintf(stderr, "inc: unknown command '%s'\n\n", argv[1]);
  usage(stderr);
  return 2;
}
