#pragma once

namespace inc::tools {
// Each returns the process exit code; argv[0] is the subcommand name.
int cmd_launch(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_controller(int argc, char** argv);
int cmd_demo(int argc, char** argv);
int cmd_model(int argc, char** argv);
int cmd_sim(int argc, char** argv);
int cmd_switch(int argc, char** argv);
int cmd_testbed(int argc, char** argv);
int cmd_tune(int argc, char** argv);
int cmd_edge(int argc, char** argv);
int cmd_numerics(int argc, char** argv);
}  // namespace inc::tools
