// Helpers shared by the worker's translation units (not part of its interface).
#pragma once

#include <cstddef>

#include "src/proto/packet.hpp"
#include "src/switch/worker.hpp"

namespace inc::sw::detail {

inline constexpr std::uint32_t kInitialWindow = 16;  // chunks (TCP's IW10 is in 1.5 KB packets)
inline constexpr std::uint32_t kMaxBurst = 16;       // new chunks sent per event

using proto::ElemType;
using proto::WireOp;

inline ElemType wire_elem(NumKind k) {
  switch (k) {
    case NumKind::i32:
    case NumKind::fx32: return ElemType::i32;
    case NumKind::f32: return ElemType::f32;
    case NumKind::raw: return ElemType::raw;
    case NumKind::f16:
    case NumKind::f16_widen: return ElemType::f16;
    case NumKind::bf16:
    case NumKind::bf16_widen: return ElemType::bf16;
    case NumKind::i8:
    case NumKind::i8_widen: return ElemType::i8;
    case NumKind::u8:
    case NumKind::u8_widen: return ElemType::u8;
    case NumKind::e4m3:
    case NumKind::e4m3_widen: return ElemType::e4m3;
    case NumKind::e5m2:
    case NumKind::e5m2_widen: return ElemType::e5m2;
    case NumKind::i4:
    case NumKind::i4_widen: return ElemType::i4;
    case NumKind::mxe4m3:
    case NumKind::mxe4m3_widen: return ElemType::mxe4m3;
    case NumKind::mxe5m2:
    case NumKind::mxe5m2_widen: return ElemType::mxe5m2;
    case NumKind::mxint8:
    case NumKind::mxint8_widen: return ElemType::mxint8;
    case NumKind::mxfp4:
    case NumKind::mxfp4_widen: return ElemType::mxfp4;
    case NumKind::mxe2m3:
    case NumKind::mxe2m3_widen: return ElemType::mxe2m3;
    case NumKind::mxe3m2:
    case NumKind::mxe3m2_widen: return ElemType::mxe3m2;
  }
  return ElemType::none;
}

inline WireOp wire_op(NumKind k, ReduceKind op, bool exponent) {
  if (k == NumKind::raw) return WireOp::copy;
  if (k == NumKind::fx32) return exponent ? WireOp::max : WireOp::sum;
  if (WorkerOp::widens(k)) return WireOp::sum_widen;
  switch (op) {
    case ReduceKind::sum: return WireOp::sum;
    case ReduceKind::max: return WireOp::max;
    case ReduceKind::min: return WireOp::min;
  }
  return WireOp::none;
}

// `retransmit`: not a first transmission (data sent again, or a probe); `probe`: a header-only
// probe (counted apart). Both kinds' bytes are in `bytes_resent` as well as in `bytes_sent`.
inline void count_tx(OpReport& r, std::size_t bytes, bool retransmit, bool probe = false) {
  ++r.packets_sent;
  r.bytes_sent += bytes;
  if (retransmit || probe) r.bytes_resent += bytes;
  if (probe) ++r.probes;
  else if (retransmit) ++r.retransmissions;
}

inline void count_rx(OpReport& r, std::size_t bytes) {
  ++r.packets_received;
  r.bytes_received += bytes;
}

}  // namespace inc::sw::detail
