// Hand-made schedule ops for tests: regions of the input, output and scratch buffers, and an
// op from its kind, peer and regions. Used by the schedule tests (test_dependencies,
// test_local_executor) and the simulator's hand programs (tests/sim/hand_program.hpp).
#pragma once

#include <cstdint>

#include "coll/schedule.hpp"

namespace inc::coll::test {

inline Region in(std::uint64_t off, std::uint64_t bytes) { return {BufferId::input, off, bytes}; }
inline Region out(std::uint64_t off, std::uint64_t bytes) { return {BufferId::output, off, bytes}; }
inline Region scr(std::uint64_t off, std::uint64_t bytes) { return {BufferId::scratch, off, bytes}; }

inline Op make_op(OpKind k, int peer, Region src, Region dst) {
  Op o;
  o.kind = k;
  o.peer = peer;
  o.src = src;
  o.dst = dst;
  return o;
}
inline Op send(int peer, Region r) { return make_op(OpKind::send, peer, r, {}); }
inline Op recv(int peer, Region r) { return make_op(OpKind::recv, peer, {}, r); }

}  // namespace inc::coll::test
