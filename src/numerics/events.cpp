// Overflow counts of sums (events.hpp). Plain loops over typed elements; the counters are
// per block so that GCC vectorises the compare-and-add.
#include "numerics/events.hpp"

#include <cstring>
#include <type_traits>

#include "numerics/fp8.hpp"
#include "numerics/half.hpp"
#include "numerics/int4.hpp"
#include "numerics/kernel_isa.hpp"
#include "numerics/reduce.hpp"
#include "numerics/mx_type.hpp"

namespace inc::numerics {

namespace {

template <class T>
std::uint64_t int_overflows(const void* pa, const void* pb, std::size_t n) noexcept {
  using U = std::make_unsigned_t<T>;
  const auto* a = static_cast<const unsigned char*>(pa);  // may be unaligned (packet payloads)
  const auto* b = static_cast<const unsigned char*>(pb);
  std::uint64_t ev = 0;
  for (std::size_t i = 0; i < n; ++i) {
    U x, y;
    std::memcpy(&x, a + sizeof(U) * i, sizeof(U));
    std::memcpy(&y, b + sizeof(U) * i, sizeof(U));
    const U r = static_cast<U>(x + y);
    if constexpr (std::is_signed_v<T>) {
      // a and b share a sign that r does not
      ev += static_cast<U>((x ^ r) & (y ^ r)) >> (8 * sizeof(U) - 1);
    } else {
      ev += r < x;
    }
  }
  return ev;
}

template <class F>
std::uint64_t float_overflows(const void* pa, const void* pb, std::size_t n) noexcept {
  const auto* a = static_cast<const unsigned char*>(pa);
  const auto* b = static_cast<const unsigned char*>(pb);
  constexpr F kMax = sizeof(F) == 8 ? F(1.7976931348623157e308) : F(3.40282347e38f);
  std::uint64_t ev = 0;
  for (std::size_t i = 0; i < n; ++i) {
    F x, y;
    std::memcpy(&x, a + sizeof(F) * i, sizeof(F));
    std::memcpy(&y, b + sizeof(F) * i, sizeof(F));
    const F r = x + y;
    // |x|, |y| <= max (finite, not NaN) and |r| > max (infinite)
    const F ax = x < 0 ? -x : x, ay = y < 0 ? -y : y, ar = r < 0 ? -r : r;
    ev += (ax <= kMax) & (ay <= kMax) & (ar > kMax);
  }
  return ev;
}

// 16-bit floats: the hosts' step (widen, add in f32, round once) and its overflow.
template <bool kF16>
std::uint64_t half_overflows(const void* pa, const void* pb, std::size_t n) noexcept {
  const auto* a = static_cast<const unsigned char*>(pa);
  const auto* b = static_cast<const unsigned char*>(pb);
  constexpr std::uint32_t kInf = kF16 ? 0x7c00u : 0x7f80u;
  std::uint64_t ev = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint16_t x, y;
    std::memcpy(&x, a + 2 * i, 2);
    std::memcpy(&y, b + 2 * i, 2);
    const float s = kF16 ? f16_to_f32(x) + f16_to_f32(y) : bf16_to_f32(x) + bf16_to_f32(y);
    const std::uint32_t r = kF16 ? f32_to_f16(s) : f32_to_bf16(s);
    ev += ((x & 0x7fffu) < kInf) & ((y & 0x7fffu) < kInf) & ((r & 0x7fffu) >= kInf);
  }
  return ev;
}

template <bool kE4M3>
std::uint64_t fp8_overflows(const void* pa, const void* pb, std::size_t n) noexcept {
  const auto* a = static_cast<const std::uint8_t*>(pa);
  const auto* b = static_cast<const std::uint8_t*>(pb);
  // Non-finite patterns: e4m3 has only NaN (0x7f); e5m2 infinities and NaNs (>= 0x7c).
  constexpr unsigned kFirst = kE4M3 ? 0x7fu : 0x7cu;
  std::uint64_t ev = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const float s = kE4M3 ? e4m3_to_f32(a[i]) + e4m3_to_f32(b[i]) : e5m2_to_f32(a[i]) + e5m2_to_f32(b[i]);
    const unsigned r = kE4M3 ? f32_to_e4m3(s) : f32_to_e5m2(s);
    ev += ((a[i] & 0x7fu) < kFirst) & ((b[i] & 0x7fu) < kFirst) & ((r & 0x7fu) >= kFirst);
  }
  return ev;
}

