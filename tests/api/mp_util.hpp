// Helpers the multi-process API tests (tests/api/mp_*.cpp, run under `inc launch`) share: the
// job's world communicator, a fresh one with its own deadline, a seeded i32 input, and the
// check that every rank holds the same bytes.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "inc/inc.hpp"

namespace inc::testing {

// The job's communicator, made by the first test that asks (INC_* from `inc launch`).
inline Communicator& world() {
  static Communicator c = Communicator::init();
  return c;
}

// A communicator of its own whose calls give up after `timeout` (Options::timeout; 10 s unless
// given).
inline Communicator fresh(std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  Options o;
  o.timeout = timeout;
  return Communicator::init(o);
}

inline bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Rank r's i-th i32 input: spread over [-10000, 10000], different on every rank, so that a sum
// of a few hundred ranks stays far from overflow.
inline std::int32_t ival(int r, std::uint64_t i) {
  return static_cast<std::int32_t>((i * 2654435761u + static_cast<std::uint64_t>(r) * 40503u) % 20001) - 10000;
}

// The same bytes on every rank: min and max over ranks of a checksum (FNV-1a) agree.
template <class T>
bool same_everywhere(Communicator& comm, const std::vector<T>& v) {
  std::uint32_t h = 2166136261u;
  const auto* b = reinterpret_cast<const unsigned char*>(v.data());
  for (std::size_t i = 0; i < v.size() * sizeof(T); ++i) h = (h ^ b[i]) * 16777619u;
  std::int64_t s = h, mn = 0, mx = 0;
  comm.allreduce(&s, &mn, 1, DataType::i64, ReduceOp::min);
  comm.allreduce(&s, &mx, 1, DataType::i64, ReduceOp::max);
  return mn == mx;
}

}  // namespace inc::testing
