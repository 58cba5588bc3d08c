// The switch's MX block arithmetic (OCP Microscaling v1.0; see arith.hpp and docs/NUMERICS.md
// "MX blocks in the switch"). A block on the wire is one E8M0 scale byte followed by 32
// element codes (one per byte; mxfp4: two per byte, element 2k in the low nibble). Aligning
// the block scales is exact in f32: each element is decoded as its value (at most 4
// significant bits) times the block's power-of-two scale, so the f32 accumulators see every
// member's value exactly (barring f32 overflow past 2^128); the adds round only when a
// partial sum needs more than 24 bits. Re-quantising is mx_encode's OCP conversion
// (mx_encode_f32: the same bits, vectorised).
#include <array>
#include <cstring>

#include "src/numerics/minifloat.hpp"
#include "src/numerics/mx.hpp"
#include "src/numerics/mx_type.hpp"
#include "src/switch/arith.hpp"

namespace inc::sw {
namespace {

using proto::ElemType;

numerics::MxElem mx_elem(ElemType narrow) noexcept {
  switch (narrow) {
    case ElemType::mxe5m2: return numerics::MxElem::fp8_e5m2;
    case ElemType::mxint8: return numerics::MxElem::int8;
    case ElemType::mxfp4: return numerics::MxElem::fp4_e2m1;
    default: return numerics::MxElem::fp8_e4m3;
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
  const auto& v = numerics::mx_element_table(mx_elem(src_t));
  const auto& scale = numerics::mx_scale_table();
  const std::size_t bytes = proto::elem_size(src_t);
  for (std::size_t b = 0; b < blocks; ++b) {
    const std::byte* blk = src + b * bytes;
    const float x = scale[std::to_integer<std::size_t>(blk[0])];
    float* a = acc + b * K;
    if (src_t == ElemType::mxfp4) {
      for (std::size_t i = 0; i < K / 2; ++i) {
        const auto c = std::to_integer<unsigned>(blk[1 + i]);
        a[2 * i] += v[c & 0xf] * x;
        a[2 * i + 1] += v[c >> 4] * x;
      }
    } else {
      for (std::size_t i = 0; i < K; ++i) a[i] += v[std::to_integer<std::size_t>(blk[1 + i])] * x;
    }
  }
}

void narrow_mx_blocks(ElemType wide_t, void* cells, std::size_t blocks) noexcept {
  constexpr std::size_t K = proto::kMxBlockElems;
  const ElemType t = proto::narrow_of(wide_t);
  const std::size_t bytes = proto::elem_size(t);
  auto* p = static_cast<std::byte*>(cells);
  float x[K];
  std::uint8_t codes[K];
  for (std::size_t b = 0; b < blocks; ++b) {  // block b lands at b x bytes, below its f32 at 128 b
    std::memcpy(x, p + b * 4 * K, sizeof(x));
    std::uint8_t scale = 0;
    numerics::mx_encode_f32(mx_elem(t), x, K, K, &scale, codes);  // mx_encode's bits, vectorised
    std::byte* out = p + b * bytes;
    out[0] = std::byte(scale);
    if (t == ElemType::mxfp4) {
      for (std::size_t i = 0; i < K / 2; ++i)
        out[1 + i] = std::byte((codes[2 * i] & 0xf) | (codes[2 * i + 1] & 0xf) << 4);
    } else {
      std::memcpy(out + 1, codes, K);
    }
  }
}

}  // namespace inc::sw
