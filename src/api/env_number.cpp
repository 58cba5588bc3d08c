#include "api/env_number.hpp"

#include <fmt/format.h>

#include <charconv>

#include "inc/types.hpp"

namespace inc::api {

std::optional<std::uint64_t> parse_uint(std::string_view s, std::uint64_t lo, std::uint64_t hi) {
  // from_chars of an unsigned type takes digits only: no sign, no blank, nothing at all fails.
  std::uint64_t v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < lo || v > hi) return std::nullopt;
  return v;
}

std::optional<std::uint64_t> env_uint(const transport::EnvLookup& env, const std::string& name, std::uint64_t lo,
                                      std::uint64_t hi, std::string_view expected) {
  auto v = env(name);
  if (!v) return std::nullopt;
  auto n = parse_uint(*v, lo, hi);
  if (!n) throw Error(Error::Kind::config, fmt::format("{}='{}' {}", name, *v, expected));
  return n;
}

}  // namespace inc::api
