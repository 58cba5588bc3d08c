// Reading TOML files (model descriptions, simulator scenarios) strictly: every key must be known,
// required keys must be present, numbers must be in range. Errors are inc::Error(config) whose
// message names the file, the line and the key: "models/x.toml:12: key 'link_gbps': must be > 0".
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <toml++/toml.h>

#include "inc/types.hpp"


namespace inc::sim {

// Parses "8GiB", "512 KiB", "1.5e9", "4MB", "100" (bytes). Throws std::invalid_argument.
std::uint64_t parse_size(std::string_view s);
// A byte count as parse_size, or a time ("1ms", "500us", "0.004s"): sets one of `bytes` and
// `seconds`, zeroes the other. Throws std::invalid_argument.
void parse_size_or_time(std::string_view s, double& bytes, double& seconds);
// Human-readable size: 8 GiB, 256 KiB, 100 B.
std::string format_size(double bytes);

[[noreturn]] void config_error(const std::string& file, int line, std::string_view key,
                               const std::string& what);

// A view of one TOML table that records which keys were read; `finish()` rejects the rest.
class TableReader {
 public:
  TableReader(const toml::table& t, std::string file, std::string path);

  bool has(std::string_view key) const;
  double get_double(std::string_view key, double def, double min, double max);
  double require_double(std::string_view key, double min, double max);
  std::int64_t get_int(std::string_view key, std::int64_t def, std::int64_t min, std::int64_t max);
  std::int64_t require_int(std::string_view key, std::int64_t min, std::int64_t max);
  bool get_bool(std::string_view key, bool def);
  std::string get_string(std::string_view key, const std::string& def,
                         const std::vector<std::string>& allowed = {});
  std::string require_string(std::string_view key, const std::vector<std::string>& allowed = {});
  // Integer byte count or a string with a unit ("8GiB").
  std::uint64_t get_size(std::string_view key, std::uint64_t def, std::uint64_t min = 0);
  std::uint64_t require_size(std::string_view key, std::uint64_t min = 0);
  // A size (integer bytes or "128KiB") or a time ("1ms"): parse_size_or_time.
  void get_size_or_time(std::string_view key, double& bytes, double& seconds);
  std::vector<std::string> get_string_list(std::string_view key);
  std::vector<std::int64_t> get_int_list(std::string_view key);
  // Sub-table (nullptr-safe: returns false if absent).
  bool sub(std::string_view key, const toml::table*& out);
  // Array of tables ([[job]]); empty if absent.
  std::vector<const toml::table*> sub_array(std::string_view key);

  // Throws for the first key that was never read.
  void finish() const;

  [[noreturn]] void fail(std::string_view key, const std::string& what) const;
  int line_of(std::string_view key) const;
  const std::string& file() const { return file_; }
  std::string qualified(std::string_view key) const;

 private:
  const toml::node* find(std::string_view key);
  const toml::table& t_;
  std::string file_;
  std::string path_;  // dotted path of this table, for messages ("network", "job[2]")
  std::set<std::string, std::less<>> used_;
};

// Reads a file; a missing file is a config error naming it.
std::string read_text_file(const std::string& path);
// Parses a whole file; a missing file or a syntax error becomes a config error with the line.
toml::table parse_toml_file(const std::string& path);
// Same, from text (tests); `name` stands for the file name in messages.
toml::table parse_toml_text(std::string_view text, const std::string& name);

}  // namespace inc::sim
