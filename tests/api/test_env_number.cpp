// The one reading of integer environment variables (src/api/env_number.hpp): digits only,
// within the range, and an error naming the variable, its value and what it must be.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "api/env_number.hpp"

using namespace inc;
using api::env_uint;
using api::parse_uint;

TEST(EnvNumber, DigitsOnlyWithinTheRange) {
  EXPECT_EQ(parse_uint("64", 64, 1u << 30), 64u);
  EXPECT_EQ(parse_uint("1073741824", 64, 1u << 30), 1u << 30);
  EXPECT_EQ(parse_uint("0", 0, 0), 0u);
  EXPECT_EQ(parse_uint("007", 0, 10), 7u);
  EXPECT_EQ(parse_uint("18446744073709551615", 0, ~std::uint64_t{0}), ~std::uint64_t{0});
  // Outside the range, past 2^64 - 1.
  EXPECT_FALSE(parse_uint("63", 64, 1u << 30));
  EXPECT_FALSE(parse_uint("1073741825", 64, 1u << 30));
  EXPECT_FALSE(parse_uint("18446744073709551616", 0, ~std::uint64_t{0}));
  // Not only digits: a sign, blanks, a suffix, another base, nothing.
  for (const char* bad : {"", " 64", "64 ", "+64", "-1", "-0", "6 4", "64K", "0x40", "1e3", "\t64", "64\n"})
    EXPECT_FALSE(parse_uint(bad, 0, ~std::uint64_t{0})) << "'" << bad << "' was accepted";
}

TEST(EnvNumber, UnsetIsNoValueAndABadOneAConfigErrorNamingIt) {
  auto env = transport::map_env({{"INC_X", "4096"}, {"INC_BLANK", " 64"}, {"INC_EMPTY", ""}});
  EXPECT_EQ(env_uint(env, "INC_X", 64, 1u << 30, "must be an integer in [64, 2^30]"), 4096u);
  EXPECT_FALSE(env_uint(env, "INC_UNSET", 64, 1u << 30, "must be an integer in [64, 2^30]"));
  for (const char* name : {"INC_BLANK", "INC_EMPTY"}) {
    try {
      env_uint(env, name, 64, 1u << 30, "must be an integer in [64, 2^30]");
      ADD_FAILURE() << name << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::config);
      const std::string want = std::string(name) + "='" + *env(name) + "' must be an integer in [64, 2^30]";
      EXPECT_EQ(std::string(e.what()), want);
    }
  }
  // The range is the caller's: the same value is fine below a higher bound.
  try {
    env_uint(env, "INC_X", 1, 1024, "must be 1..1024");
    ADD_FAILURE() << "4096 accepted in [1, 1024]";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "INC_X='4096' must be 1..1024");
  }
}
