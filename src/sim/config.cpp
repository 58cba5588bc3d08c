#include "sim/config.hpp"

#include <cctype>
#include <cmath>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fmt/format.h>

namespace inc::sim {

std::uint64_t parse_size(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  std::string num;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.' ||
                          s[i] == 'e' || s[i] == 'E' || s[i] == '+' || s[i] == '-')) {
    // An 'E' directly followed by a letter other than a digit/sign is a unit (EB, EiB).
    if ((s[i] == 'e' || s[i] == 'E') &&
        (i + 1 >= s.size() || !(std::isdigit(static_cast<unsigned char>(s[i + 1])) ||
                                s[i + 1] == '+' || s[i + 1] == '-')))
      break;
    num.push_back(s[i++]);
  }
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  std::string unit(s.substr(i));
  while (!unit.empty() && std::isspace(static_cast<unsigned char>(unit.back()))) unit.pop_back();
  if (num.empty()) throw std::invalid_argument(fmt::format("'{}' is not a size", s));
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(num, &used);
  } catch (const std::exception&) {
    throw std::invalid_argument(fmt::format("'{}' is not a size", s));
  }
  if (used != num.size()) throw std::invalid_argument(fmt::format("'{}' is not a size", s));
  double mult = 1;
  std::string u;
  for (char c : unit) u.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (u.empty() || u == "b")
    mult = 1;
  else if (u == "k" || u == "kib")
    mult = 1024.0;
  else if (u == "m" || u == "mib")
    mult = 1024.0 * 1024;
  else if (u == "g" || u == "gib")
    mult = 1024.0 * 1024 * 1024;
  else if (u == "t" || u == "tib")
    mult = 1024.0 * 1024 * 1024 * 1024;
  else if (u == "kb")
    mult = 1e3;
  else if (u == "mb")
    mult = 1e6;
  else if (u == "gb")
    mult = 1e9;
  else if (u == "tb")
    mult = 1e12;
  else
    throw std::invalid_argument(fmt::format("'{}': unknown unit '{}' (B, KiB, MiB, GiB, KB, MB, GB)", s, unit));
  double b = v * mult;
  if (!(b >= 0) || b > 1.8e19) throw std::invalid_argument(fmt::format("'{}' is out of range", s));
  return static_cast<std::uint64_t>(std::llround(b));
}

void parse_size_or_time(std::string_view s, double& bytes, double& seconds) {
  std::string t(s);
  while (!t.empty() && std::isspace(static_cast<unsigned char>(t.back()))) t.pop_back();
  if (t.empty() || (t.back() != 's' && t.back() != 'S')) {
    bytes = static_cast<double>(parse_size(t));
    seconds = 0;
    return;
  }
  // A size never ends in 's': a time, in s, ms, us or ns.
  std::size_t end = t.size() - 1;
  double unit = 1;
  if (end > 0 && std::isalpha(static_cast<unsigned char>(t[end - 1]))) {
    const char u = static_cast<char>(std::tolower(static_cast<unsigned char>(t[end - 1])));
    unit = u == 'm' ? 1e-3 : u == 'u' ? 1e-6 : u == 'n' ? 1e-9 : 0;
    if (unit == 0) throw std::invalid_argument(fmt::format("'{}': unknown time unit (s, ms, us, ns)", s));
    --end;
  }
  std::size_t used = 0;
  double v = 0;
  try {
    v = std::stod(t.substr(0, end), &used);
  } catch (const std::exception&) {
    throw std::invalid_argument(fmt::format("'{}' is not a size or a time", s));
  }
  while (used < end && std::isspace(static_cast<unsigned char>(t[used]))) ++used;
  if (used != end || !(v >= 0) || v > 1e9) throw std::invalid_argument(fmt::format("'{}' is not a size or a time", s));
  seconds = v * unit;
  bytes = 0;
}