std::uint64_t i4_overflows(const void* pa, const void* pb, std::size_t n) noexcept {
  const auto* a = static_cast<const std::uint8_t*>(pa);
  const auto* b = static_cast<const std::uint8_t*>(pb);
  std::uint64_t ev = 0;
  for (std::size_t i = 0; i < n; ++i)
    for (unsigned h = 0; h < 2; ++h) {
      const int s = i4_get(a[i], h) + i4_get(b[i], h);
      ev += (s < -8) | (s > 7);
    }
  return ev;
}

// A cheap screen first (a read of the operands' bit patterns, vectorised): an add can only
// overflow where an operand is near the top of the range, i.e. has (bits & mask) >= thr:
// floats: |x| >= half the overflow threshold (or inf/NaN); signed integers: |x| >= 2^(bits-2)
// (the top two bits differ: mask/thr pick that); unsigned: the top bit set. Operands below it
// cannot overflow, so the exact count (above) runs only where the screen fires.
template <class U, bool kSigned, U kMask, U kThr>
[[gnu::always_inline]] inline bool may_overflow(const void* pa, const void* pb, std::size_t n) noexcept {
  const auto* a = static_cast<const unsigned char*>(pa);
  const auto* b = static_cast<const unsigned char*>(pb);
  // A max (floats: thr below mask) or an OR (integers: mask = thr = the top bit) over both
  // operands, compared once at the end: no branch or compare per element, so it vectorises.
  U top = 0;
  for (std::size_t i = 0; i < n; ++i) {
    U x, y;
    std::memcpy(&x, a + sizeof(U) * i, sizeof(U));
    std::memcpy(&y, b + sizeof(U) * i, sizeof(U));
    if constexpr (kSigned) {  // top two bits differ
      x = static_cast<U>(x ^ static_cast<U>(x << 1));
      y = static_cast<U>(y ^ static_cast<U>(y << 1));
    }
    x = static_cast<U>(x & kMask);
    y = static_cast<U>(y & kMask);
    if constexpr (kMask == kThr) {
      top = static_cast<U>(top | x | y);
    } else {
      top = x > top ? x : top;
      top = y > top ? y : top;
    }
  }
  return top >= kThr;
}

// Cloned for AVX2 (chosen at load time by the CPU, as the kernels' dispatch does): the screen
// is a pass over both operands beside the kernel's own, so it must run at the kernel's width.
[[gnu::target_clones("avx2", "default")]] bool screen(DataType t, const void* a, const void* b,
                                                       std::size_t n) noexcept {
  switch (t) {
    case DataType::f64: return may_overflow<std::uint64_t, false, 0x7fffffffffffffffull, 0x7fe0000000000000ull>(a, b, n);
    case DataType::f32: return may_overflow<std::uint32_t, false, 0x7fffffffu, 0x7f000000u>(a, b, n);  // 2^127
    case DataType::f16: return may_overflow<std::uint16_t, false, 0x7fff, 0x7800>(a, b, n);  // 32768
    case DataType::bf16: return may_overflow<std::uint16_t, false, 0x7fff, 0x7f00>(a, b, n);  // 2^127
    case DataType::i8: return may_overflow<std::uint8_t, true, 0x80, 0x80>(a, b, n);
    case DataType::u8: return may_overflow<std::uint8_t, false, 0x80, 0x80>(a, b, n);
    case DataType::i32: return may_overflow<std::uint32_t, true, 0x80000000u, 0x80000000u>(a, b, n);
    case DataType::u32: return may_overflow<std::uint32_t, false, 0x80000000u, 0x80000000u>(a, b, n);
    case DataType::i64: return may_overflow<std::uint64_t, true, 1ull << 63, 1ull << 63>(a, b, n);
    case DataType::u64: return may_overflow<std::uint64_t, false, 1ull << 63, 1ull << 63>(a, b, n);
    default: return true;  // fp8, i4: always the exact count
  }
}

}  // namespace

