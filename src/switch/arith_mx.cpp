// The switch's MX block arithmetic (OCP Microscaling v1.0; see arith.hpp and docs/NUMERICS.md
// "MX blocks in the switch"). A block on the wire is one E8M0 scale byte followed by 32
// element codes in numerics/mx_type.hpp's storage layout (one per byte; mxfp4: two per byte,
// element 2k in the low nibble; MXFP6: four per three bytes), unpacked and packed by
// mx_type's mx_unpack_codes / mx_pack_codes. Aligning the block scales is exact in f32: each
// element is decoded as its value (at most 4 significant bits) times the block's power-of-two
// scale, so the f32 accumulators see every member's value exactly (barring f32 overflow past
// 2^128); the adds round only when a partial sum needs more than 24 bits. Re-quantising is
// mx_encode's OCP conversion (mx_encode_blocks: mx_encode_f32, the same bits, vectorised).
#include <cstdint>
#include <cstring>

#include "src/numerics/mx.hpp"
#include "src/numerics/mx_type.hpp"
#include "src/switch/arith.hpp"

namespace inc::sw {
namespace {

using proto::ElemType;

// The library's data type of a narrow MX wire type (the same block layout).
DataType mx_data_type(ElemType narrow) noexcept {
  switch (narrow) {
    case ElemType::mxe5m2: return DataType::mxfp8_e5m2;
    case ElemType::mxint8: return DataType::mxint8;
    case ElemType::mxfp4: return DataType::mxfp4;
    case ElemType::mxe2m3: return DataType::mxfp6_e2m3;
    case ElemType::mxe3m2: return DataType::mxfp6_e3m2;
    default: return DataType::mxfp8_e4m3;
  }
}

}  // namespace

void add_mx_blocks(ElemType acc_t, ElemType src_t, float* acc, const std::byte* src,
                   std::size_t blocks) noexcept {
  constexpr std::size_t K = proto::kMxBlockElems;
  if (src_t == acc_t) {  // f32 partial sums from a child switch
    add_f32(acc, src, blocks * K);
    return;
  }
  // Element values of every code and E8M0 scales, f32, exact (at most 4 significant bits).
  const DataType dt = mx_data_type(src_t);
  const auto& v = numerics::mx_element_table(numerics::mx_elem_of(dt));
  const auto& scale = numerics::mx_scale_table();
  const std::size_t bytes = proto::elem_size(src_t);
  const bool packed = bytes != 1 + K;  // fp6/fp4 codes: unpacked first
  std::uint8_t unpacked[K];
  for (std::size_t b = 0; b < blocks; ++b) {
    const auto* blk = reinterpret_cast<const std::uint8_t*>(src + b * bytes);
    const float x = scale[blk[0]];
    const std::uint8_t* codes = blk + 1;
    if (packed) {
      numerics::mx_unpack_codes(dt, blk + 1, unpacked);
      codes = unpacked;
    }
    float* a = acc + b * K;
    for (std::size_t i = 0; i < K; ++i) a[i] += v[codes[i]] * x;
  }
}

void narrow_mx_blocks(ElemType wide_t, void* cells, std::size_t blocks) noexcept {
  constexpr std::size_t K = proto::kMxBlockElems;
  const ElemType t = proto::narrow_of(wide_t);
  const DataType dt = mx_data_type(t);
  const std::size_t bytes = proto::elem_size(t);
  auto* p = static_cast<std::byte*>(cells);
  float x[K];
  for (std::size_t b = 0; b < blocks; ++b) {  // block b lands at b x bytes, below its f32 at 128 b
    std::memcpy(x, p + b * 4 * K, sizeof(x));
    numerics::mx_encode_blocks(dt, x, 1, p + b * bytes);  // mx_encode's bits, vectorised, packed
  }
}

}  // namespace inc::sw