std::string format_size(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  if (std::fabs(bytes - std::round(bytes)) < 1e-9) return fmt::format("{:.0f} {}", bytes, units[u]);
  return fmt::format("{:.3g} {}", bytes, units[u]);
}

void config_error(const std::string& file, int line, std::string_view key, const std::string& what) {
  std::string msg = file;
  if (line > 0) msg += fmt::format(":{}", line);
  msg += ": ";
  if (!key.empty()) msg += fmt::format("key '{}': ", key);
  msg += what;
  throw Error(Error::Kind::config, msg);
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) config_error(path, 0, "", "cannot open file");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

toml::table parse_toml_file(const std::string& path) { return parse_toml_text(read_text_file(path), path); }

toml::table parse_toml_text(std::string_view text, const std::string& name) {
  try {
    return toml::parse(text, name);
  } catch (const toml::parse_error& e) {
    config_error(name, static_cast<int>(e.source().begin.line), "",
                 fmt::format("TOML syntax error: {}", e.description()));
  }
}

TableReader::TableReader(const toml::table& t, std::string file, std::string path)
    : t_(t), file_(std::move(file)), path_(std::move(path)) {}

std::string TableReader::qualified(std::string_view key) const {
  return path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key);
}

int TableReader::line_of(std::string_view key) const {
  if (const toml::node* n = t_.get(key)) return static_cast<int>(n->source().begin.line);
  return static_cast<int>(t_.source().begin.line);
}

void TableReader::fail(std::string_view key, const std::string& what) const {
  config_error(file_, line_of(key), qualified(key), what);
}

bool TableReader::has(std::string_view key) const { return t_.get(key) != nullptr; }

const toml::node* TableReader::find(std::string_view key) {
  used_.insert(std::string(key));
  return t_.get(key);
}

namespace {
bool node_number(const toml::node& n, double& out) {
  if (auto v = n.value_exact<double>()) {
    out = *v;
    return true;
  }
  if (auto v = n.value_exact<std::int64_t>()) {
    out = static_cast<double>(*v);
    return true;
  }
  return false;
}
}  // namespace

double TableReader::get_double(std::string_view key, double def, double min, double max) {
  const toml::node* n = find(key);
  if (!n) return def;
  double v = 0;
  if (!node_number(*n, v)) fail(key, "expected a number");
  if (!(v >= min) || !(v <= max))
    fail(key, max >= 1e300 ? fmt::format("{} is out of range: must be >= {}", v, min)
                           : fmt::format("{} is out of range: must be in [{}, {}]", v, min, max));
  return v;
}

double TableReader::require_double(std::string_view key, double min, double max) {
  if (!has(key)) fail(key, "missing value (required)");
  return get_double(key, 0, min, max);
}

std::int64_t TableReader::get_int(std::string_view key, std::int64_t def, std::int64_t min,
                                  std::int64_t max) {
  const toml::node* n = find(key);
  if (!n) return def;
  std::int64_t v = 0;
  if (auto i = n->value_exact<std::int64_t>()) {
    v = *i;
  } else if (auto d = n->value_exact<double>(); d && std::floor(*d) == *d && std::fabs(*d) < 9e18) {
    v = static_cast<std::int64_t>(*d);  // 1e6 written as a float
  } else {
    fail(key, "expected an integer");
  }
  if (v < min || v > max) fail(key, fmt::format("{} is out of range: must be in [{}, {}]", v, min, max));
  return v;
}

std::int64_t TableReader::require_int(std::string_view key, std::int64_t min, std::int64_t max) {
  if (!has(key)) fail(key, "missing value (required)");
  return get_int(key, 0, min, max);
}

bool TableReader::get_bool(std::string_view key, bool def) {
  const toml::node* n = find(key);
  if (!n) return def;
  auto v = n->value_exact<bool>();
  if (!v) fail(key, "expected true or false");
  return *v;
}

