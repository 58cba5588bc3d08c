// Whole numbers from the environment: one reading for every integer variable src/api takes
// (INC_* and the launchers' rank and size variables), so that each rejects the same things (a
// sign, blanks, a suffix, an empty value, a value past its range) and names the variable, the
// value and what it must be.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "transport/socket.hpp"

namespace inc::api {

// `s` as a decimal integer in [lo, hi]: ASCII digits only, at least one (no sign, no blanks,
// no suffix); nullopt otherwise, also for values past 2^64 - 1.
std::optional<std::uint64_t> parse_uint(std::string_view s, std::uint64_t lo, std::uint64_t hi);

// Variable `name` of `env` as such an integer: nullopt when it is unset; set to anything else
// (the empty string included) it is Error(config) "NAME='value' <expected>", e.g. with
// expected "must be an integer in [64, 2^30]".
std::optional<std::uint64_t> env_uint(const transport::EnvLookup& env, const std::string& name, std::uint64_t lo,
                                      std::uint64_t hi, std::string_view expected);

}  // namespace inc::api
