// `inc numerics` (docs/NUMERICS.md): what low-precision types and accumulator policies do to a
// reduction.
//   inc numerics examples   the paper's int4 examples step by step
//   inc numerics sweep      type x accumulator policy x members x tree shape vs exact reference
#include <filesystem>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "inc/types.hpp"
#include "tools/commands.hpp"
#include "tools/numerics_tool.hpp"

namespace inc::tools {

int cmd_numerics(int argc, char** argv) {
  CLI::App app{"Numerics of in-network reduction: int4 examples and the accumulator sweep (docs/NUMERICS.md)",
               "inc numerics"};
  app.require_subcommand(1);
  app.add_subcommand("examples", "the paper's int4 examples (7-5+5+5-3-7; 2*2*3/2) under each policy");
  auto* sweep = app.add_subcommand("sweep", "type x policy x members x tree shape against an exact reference");
  SweepOptions o;
  bool no_plot = false;
  sweep->add_option("--members", o.members, "member counts")->delimiter(',')->capture_default_str();
  sweep->add_option("--elements", o.elements, "elements per member (even)")->capture_default_str()
      ->check(CLI::Range(std::size_t{2}, std::size_t{1} << 24));
  sweep->add_option("--seed", o.seed, "random seed")->capture_default_str();
  sweep->add_option("--out", o.out_dir, "directory for the CSV and the PNG/SVG plots");
  sweep->add_flag("--no-plot", no_plot, "write the CSV only (no gnuplot needed)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    if (app.got_subcommand("examples")) return numerics_examples();
    if (o.elements % 2 != 0) {
      fmt::print(stderr, "inc numerics: --elements must be even (i4 packs two per byte)\n");
      return 2;
    }
    for (int m : o.members)
      if (m < 1 || m > 4096) {
        fmt::print(stderr, "inc numerics: --members {} is out of range 1..4096\n", m);
        return 2;
      }
    if (!o.out_dir.empty()) std::filesystem::create_directories(o.out_dir);
    o.plot = !no_plot;
    return numerics_sweep(o);
  } catch (const std::exception& e) {
    fmt::print(stderr, "inc numerics: {}\n", e.what());
    return 1;
  }
}

}  // namespace inc::tools
