// Internal to src/numerics: the element-wise reduction loops, written once and compiled once
// per instruction set by the kernel files (reduce.cpp: baseline x86-64/any CPU;
// reduce_x86_64_v3.cpp: -march=x86-64-v3, i.e. AVX2 + F16C). Each loop is a plain loop over
// typed pointers that GCC 12 vectorises at -O3.
//
// ODR safety: everything here has internal linkage (anonymous namespace) and calls only
// always_inline functions and compiler builtins (no std:: function templates, which at -O0
// would be out-of-line COMDAT copies). Otherwise the linker could keep the AVX2-compiled copy
// of some inline function and run it from baseline code on a CPU without AVX2.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "inc/types.hpp"
#include "numerics/fp8.hpp"
#include "numerics/half.hpp"
#include "numerics/int4.hpp"

namespace inc::numerics {
namespace {
namespace kern {

template <class U>
[[gnu::always_inline]] inline U select(bool c, U a, U b) noexcept {
  const U m = static_cast<U>(U{0} - static_cast<U>(c));
  return static_cast<U>((a & m) | (b & ~m));
}

template <class F>
using FloatBits = std::conditional_t<sizeof(F) == 8, std::uint64_t, std::uint32_t>;

// ---- operations on one element ------------------------------------------------------------

struct Sum {
  template <class T>
  [[gnu::always_inline]] static T apply(T a, T b) noexcept {
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    } else {
      return a + b;
    }
  }
};

struct Prod {
  template <class T>
  [[gnu::always_inline]] static T apply(T a, T b) noexcept {
    if constexpr (std::is_integral_v<T>) {
      // Unsigned, and at least unsigned int so that u8/i8 do not promote to signed int.
      using U = std::common_type_t<std::make_unsigned_t<T>, unsigned>;
      return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
    } else {
      return a * b;
    }
  }
};

// Floating-point min/max are IEEE 754-2019 minimum/maximum: a NaN operand gives a quiet NaN,
// and -0 < +0. Both make the operation commutative, so the result of a reduction does not
// depend on the order in which ranks or switch ports are combined (NaN payloads aside).
// Written with bit selects: with ?: on floats GCC turns the NaN arm into a branch it cannot
// vectorise (the addition may trap).
struct Max {
  template <class T>
  [[gnu::always_inline]] static T apply(T a, T b) noexcept {
    if constexpr (std::is_integral_v<T>) {
      return a > b ? a : b;
    } else {
      using U = FloatBits<T>;
      const U ua = __builtin_bit_cast(U, a);
      const U ub = __builtin_bit_cast(U, b);
      const U un = __builtin_bit_cast(U, a + b);  // a quiet NaN when a or b is NaN
      U m = select<U>(a > b, ua, ub);
      m = select<U>(a == b, ua & ub, m);  // +0 and -0: the sign bit clear wins
      m = select<U>((a != a) | (b != b), un, m);
      return __builtin_bit_cast(T, m);
    }
  }
};

struct Min {
  template <class T>
  [[gnu::always_inline]] static T apply(T a, T b) noexcept {
    if constexpr (std::is_integral_v<T>) {
      return a < b ? a : b;
    } else {
      using U = FloatBits<T>;
      const U ua = __builtin_bit_cast(U, a);
      const U ub = __builtin_bit_cast(U, b);
      const U un = __builtin_bit_cast(U, a + b);
      U m = select<U>(a < b, ua, ub);
      m = select<U>(a == b, ua | ub, m);  // +0 and -0: the sign bit set wins
      m = select<U>((a != a) | (b != b), un, m);
      return __builtin_bit_cast(T, m);
    }
  }
};

// ---- 16-bit floats --------------------------------------------------------------------------

// Arithmetic (sum/prod/avg): widen to f32, combine, round once. By Figueroa's theorem
// (24 >= 2p + 2 for p = 11 and p = 8) this equals the correctly rounded f16/bf16 result.
struct F16Soft {
  [[gnu::always_inline]] static float widen(std::uint16_t h) noexcept { return f16_to_f32(h); }
  [[gnu::always_inline]] static std::uint16_t narrow(float f) noexcept { return f32_to_f16(f); }
};
struct BF16Soft {
  // No NaN quietening here (unlike bf16_to_f32): the widened value only feeds an f32 add or
  // multiply, which quietens a signalling NaN itself.
  [[gnu::always_inline]] static float widen(std::uint16_t h) noexcept {
    return __builtin_bit_cast(float, static_cast<std::uint32_t>(h) << 16);
  }
  [[gnu::always_inline]] static std::uint16_t narrow(float f) noexcept { return f32_to_bf16(f); }
};

// min/max need no arithmetic: the result is one of the inputs, so they work on the bit
// patterns as 16-bit integers (8 or 16 per vector, no conversion). Mapping negative patterns
// h -> h ^ 0x7fff makes signed integer order equal to the float order with -0 < +0; NaN
// (|h| > exponent mask) wins and is quietened, as in the f32 path.
template <std::int16_t kInf, std::uint16_t kQuiet, bool kMax>
struct HalfMinMax {
  [[gnu::always_inline]] static std::int16_t key(std::uint16_t h) noexcept {
    const auto s = static_cast<std::int16_t>(h);
    return static_cast<std::int16_t>(s ^ ((s >> 15) & 0x7fff));
  }
  [[gnu::always_inline]] static std::uint16_t apply(std::uint16_t a, std::uint16_t b) noexcept {
    const std::int16_t ka = key(a);
    const std::int16_t kb = key(b);
    const std::int16_t k = kMax ? (ka > kb ? ka : kb) : (ka < kb ? ka : kb);
    auto r = static_cast<std::uint16_t>(k ^ ((k >> 15) & 0x7fff));  // key is an involution
    r = static_cast<std::int16_t>(b & 0x7fff) > kInf ? static_cast<std::uint16_t>(b | kQuiet) : r;
    r = static_cast<std::int16_t>(a & 0x7fff) > kInf ? static_cast<std::uint16_t>(a | kQuiet) : r;
    return r;
  }
};

// ---- loops ----------------------------------------------------------------------------------

// No restrict: GCC's runtime overlap check accepts distance 0, so in-place calls
// (dst == a or dst == b) take the vector path too.
template <class T, class Op>
void combine(void* dst, const void* a, const void* b, std::size_t n) noexcept {
  auto* d = static_cast<T*>(dst);
  const auto* x = static_cast<const T*>(a);
  const auto* y = static_cast<const T*>(b);
  for (std::size_t i = 0; i < n; ++i) d[i] = Op::apply(x[i], y[i]);
}

// 16-bit floats combined in f32. The loop reads and writes pairs of elements as one 32-bit
// word and widens the low and high halves separately: every vector operation then works on
// 32-bit lanes, with no 16 <-> 32-bit unpacking and packing (costly before AVX2, and still
// several shuffles with it). Bit-identical to the one-element loop kept for the tail.
template <class H, class Op>
[[gnu::always_inline]] inline std::uint16_t combine_one(std::uint16_t x, std::uint16_t y) noexcept {
  return H::narrow(Op::apply(H::widen(x), H::widen(y)));
}

template <class H, class Op>
void combine_widened(void* dst, const void* a, const void* b, std::size_t n) noexcept {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* x = static_cast<const unsigned char*>(a);
  const auto* y = static_cast<const unsigned char*>(b);
  const std::size_t pairs = n / 2;
  for (std::size_t i = 0; i < pairs; ++i) {
    std::uint32_t wx, wy;
    __builtin_memcpy(&wx, x + 4 * i, 4);
    __builtin_memcpy(&wy, y + 4 * i, 4);
    // Element 2i is the low half on little-endian machines, the high half on big-endian ones;
    // the operation is the same on both halves, so the order does not matter.
    const std::uint32_t lo = combine_one<H, Op>(static_cast<std::uint16_t>(wx),
                                                static_cast<std::uint16_t>(wy));
    const std::uint32_t hi = combine_one<H, Op>(static_cast<std::uint16_t>(wx >> 16),
                                                static_cast<std::uint16_t>(wy >> 16));
    const std::uint32_t w = lo | (hi << 16);
    __builtin_memcpy(d + 4 * i, &w, 4);
  }
  if (n % 2 != 0) {
    std::uint16_t hx, hy;
    __builtin_memcpy(&hx, x + 2 * (n - 1), 2);
    __builtin_memcpy(&hy, y + 2 * (n - 1), 2);
    const std::uint16_t h = combine_one<H, Op>(hx, hy);
    __builtin_memcpy(d + 2 * (n - 1), &h, 2);
  }
}

// ---- 8- and 4-bit types ---------------------------------------------------------------------

// OCP fp8: widen both operands to f32 (exact), combine in f32, round once to nearest-even
// (non-saturating: an overflow gives E5M2 infinity / E4M3 NaN). As for 16-bit floats, one
// step's result is the correctly rounded fp8 value (24 >= 2p + 2 for p = 4 and 3).
struct E4M3 {
  [[gnu::always_inline]] static float widen(std::uint8_t b) noexcept { return e4m3_to_f32(b); }
  [[gnu::always_inline]] static std::uint8_t narrow(float f) noexcept { return f32_to_e4m3(f); }
};
struct E5M2 {
  [[gnu::always_inline]] static float widen(std::uint8_t b) noexcept { return e5m2_to_f32(b); }
  [[gnu::always_inline]] static std::uint8_t narrow(float f) noexcept { return f32_to_e5m2(f); }
};

template <class H, class Op>
void combine_fp8(void* dst, const void* a, const void* b, std::size_t n) noexcept {
  auto* d = static_cast<std::uint8_t*>(dst);
  const auto* x = static_cast<const std::uint8_t*>(a);
  const auto* y = static_cast<const std::uint8_t*>(b);
  for (std::size_t i = 0; i < n; ++i) d[i] = H::narrow(Op::apply(H::widen(x[i]), H::widen(y[i])));
}

// i4: n bytes, two elements each; every nibble combined as an int and wrapped modulo 16.
template <class Op>
void combine_i4(void* dst, const void* a, const void* b, std::size_t n) noexcept {
  auto* d = static_cast<std::uint8_t*>(dst);
  const auto* x = static_cast<const std::uint8_t*>(a);
  const auto* y = static_cast<const std::uint8_t*>(b);
  for (std::size_t i = 0; i < n; ++i) {
    const int lo = Op::apply(i4_get(x[i], 0), i4_get(y[i], 0));
    const int hi = Op::apply(i4_get(x[i], 1), i4_get(y[i], 1));
    d[i] = i4_set(i4_set(0, 0, lo), 1, hi);
  }
}

template <class Op, class F16, class BF16>
void reduce_typed(DataType t, void* dst, const void* a, const void* b, std::size_t n) noexcept {
  switch (t) {
    case DataType::f64: return combine<double, Op>(dst, a, b, n);
    case DataType::f32: return combine<float, Op>(dst, a, b, n);
    case DataType::f16: return combine_widened<F16, Op>(dst, a, b, n);
    case DataType::bf16: return combine_widened<BF16, Op>(dst, a, b, n);
    case DataType::i8: return combine<std::int8_t, Op>(dst, a, b, n);
    case DataType::u8: return combine<std::uint8_t, Op>(dst, a, b, n);
    case DataType::i32: return combine<std::int32_t, Op>(dst, a, b, n);
    case DataType::u32: return combine<std::uint32_t, Op>(dst, a, b, n);
    case DataType::i64: return combine<std::int64_t, Op>(dst, a, b, n);
    case DataType::u64: return combine<std::uint64_t, Op>(dst, a, b, n);
    case DataType::e4m3: return combine_fp8<E4M3, Op>(dst, a, b, n);
    case DataType::e5m2: return combine_fp8<E5M2, Op>(dst, a, b, n);
    case DataType::i4: return combine_i4<Op>(dst, a, b, n);
    case DataType::mxfp8_e4m3: case DataType::mxfp8_e5m2: case DataType::mxint8: case DataType::mxfp4:
    case DataType::mxfp6_e2m3: case DataType::mxfp6_e3m2: return;  // MX: reduce()/divide() call mx_type.cpp first
  }
}

template <class Op, class F16Op, class BF16Op>
void reduce_minmax(DataType t, void* dst, const void* a, const void* b, std::size_t n) noexcept {
  switch (t) {
    case DataType::f16: return combine<std::uint16_t, F16Op>(dst, a, b, n);
    case DataType::bf16: return combine<std::uint16_t, BF16Op>(dst, a, b, n);
    default: return reduce_typed<Op, F16Soft, BF16Soft>(t, dst, a, b, n);
  }
}

// The whole of reduce() for one instruction set; F16 says how f16 is widened and narrowed.
template <class F16>
void reduce_all(DataType t, ReduceOp op, void* dst, const void* a, const void* b,
                std::size_t n) noexcept {
  using F16Max = HalfMinMax<0x7c00, 0x0200, true>;
  using F16Min = HalfMinMax<0x7c00, 0x0200, false>;
  using BF16Max = HalfMinMax<0x7f80, 0x0040, true>;
  using BF16Min = HalfMinMax<0x7f80, 0x0040, false>;
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return reduce_typed<Sum, F16, BF16Soft>(t, dst, a, b, n);
    case ReduceOp::prod: return reduce_typed<Prod, F16, BF16Soft>(t, dst, a, b, n);
    case ReduceOp::min: return reduce_minmax<Min, F16Min, BF16Min>(t, dst, a, b, n);
    case ReduceOp::max: return reduce_minmax<Max, F16Max, BF16Max>(t, dst, a, b, n);
  }
}

// ---- divide (the finalisation of avg) ------------------------------------------------------

// x / d for 16-bit floats, in f32 and rounded once; pairs of elements as in combine_widened.
// Correctly rounded for divisors exactly representable in f32 with at most 11 significant bits
// (double rounding is innocuous when 24 >= 2p + 2); larger divisors may differ by an ulp.
template <class H>
void divide_widened(void* buf, std::size_t n, float d) noexcept {
  auto* p = static_cast<unsigned char*>(buf);
  const std::size_t pairs = n / 2;
  for (std::size_t i = 0; i < pairs; ++i) {
    std::uint32_t w;
    __builtin_memcpy(&w, p + 4 * i, 4);
    const std::uint32_t lo = H::narrow(H::widen(static_cast<std::uint16_t>(w)) / d);
    const std::uint32_t hi = H::narrow(H::widen(static_cast<std::uint16_t>(w >> 16)) / d);
    w = lo | (hi << 16);
    __builtin_memcpy(p + 4 * i, &w, 4);
  }
  if (n % 2 != 0) {
    std::uint16_t h;
    __builtin_memcpy(&h, p + 2 * (n - 1), 2);
    h = H::narrow(H::widen(h) / d);
    __builtin_memcpy(p + 2 * (n - 1), &h, 2);
  }
}

template <class F>
void divide_float(void* buf, std::size_t n, std::uint64_t d) noexcept {
  auto* p = static_cast<F*>(buf);
  const F fd = static_cast<F>(d);
  for (std::size_t i = 0; i < n; ++i) p[i] = p[i] / fd;
}

// Integers that fit in int32 (i8, u8, i32): truncate(double(x) / double(d)) equals the integer quotient
// (|x| < 2^31: the rounded quotient never reaches the next integer, whose distance is at
// least 1/d while half an ulp of the quotient is below 2^-21/d), and it vectorises, which
// integer division does not. A divisor beyond 2^53 is inexact in double but every quotient
// is then 0 anyway.
template <class T>
void divide_small_int(void* buf, std::size_t n, std::uint64_t d) noexcept {
  auto* p = static_cast<T*>(buf);
  const double dd = static_cast<double>(d);
  for (std::size_t i = 0; i < n; ++i)
    p[i] = static_cast<T>(static_cast<std::int32_t>(static_cast<double>(p[i]) / dd));
}

template <class T>
void divide_int(void* buf, std::size_t n, std::uint64_t d) noexcept {
  auto* p = static_cast<T*>(buf);
  if constexpr (std::is_signed_v<T>) {
    if (d > 0x7fffffffffffffffull) {  // |x| <= 2^63 < d: every quotient truncates to 0
      for (std::size_t i = 0; i < n; ++i) p[i] = 0;
      return;
    }
    const auto sd = static_cast<std::int64_t>(d);
    for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<T>(static_cast<std::int64_t>(p[i]) / sd);
  } else {
    for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<T>(static_cast<std::uint64_t>(p[i]) / d);
  }
}

template <class H>
void divide_fp8(void* buf, std::size_t n, float d) noexcept {
  auto* p = static_cast<std::uint8_t*>(buf);
  for (std::size_t i = 0; i < n; ++i) p[i] = H::narrow(H::widen(p[i]) / d);
}

// n bytes of i4; each nibble truncated toward zero (a divisor >= 16 gives 0 everywhere).
inline void divide_i4(void* buf, std::size_t n, std::uint64_t d) noexcept {
  auto* p = static_cast<std::uint8_t*>(buf);
  const int dd = d >= 16 ? 16 : static_cast<int>(d);
  for (std::size_t i = 0; i < n; ++i)
    p[i] = i4_set(i4_set(0, 0, i4_get(p[i], 0) / dd), 1, i4_get(p[i], 1) / dd);
}

// The whole of divide() for one instruction set (d >= 1, n >= 1).
template <class F16>
void divide_all(DataType t, void* buf, std::size_t n, std::uint64_t d) noexcept {
  switch (t) {
    case DataType::f64: return divide_float<double>(buf, n, d);
    case DataType::f32: return divide_float<float>(buf, n, d);
    case DataType::f16: return divide_widened<F16>(buf, n, static_cast<float>(d));
    case DataType::bf16: return divide_widened<BF16Soft>(buf, n, static_cast<float>(d));
    case DataType::i8: return divide_small_int<std::int8_t>(buf, n, d);
    case DataType::u8: return divide_small_int<std::uint8_t>(buf, n, d);
    case DataType::i32: return divide_small_int<std::int32_t>(buf, n, d);
    case DataType::u32: return divide_int<std::uint32_t>(buf, n, d);
    case DataType::i64: return divide_int<std::int64_t>(buf, n, d);
    case DataType::u64: return divide_int<std::uint64_t>(buf, n, d);
    case DataType::e4m3: return divide_fp8<E4M3>(buf, n, static_cast<float>(d));
    case DataType::e5m2: return divide_fp8<E5M2>(buf, n, static_cast<float>(d));
    case DataType::i4: return divide_i4(buf, n, d);
    case DataType::mxfp8_e4m3: case DataType::mxfp8_e5m2: case DataType::mxint8: case DataType::mxfp4:
    case DataType::mxfp6_e2m3: case DataType::mxfp6_e3m2: return;  // MX: reduce()/divide() call mx_type.cpp first
  }
}

}  // namespace kern
}  // namespace
}  // namespace inc::numerics
