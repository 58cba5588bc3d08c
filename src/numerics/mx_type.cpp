// The MX block formats as element types: block layout, the hosts' MX kernel (see mx_type.hpp).
#include "numerics/mx_type.hpp"

#include <cmath>
#include <cstring>
#include <limits>

#include "numerics/bitpack.hpp"
#include "numerics/minifloat.hpp"

namespace inc::numerics {
namespace {

constexpr std::size_t K = kMxBlockElements;

struct Tables {
  std::array<std::array<float, 256>, 6> elem{};
  std::array<float, 256> scale{};
  Tables() {
    for (int e = 0; e < 6; ++e)
      for (int c = 0; c < 256; ++c)
        elem[std::size_t(e)][std::size_t(c)] = static_cast<float>(mx_element_value(MxElem(e), std::uint8_t(c)));
    for (int c = 0; c < 256; ++c) scale[std::size_t(c)] = static_cast<float>(e8m0_to_double(std::uint8_t(c)));
  }
};
const Tables& tables() {
  static const Tables t;
  return t;
}

// Bits per element code in the block's storage.
unsigned code_bits(DataType t) noexcept {
  return t == DataType::mxfp4 ? 4 : (t == DataType::mxfp6_e2m3 || t == DataType::mxfp6_e3m2) ? 6 : 8;
}

// The 32 codes of one block (codes one per byte, in the low bits), and back (bitpack.hpp).
void unpack_codes(DataType t, const std::uint8_t* p, std::uint8_t* codes) noexcept {
  numerics::unpack_codes(code_bits(t), p, K, codes);
}

void pack_codes(DataType t, const std::uint8_t* codes, std::uint8_t* p) noexcept {
  numerics::pack_codes(code_bits(t), codes, K, p);
}

void decode_block(DataType t, const std::uint8_t* blk, float* out) noexcept {
  const auto& T = tables();
  const auto& v = T.elem[std::size_t(mx_elem_of(t))];
  const float x = T.scale[blk[0]];
  std::uint8_t codes[K];
  unpack_codes(t, blk + 1, codes);
  for (std::size_t i = 0; i < K; ++i) out[i] = v[codes[i]] * x;
}

void encode_block(DataType t, const float* in, std::uint8_t* blk) noexcept {
  std::uint8_t codes[K];
  mx_encode_f32(mx_elem_of(t), in, K, K, blk, codes);  // the scalar encoder's bits, vectorised
  pack_codes(t, codes, blk + 1);
}

// IEEE 754-2019 maximum / minimum: NaN wins, -0 < +0.
float ieee_max(float a, float b) noexcept {
  if (a != a || b != b) return std::numeric_limits<float>::quiet_NaN();
  if (a == b) return std::signbit(a) ? b : a;
  return a > b ? a : b;
}
float ieee_min(float a, float b) noexcept {
  if (a != a || b != b) return std::numeric_limits<float>::quiet_NaN();
  if (a == b) return std::signbit(a) ? a : b;
  return a < b ? a : b;
}

}  // namespace

MxElem mx_elem_of(DataType t) noexcept {
  switch (t) {
    case DataType::mxfp8_e5m2: return MxElem::fp8_e5m2;
    case DataType::mxint8: return MxElem::int8;
    case DataType::mxfp4: return MxElem::fp4_e2m1;
    case DataType::mxfp6_e2m3: return MxElem::fp6_e2m3;
    case DataType::mxfp6_e3m2: return MxElem::fp6_e3m2;
    default: return MxElem::fp8_e4m3;
  }
}

const std::array<float, 256>& mx_element_table(MxElem e) noexcept { return tables().elem[std::size_t(e)]; }
const std::array<float, 256>& mx_scale_table() noexcept { return tables().scale; }

void mx_unpack_codes(DataType t, const std::uint8_t* packed, std::uint8_t* codes) noexcept {
  unpack_codes(t, packed, codes);
}

void mx_decode_blocks(DataType t, const void* src, std::size_t blocks, float* out) noexcept {
  const auto* p = static_cast<const std::uint8_t*>(src);
  for (std::size_t b = 0; b < blocks; ++b) decode_block(t, p + b * size_of(t), out + b * K);
}

void mx_encode_blocks(DataType t, const float* in, std::size_t blocks, void* dst) noexcept {
  auto* p = static_cast<std::uint8_t*>(dst);
  for (std::size_t b = 0; b < blocks; ++b) encode_block(t, in + b * K, p + b * size_of(t));
}

void mx_reduce(DataType t, ReduceOp op, void* dst, const void* a, const void* b, std::size_t blocks) noexcept {
  const std::size_t esz = size_of(t);
  const auto* x = static_cast<const std::uint8_t*>(a);
  const auto* y = static_cast<const std::uint8_t*>(b);
  auto* d = static_cast<std::uint8_t*>(dst);
  float u[K], v[K];
  for (std::size_t k = 0; k < blocks; ++k) {
    decode_block(t, x + k * esz, u);
    decode_block(t, y + k * esz, v);
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg:
        for (std::size_t i = 0; i < K; ++i) u[i] += v[i];
        break;
      case ReduceOp::prod:
        for (std::size_t i = 0; i < K; ++i) u[i] *= v[i];
        break;
      case ReduceOp::min:
        for (std::size_t i = 0; i < K; ++i) u[i] = ieee_min(u[i], v[i]);
        break;
      case ReduceOp::max:
        for (std::size_t i = 0; i < K; ++i) u[i] = ieee_max(u[i], v[i]);
        break;
    }
    encode_block(t, u, d + k * esz);
  }
}

