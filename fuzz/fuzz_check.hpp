// Invariants shared by the parser fuzz targets: a parser of untrusted text either succeeds or
// throws the project's documented error, inc::Error of kind `config`, with a message. Anything
// else (another exception type or kind, an empty message, a crash) is a finding and aborts
// with what was seen, so that libFuzzer and the plain driver both report it.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <string_view>

#include "inc/types.hpp"

namespace inc::fuzz {

[[noreturn]] inline void fail(const char* what, std::string_view detail = {}) {
  std::fprintf(stderr, "fuzz invariant failed: %s%s%.*s\n", what, detail.empty() ? "" : ": ",
               static_cast<int>(detail.size()), detail.data());
  std::abort();
}

// Runs `f`; true if it returned, false if it threw inc::Error(config) with a message.
template <class F>
bool parses(F&& f) {
  try {
    f();
    return true;
  } catch (const inc::Error& e) {
    if (e.kind() != inc::Error::Kind::config) fail("inc::Error of a kind other than config", e.what());
    if (std::string_view(e.what()).empty()) fail("inc::Error(config) without a message");
    return false;
  } catch (const std::exception& e) {
    fail("exception other than inc::Error", e.what());
  } catch (...) {
    fail("non-standard exception");
  }
}

inline std::string_view text_of(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

}  // namespace inc::fuzz
