// Start-up conflicts named at once (issue 10): ranks that disagree on the world size, and two
// processes given the same rank. Before, both failed only at the time-out with "ranks ... did
// not connect". Each test is its own job (see CMakeLists.txt): the last rank lies.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "inc/inc.hpp"

using namespace inc;

namespace {

int env_int(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : -1;
}

void expect_config_error(const Options& o, const std::string& words) {
  try {
    Communicator c = Communicator::init(o);
    ADD_FAILURE() << "init() succeeded (" << c.size() << " ranks)";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::config) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(StartupConflict, WorldSize) {
  const int rank = env_int("INC_RANK"), size = env_int("INC_WORLD_SIZE");
  ASSERT_GE(size, 2);
  Options o;
  o.rank = rank;
  o.world_size = rank == size - 1 ? size + 1 : size;  // the last rank says one more
  expect_config_error(o, "disagree on the world size");
}

TEST(StartupConflict, SameRank) {
  const int rank = env_int("INC_RANK"), size = env_int("INC_WORLD_SIZE");
  ASSERT_GE(size, 2);
  Options o;
  o.rank = rank == size - 1 ? size - 2 : rank;  // the last rank claims its neighbour's rank
  o.world_size = size;
  expect_config_error(o, "claimed by two processes");
}

}  // namespace
