// Small formatting and file helpers shared by the `inc` subcommands.
#pragma once

#include <fmt/format.h>

#include <fstream>
#include <string>

#include "inc/types.hpp"

namespace inc::tools {

// A duration in seconds as "1.234 s", "12.345 ms" or "5.67 us".
inline std::string tstr(double s) {
  if (s >= 1) return fmt::format("{:.3f} s", s);
  if (s >= 1e-3) return fmt::format("{:.3f} ms", s * 1e3);
  return fmt::format("{:.2f} us", s * 1e6);
}

// Writes `text` to `path`; Error(config) naming the path if it cannot.
inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  if (!f) throw Error(Error::Kind::config, "cannot write " + path);
  f << text;
}

}  // namespace inc::tools