void mx_divide(DataType t, void* buf, std::size_t blocks, std::uint64_t n) noexcept {
  if (n == 0) return;
  const float dd = static_cast<float>(n);
  auto* p = static_cast<std::uint8_t*>(buf);
  float u[K];
  for (std::size_t k = 0; k < blocks; ++k) {
    decode_block(t, p + k * size_of(t), u);
    for (float& x : u) x /= dd;
    encode_block(t, u, p + k * size_of(t));
  }
}

std::uint64_t mx_sum_overflows(DataType t, const void* a, const void* b, std::size_t blocks) noexcept {
  const auto* x = static_cast<const std::uint8_t*>(a);
  const auto* y = static_cast<const std::uint8_t*>(b);
  std::uint64_t ev = 0;
  float u[K], v[K];
  // Screen: a block whose values are below 2^127 (scale exponent <= 126 - emax_elem) or NaN
  // cannot give an f32 sum that overflows; only the others are decoded.
  const int top = 126 - mx_emax_elem(mx_elem_of(t)) + 127;
  auto safe = [&](std::uint8_t code) { return code == kE8M0NaN || code <= top; };
  for (std::size_t k = 0; k < blocks; ++k) {
    if (safe(x[k * size_of(t)]) && safe(y[k * size_of(t)])) continue;
    decode_block(t, x + k * size_of(t), u);
    decode_block(t, y + k * size_of(t), v);
    for (std::size_t i = 0; i < K; ++i)
      ev += std::isfinite(u[i]) && std::isfinite(v[i]) && !std::isfinite(u[i] + v[i]);
  }
  return ev;
}

std::uint64_t mx_count_nonfinite(DataType t, const void* x, std::size_t blocks) noexcept {
  const auto* p = static_cast<const std::uint8_t*>(x);
  std::uint64_t c = 0;
  float u[K];
  for (std::size_t k = 0; k < blocks; ++k) {
    decode_block(t, p + k * size_of(t), u);
    for (float f : u) c += !std::isfinite(f);
  }
  return c;
}

double mx_load(DataType t, const void* buf, std::size_t i) noexcept {
  float u[K];
  decode_block(t, static_cast<const std::uint8_t*>(buf) + (i / K) * size_of(t), u);
  return u[i % K];
}

void mx_store(DataType t, void* buf, std::size_t i, double v) noexcept {
  auto* blk = static_cast<std::uint8_t*>(buf) + (i / K) * size_of(t);
  float u[K];
  decode_block(t, blk, u);
  u[i % K] = static_cast<float>(v);
  encode_block(t, u, blk);
}

}  // namespace inc::numerics