std::uint64_t sum_overflows(DataType t, const void* a, const void* b, std::size_t n) noexcept {
  if (!screen(t, a, b, n)) return 0;
  switch (t) {
    case DataType::f64: return float_overflows<double>(a, b, n);
    case DataType::f32: return float_overflows<float>(a, b, n);
    case DataType::f16: return half_overflows<true>(a, b, n);
    case DataType::bf16: return half_overflows<false>(a, b, n);
    case DataType::i8: return int_overflows<std::int8_t>(a, b, n);
    case DataType::u8: return int_overflows<std::uint8_t>(a, b, n);
    case DataType::i32: return int_overflows<std::int32_t>(a, b, n);
    case DataType::u32: return int_overflows<std::uint32_t>(a, b, n);
    case DataType::i64: return int_overflows<std::int64_t>(a, b, n);
    case DataType::u64: return int_overflows<std::uint64_t>(a, b, n);
    case DataType::e4m3: return fp8_overflows<true>(a, b, n);
    case DataType::e5m2: return fp8_overflows<false>(a, b, n);
    case DataType::i4: return i4_overflows(a, b, n);
    case DataType::mxfp8_e4m3: case DataType::mxfp8_e5m2: case DataType::mxint8: case DataType::mxfp4:
    case DataType::mxfp6_e2m3: case DataType::mxfp6_e3m2: return mx_sum_overflows(t, a, b, n);  // n blocks
  }
  return 0;
}

std::uint64_t reduce_counted(DataType t, ReduceOp op, void* dst, const void* a, const void* b,
                             std::size_t count) noexcept {
  if (!counts_events(op)) {
    reduce(t, op, dst, a, b, count);
    return 0;
  }
  // Every type but MX: counted in the add's own loop (kernels_counted.hpp).
  std::uint64_t fused = 0;
  if (detail::sum_counted_with(detail::selected_kernel_isa(), t, dst, a, b, count, fused)) return fused;
  // MX: count a block, then add it, so that the operands are still in cache for the add (and are
  // read before dst, which may alias them, is written).
  constexpr std::size_t kStep = 2048;
  const std::size_t esz = size_of(t);
  auto* d = static_cast<unsigned char*>(dst);
  const auto* x = static_cast<const unsigned char*>(a);
  const auto* y = static_cast<const unsigned char*>(b);
  std::uint64_t ev = 0;
  for (std::size_t i = 0; i < count; i += kStep) {
    const std::size_t m = count - i < kStep ? count - i : kStep;
    ev += sum_overflows(t, x + i * esz, y + i * esz, m);
    reduce(t, op, d + i * esz, x + i * esz, y + i * esz, m);
  }
  return ev;
}

namespace {
// Elements whose bits & mask reach `first` (the first non-finite pattern).
template <class U>
std::uint64_t count_at_least(const void* x, std::size_t n, U mask, U first) noexcept {
  const auto* p = static_cast<const unsigned char*>(x);
  std::uint64_t c = 0;
  for (std::size_t i = 0; i < n; ++i) {
    U v;
    std::memcpy(&v, p + sizeof(U) * i, sizeof(U));
    c += static_cast<U>(v & mask) >= first;
  }
  return c;
}
}  // namespace

std::uint64_t count_nonfinite(DataType t, const void* x, std::size_t n) noexcept {
  switch (t) {
    case DataType::f64: return count_at_least<std::uint64_t>(x, n, 0x7fffffffffffffffull, 0x7ff0000000000000ull);
    case DataType::f32: return count_at_least<std::uint32_t>(x, n, 0x7fffffffu, 0x7f800000u);
    case DataType::f16: return count_at_least<std::uint16_t>(x, n, 0x7fff, 0x7c00);
    case DataType::bf16: return count_at_least<std::uint16_t>(x, n, 0x7fff, 0x7f80);
    case DataType::e4m3: return count_at_least<std::uint8_t>(x, n, 0x7f, 0x7f);  // NaN only
    case DataType::e5m2: return count_at_least<std::uint8_t>(x, n, 0x7f, 0x7c);
    case DataType::mxfp8_e4m3: case DataType::mxfp8_e5m2: case DataType::mxint8: case DataType::mxfp4:
    case DataType::mxfp6_e2m3: case DataType::mxfp6_e3m2: return mx_count_nonfinite(t, x, n);  // n blocks
    default: return 0;
  }
}

}  // namespace inc::numerics
