#include "sim/plot.hpp"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include <fmt/format.h>

#include "inc/types.hpp"

namespace inc::sim {

std::string find_gnuplot() {
  if (const char* g = std::getenv("GNUPLOT"); g && *g) return access(g, X_OK) == 0 ? g : "";
  const char* path = std::getenv("PATH");
  std::stringstream ss(path ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (dir.empty()) continue;
    std::string p = dir + "/gnuplot";
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

void render_plot(const std::string& stem, const std::string& body, int width, int height) {
  const std::string gp = find_gnuplot();
  if (gp.empty())
    throw Error(Error::Kind::config,
                "plots need gnuplot, which was not found in PATH (install the Debian package "
                "gnuplot-nox, or pass --no-plot; the CSV/JSON data is written either way)");
  for (const char* ext : {"png", "svg"}) {
    std::string term = std::string(ext) == "png"
                           ? fmt::format("set terminal pngcairo size {},{} enhanced font 'sans,11'", width, height)
                           : fmt::format("set terminal svg size {},{} enhanced font 'sans,11' background rgb 'white'", width, height);
    std::string script = fmt::format("{}\nset output '{}.{}'\n{}\nunset output\n", term, stem, ext, body);
    std::string cmd = fmt::format("'{}' 2>&1", gp);
    FILE* f = popen(cmd.c_str(), "w");
    if (!f) throw Error(Error::Kind::config, "cannot start gnuplot");
    std::fwrite(script.data(), 1, script.size(), f);
    const int rc = pclose(f);
    if (rc != 0)
      throw Error(Error::Kind::config, fmt::format("gnuplot failed (exit {}) writing {}.{}", rc, stem, ext));
  }
}

}  // namespace inc::sim
