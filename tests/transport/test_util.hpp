// Helpers of the transport and launcher tests (tests/transport/, tests/testbed/
// test_launcher_netns.cpp): the check that a call throws inc::Error of a kind, and a temporary
// file for the launcher to write the children's output into, read back whole or by lines.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "inc/types.hpp"

namespace inc::testing {

// Runs f, which must throw inc::Error of `kind`; returns it.
template <class F>
Error expect_error(F&& f, Error::Kind kind) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(static_cast<int>(e.kind()), static_cast<int>(kind)) << e.what();
    return e;
  }
  ADD_FAILURE() << "expected an inc::Error";
  return Error(Error::Kind::internal, "no error thrown");
}

class Capture {
 public:
  Capture() : f_(std::tmpfile()) {}
  ~Capture() { std::fclose(f_); }
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;
  int fd() const { return fileno(f_); }
  std::string text() const {
    std::string s;
    char buf[4096];
    for (off_t off = 0;;) {
      ssize_t n = ::pread(fd(), buf, sizeof buf, off);
      if (n <= 0) break;
      s.append(buf, static_cast<std::size_t>(n));
      off += n;
    }
    return s;
  }
  std::vector<std::string> lines() const {
    std::vector<std::string> out;
    std::istringstream in(text());
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
  }

 private:
  std::FILE* f_;
};

}  // namespace inc::testing