std::string TableReader::get_string(std::string_view key, const std::string& def,
                                    const std::vector<std::string>& allowed) {
  const toml::node* n = find(key);
  if (!n) return def;
  auto v = n->value_exact<std::string>();
  if (!v) fail(key, "expected a string");
  if (!allowed.empty()) {
    bool ok = false;
    for (const auto& a : allowed) ok = ok || a == *v;
    if (!ok) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      fail(key, fmt::format("'{}' is not one of: {}", *v, list));
    }
  }
  return *v;
}

std::string TableReader::require_string(std::string_view key, const std::vector<std::string>& allowed) {
  if (!has(key)) fail(key, "missing value (required)");
  return get_string(key, "", allowed);
}

std::uint64_t TableReader::get_size(std::string_view key, std::uint64_t def, std::uint64_t min) {
  const toml::node* n = find(key);
  if (!n) return def;
  std::uint64_t v = 0;
  if (auto s = n->value_exact<std::string>()) {
    try {
      v = parse_size(*s);
    } catch (const std::invalid_argument& e) {
      fail(key, e.what());
    }
  } else {
    double d = 0;
    if (!node_number(*n, d)) fail(key, "expected a size (bytes, or a string such as \"8GiB\")");
    if (d < 0) fail(key, fmt::format("{} is negative", d));
    v = static_cast<std::uint64_t>(std::llround(d));
  }
  if (v < min) fail(key, fmt::format("{} is out of range: must be >= {}", v, min));
  return v;
}

void TableReader::get_size_or_time(std::string_view key, double& bytes, double& seconds) {
  const toml::node* n = find(key);
  if (!n) return;
  if (auto s = n->value_exact<std::string>()) {
    try {
      parse_size_or_time(*s, bytes, seconds);
    } catch (const std::invalid_argument& e) {
      fail(key, e.what());
    }
    return;
  }
  bytes = static_cast<double>(get_size(key, 0));
  seconds = 0;
}

std::uint64_t TableReader::require_size(std::string_view key, std::uint64_t min) {
  if (!has(key)) fail(key, "missing value (required)");
  return get_size(key, 0, min);
}

std::vector<std::string> TableReader::get_string_list(std::string_view key) {
  std::vector<std::string> out;
  const toml::node* n = find(key);
  if (!n) return out;
  const toml::array* a = n->as_array();
  if (!a) fail(key, "expected an array of strings");
  for (const auto& e : *a) {
    auto s = e.value_exact<std::string>();
    if (!s) fail(key, "expected an array of strings");
    out.push_back(*s);
  }
  return out;
}

std::vector<std::int64_t> TableReader::get_int_list(std::string_view key) {
  std::vector<std::int64_t> out;
  const toml::node* n = find(key);
  if (!n) return out;
  const toml::array* a = n->as_array();
  if (!a) fail(key, "expected an array of integers");
  for (const auto& e : *a) {
    auto v = e.value_exact<std::int64_t>();
    if (!v) fail(key, "expected an array of integers");
    out.push_back(*v);
  }
  return out;
}

bool TableReader::sub(std::string_view key, const toml::table*& out) {
  const toml::node* n = find(key);
  out = nullptr;
  if (!n) return false;
  out = n->as_table();
  if (!out) fail(key, "expected a table");
  return true;
}

std::vector<const toml::table*> TableReader::sub_array(std::string_view key) {
  std::vector<const toml::table*> out;
  const toml::node* n = find(key);
  if (!n) return out;
  const toml::array* a = n->as_array();
  if (!a) fail(key, "expected an array of tables ([[" + std::string(key) + "]])");
  for (const auto& e : *a) {
    const toml::table* t = e.as_table();
    if (!t) fail(key, "expected an array of tables ([[" + std::string(key) + "]])");
    out.push_back(t);
  }
  return out;
}

void TableReader::finish() const {
  for (const auto& [k, v] : t_) {
    if (!used_.count(k.str()))
      config_error(file_, static_cast<int>(v.source().begin.line), qualified(k.str()),
                   "unknown key");
  }
}

}  // namespace inc::sim
