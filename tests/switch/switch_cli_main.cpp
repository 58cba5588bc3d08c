// The `inc switch` subcommand as a stand-alone binary for process-level tests (the `inc` tool
// links every subcommand; this links only tools/switch.cpp).
#include "tools/commands.hpp"

// argv[0] (the binary) stands where `inc` passes the subcommand name.
int main(int argc, char** argv) { return inc::tools::cmd_switch(argc, argv); }
