// OCP Microscaling block formats: encode/decode (see mx.hpp).
#include "numerics/mx.hpp"

#include <cmath>
#include <limits>

#include "numerics/fp8.hpp"

namespace inc::numerics {
namespace {

struct SmallFp {
  int ebits, mbits, bias;
};
// FP6/FP4 layouts (all codes finite).
SmallFp small_fp(MxElem e) noexcept {
  switch (e) {
    case MxElem::fp6_e2m3: return {2, 3, 1};
    case MxElem::fp6_e3m2: return {3, 2, 3};
    default: return {2, 1, 1};  // fp4_e2m1
  }
}

double small_fp_value(SmallFp f, std::uint8_t code) noexcept {
  const int sign_bit = f.ebits + f.mbits;
  const int e = (code >> f.mbits) & ((1 << f.ebits) - 1);
  const int m = code & ((1 << f.mbits) - 1);
  const double v = e == 0 ? std::ldexp(m, 1 - f.bias - f.mbits)
                          : std::ldexp(1.0 + std::ldexp(m, -f.mbits), e - f.bias);
  return (code >> sign_bit) & 1 ? -v : v;
}

template <int M, int Bias, unsigned kMaxMag, int kSignBit>
std::uint8_t small_fp_encode(double x) noexcept {  // finite x; round to nearest-even, saturate
  const std::uint64_t bits = __builtin_bit_cast(std::uint64_t, x);
  const unsigned sign = (bits >> 63) ? (1u << kSignBit) : 0u;
  const std::uint64_t m = fp8detail::round_magnitude<M, Bias>(bits & 0x7fffffffffffffffull);
  return static_cast<std::uint8_t>(sign | (m > kMaxMag ? kMaxMag : static_cast<unsigned>(m)));
}

std::uint8_t encode_element(MxElem e, double x) noexcept {  // x = V / X, finite
  switch (e) {
    case MxElem::fp8_e4m3: return f64_to_e4m3(x, Fp8Overflow::saturate);
    case MxElem::fp8_e5m2: return f64_to_e5m2(x, Fp8Overflow::saturate);
    case MxElem::fp6_e2m3: return small_fp_encode<3, 1, 0x1f, 5>(x);
    case MxElem::fp6_e3m2: return small_fp_encode<2, 3, 0x1f, 5>(x);
    case MxElem::fp4_e2m1: return small_fp_encode<1, 1, 0x7, 3>(x);
    case MxElem::int8: {
      double q = std::nearbyint(x * 64.0);  // exact product; ties to even (default rounding)
      q = q > 127 ? 127 : q < -128 ? -128 : q;
      return static_cast<std::uint8_t>(static_cast<std::int8_t>(q));
    }
  }
  return 0;
}

}  // namespace

double e8m0_to_double(std::uint8_t code) noexcept {
  return code == kE8M0NaN ? std::numeric_limits<double>::quiet_NaN() : std::ldexp(1.0, code - 127);
}

int mx_emax_elem(MxElem e) noexcept {
  switch (e) {
    case MxElem::fp8_e4m3: return 8;
    case MxElem::fp8_e5m2: return 15;
    case MxElem::fp6_e2m3: return 2;
    case MxElem::fp6_e3m2: return 4;
    case MxElem::fp4_e2m1: return 2;
    case MxElem::int8: return 0;
  }
  return 0;
}

double mx_element_value(MxElem e, std::uint8_t code) noexcept {
  switch (e) {
    case MxElem::fp8_e4m3: return e4m3_to_f32(code);
    case MxElem::fp8_e5m2: return e5m2_to_f32(code);
    case MxElem::int8: return std::ldexp(static_cast<std::int8_t>(code), -6);
    default: return small_fp_value(small_fp(e), code);
  }
}

std::uint8_t mx_block_scale(MxElem e, const float* v, std::size_t k) noexcept {
  float amax = 0;
  for (std::size_t i = 0; i < k; ++i) {
    if (!std::isfinite(v[i])) return kE8M0NaN;
    amax = std::fabs(v[i]) > amax ? std::fabs(v[i]) : amax;
  }
  return mx_scale_of_amax(e, amax);
}

std::uint8_t mx_scale_of_amax(MxElem e, float amax) noexcept {
  // shared_exp = floor(log2(amax)) - emax_elem, clamped to E8M0's [-127, 127].
  int shared = amax > 0 ? std::ilogb(amax) - mx_emax_elem(e) : -127;
  shared = shared < -127 ? -127 : shared > 127 ? 127 : shared;
  return static_cast<std::uint8_t>(shared + 127);
}

void mx_encode(MxElem e, const float* v, std::size_t n, std::size_t block, std::uint8_t* scales,
               std::uint8_t* codes) noexcept {
  if (block == 0) return;
  for (std::size_t b0 = 0, s = 0; b0 < n; b0 += block, ++s) {
    const std::size_t end = b0 + block < n ? b0 + block : n;
    scales[s] = mx_block_scale(e, v + b0, end - b0);
    if (scales[s] == kE8M0NaN) {
      for (std::size_t i = b0; i < end; ++i) codes[i] = 0;
      continue;
    }
    const int shared = scales[s] - 127;
    for (std::size_t i = b0; i < end; ++i)
      codes[i] = encode_element(e, std::ldexp(static_cast<double>(v[i]), -shared));  // exact scaling
  }
}

void mx_decode(MxElem e, const std::uint8_t* scales, const std::uint8_t* codes, std::size_t n,
               std::size_t block, double* out) noexcept {
  if (block == 0) return;
  for (std::size_t i = 0; i < n; ++i)
    out[i] = e8m0_to_double(scales[i / block]) * mx_element_value(e, codes[i]);
}

}  // namespace inc::numerics
