// Internal to src/numerics: sums that count their numeric events (events.hpp) in the add's own
// loop, compiled once per instruction set like kernels.hpp (reduce.cpp, reduce_x86_64_v3.cpp).
//
// One block = 4 vectors of 32 bytes (32 f32/i32, 128 i8). Per block the loop loads both
// operands, adds them in registers and computes a per-lane screen for each vector; the four
// screens are ORed and tested once:
//  * signed integers: (x ^ r) & (y ^ r), whose sign bit is exactly "x and y share a sign r has
//    not" (the wrap);
//  * unsigned integers: r < x (the carry);
//  * floats: |r| >= infinity (the exponent field all ones: (bits & abs) + lowest exponent bit
//    reaches the sign bit): every event (finite x, y and an infinite sum) gives one, and so do
//    NaN/inf operands (they make r non-finite), which are not events.
// If no lane's sign bit is set the block has no event. Otherwise integers count the flagged
// lanes; a float block, whose operands are still untouched in memory (its results are stored
// only after the test; dst may alias a or b, but only wholly), is counted exactly by the scalar
// predicate below, which is events.cpp's.
// The tail (fewer than a block) runs the scalar add and predicate element by element.
//
// ODR safety as kernels.hpp: internal linkage, only always_inline functions and builtins.
// Vectors are GCC vector extensions, so the one source is SSE2 code (two halves per vector) in
// reduce.cpp and AVX2 code in reduce_x86_64_v3.cpp; `Isa::any` / `Isa::count` are each file's
// lane tests (lanes of 1, 4 or 8 bytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "inc/types.hpp"
#include "numerics/kernels.hpp"

namespace inc::numerics {
namespace {
namespace kern {

typedef std::uint64_t Mask256 __attribute__((vector_size(32)));

// The sign bits of lanes of kBytes bytes within 64 bits.
template <std::size_t kBytes>
inline constexpr std::uint64_t kSignBits = (kBytes == 1   ? 0x0101010101010101ull
                                            : kBytes == 4 ? 0x0000000100000001ull
                                                          : 1ull)
                                           << (8 * kBytes - 1);

// Portable lane tests on lanes of kBytes bytes: some lane's sign bit is set; how many are.
// Vectors go by reference: by value, a 32-byte vector's ABI differs with and without AVX.
struct AnyLanes {
  template <std::size_t kBytes>
  [[gnu::always_inline]] static bool any(const Mask256& v) noexcept {
    return ((v[0] | v[1] | v[2] | v[3]) & kSignBits<kBytes>) != 0;
  }
  template <std::size_t kBytes>
  [[gnu::always_inline]] static unsigned count(const Mask256& v) noexcept {
    constexpr std::uint64_t s = kSignBits<kBytes>;
    return static_cast<unsigned>(__builtin_popcountll(v[0] & s) + __builtin_popcountll(v[1] & s) +
                                 __builtin_popcountll(v[2] & s) + __builtin_popcountll(v[3] & s));
  }
};

// The exact event of one element r = x + y (events.hpp; the very expressions of events.cpp).
template <class T>
[[gnu::always_inline]] inline unsigned event_of(T x, T y) noexcept {
  if constexpr (std::is_floating_point_v<T>) {
    constexpr T kMax = sizeof(T) == 8 ? T(1.7976931348623157e308) : T(3.40282347e38f);
    const T r = x + y;
    const T ax = x < 0 ? -x : x, ay = y < 0 ? -y : y, ar = r < 0 ? -r : r;
    return (ax <= kMax) & (ay <= kMax) & (ar > kMax);
  } else {
    using U = std::make_unsigned_t<T>;
    const U ux = static_cast<U>(x), uy = static_cast<U>(y);
    const U r = static_cast<U>(ux + uy);
    if constexpr (std::is_signed_v<T>) return static_cast<U>((ux ^ r) & (uy ^ r)) >> (8 * sizeof(U) - 1);
    else return r < ux;
  }
}

template <class T>
[[gnu::always_inline]] inline T add_one(T x, T y) noexcept {
  if constexpr (std::is_floating_point_v<T>) {
    return x + y;
  } else {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(static_cast<U>(x) + static_cast<U>(y)));
  }
}

// Lanes of one 32-byte vector of T: V the arithmetic vector, B the bit pattern vector.
template <class T> struct Lanes;
#define INC_KERN_LANES(T, U)                                                          \
  template <> struct Lanes<T> {                                                       \
    typedef T V __attribute__((vector_size(32)));                                     \
    typedef U B __attribute__((vector_size(32)));                                     \
    typedef U Bits;                                                                   \
  }
INC_KERN_LANES(float, std::uint32_t);
INC_KERN_LANES(double, std::uint64_t);
INC_KERN_LANES(std::int8_t, std::uint8_t);
INC_KERN_LANES(std::uint8_t, std::uint8_t);
INC_KERN_LANES(std::int32_t, std::uint32_t);
INC_KERN_LANES(std::uint32_t, std::uint32_t);
INC_KERN_LANES(std::int64_t, std::uint64_t);
INC_KERN_LANES(std::uint64_t, std::uint64_t);
#undef INC_KERN_LANES

// The sum and screen of one vector: r = x + y; the sign bits of `s`'s lanes flag events
// (integers: exactly; floats: a superset, see the top of this file).
template <class T>
[[gnu::always_inline]] inline void sum_screen(const unsigned char* px, const unsigned char* py,
                                              typename Lanes<T>::B& r, typename Lanes<T>::B& s) noexcept {
  using V = typename Lanes<T>::V;
  using B = typename Lanes<T>::B;
  using U = typename Lanes<T>::Bits;
  if constexpr (std::is_floating_point_v<T>) {
    V x, y;
    __builtin_memcpy(&x, px, 32);
    __builtin_memcpy(&y, py, 32);
    const V sum = x + y;
    __builtin_memcpy(&r, &sum, 32);
    constexpr U kAbs = static_cast<U>(~U{0} >> 1);
    constexpr U kExpLow = sizeof(T) == 8 ? U{1} << 52 : U{1} << 23;  // lowest exponent bit
    s = (r & kAbs) + kExpLow;
  } else {
    B x, y;
    __builtin_memcpy(&x, px, 32);
    __builtin_memcpy(&y, py, 32);
    r = x + y;  // unsigned lanes: wraps
    if constexpr (std::is_signed_v<T>) s = (x ^ r) & (y ^ r);
    else s = __builtin_bit_cast(B, r < x);
  }
}

// dst = a + b over n elements of T; returns the events (events.hpp).
template <class T, class Isa>
std::uint64_t sum_counted(void* dst, const void* a, const void* b, std::size_t n) noexcept {
  using B = typename Lanes<T>::B;
  constexpr std::size_t kLanes = 32 / sizeof(T);
  constexpr std::size_t kBlock = 4 * kLanes;
  auto* d = static_cast<unsigned char*>(dst);
  const auto* x = static_cast<const unsigned char*>(a);
  const auto* y = static_cast<const unsigned char*>(b);
  std::uint64_t ev = 0;
  std::size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    const std::size_t o = i * sizeof(T);
    B r0, r1, r2, r3, s0, s1, s2, s3;
    sum_screen<T>(x + o, y + o, r0, s0);
    sum_screen<T>(x + o + 32, y + o + 32, r1, s1);
    sum_screen<T>(x + o + 64, y + o + 64, r2, s2);
    sum_screen<T>(x + o + 96, y + o + 96, r3, s3);
    if (__builtin_expect(Isa::template any<sizeof(T)>(__builtin_bit_cast(Mask256, s0 | s1 | s2 | s3)), 0)) {
      if constexpr (std::is_integral_v<T>) {  // the flags are the events
        ev += Isa::template count<sizeof(T)>(__builtin_bit_cast(Mask256, s0)) +
              Isa::template count<sizeof(T)>(__builtin_bit_cast(Mask256, s1)) +
              Isa::template count<sizeof(T)>(__builtin_bit_cast(Mask256, s2)) +
              Isa::template count<sizeof(T)>(__builtin_bit_cast(Mask256, s3));
      } else {
        for (std::size_t k = 0; k < kBlock; ++k) {  // exact, on the operands (not yet overwritten)
          T u, v;
          __builtin_memcpy(&u, x + o + k * sizeof(T), sizeof(T));
          __builtin_memcpy(&v, y + o + k * sizeof(T), sizeof(T));
          ev += event_of(u, v);
        }
      }
    }
    __builtin_memcpy(d + o, &r0, 32);
    __builtin_memcpy(d + o + 32, &r1, 32);
    __builtin_memcpy(d + o + 64, &r2, 32);
    __builtin_memcpy(d + o + 96, &r3, 32);
  }
  for (; i < n; ++i) {
    T u, v;
    __builtin_memcpy(&u, x + i * sizeof(T), sizeof(T));
    __builtin_memcpy(&v, y + i * sizeof(T), sizeof(T));
    ev += event_of(u, v);
    const T w = add_one(u, v);
    __builtin_memcpy(d + i * sizeof(T), &w, sizeof(T));
  }
  return ev;
}

// ---- 16-, 8- and 4-bit elements (bf16, e4m3, e5m2, i4) ----------------------------------------
// The same block scheme with the screen on the rounded results: a block (128 bytes, as above)
// is summed with the uncounted kernel's own per-element step (kernels.hpp: widen, add in f32,
// round once; i4 below) into a local array, every result ORs its flag (the top bit of a unit:
// floats |r| >= the first non-finite pattern, i.e. (r & abs) + (abs + 1 - first) carries into
// it; i4 the exact wrap of either nibble), the OR is tested once and only a tripped block is
// counted exactly (events.cpp's predicates: finite operands, non-finite result), before the
// block is stored (dst may alias a or b). The tail runs the same steps one unit at a time.
// Where b is a NaN the result is b's NaN as the narrowing gives it (quietened; fp8: its sign
// with the format's NaN code), whatever a is: what reduce()'s loops give for two NaNs (their add
// returns the second operand's), spelt out so that the counted sum does not depend on the
// operand order the compiler picks. N: first NaN magnitude pattern, and the result's bits.
template <class U, unsigned kFirstNaN, unsigned kOr, bool kKeepPayload>
struct NaNOfB {
  [[gnu::always_inline]] static U apply(U y, U r) noexcept {
    constexpr U kSign = static_cast<U>(1u << (8 * sizeof(U) - 1));
    const U nan = static_cast<U>((kKeepPayload ? y : (y & kSign)) | kOr);
    return (y & static_cast<U>(kSign - 1)) >= kFirstNaN ? nan : r;
  }
};
template <class U, class H, unsigned kAbs, unsigned kFirst, class N>
struct FloatCounted {
  using Unit = U;
  static constexpr U kFlag = static_cast<U>(kAbs + 1);
  [[gnu::always_inline]] static U sum(U x, U y, U& flag) noexcept {
    const U r = N::apply(y, static_cast<U>(H::narrow(H::widen(x) + H::widen(y))));
    flag = static_cast<U>((r & kAbs) + (kAbs + 1 - kFirst));
    return r;
  }
  [[gnu::always_inline]] static unsigned event(U x, U y, U r) noexcept {
    return ((x & kAbs) < kFirst) & ((y & kAbs) < kFirst) & ((r & kAbs) >= kFirst);
  }
};
using Bf16Counted = FloatCounted<std::uint16_t, BF16Soft, 0x7fff, 0x7f80, NaNOfB<std::uint16_t, 0x7f81, 0x0040, true>>;
using E4m3Counted = FloatCounted<std::uint8_t, E4M3, 0x7f, 0x7f, NaNOfB<std::uint8_t, 0x7f, 0x7f, false>>;  // no infinity
using E5m2Counted = FloatCounted<std::uint8_t, E5M2, 0x7f, 0x7c, NaNOfB<std::uint8_t, 0x7d, 0x7e, false>>;

// i4, two nibbles per byte: each nibble added at the top of a byte (low: shifted up; high: the
// low nibble cleared), so the byte add wraps exactly where the nibble does and the signed wrap
// test above ((x ^ r) & (y ^ r), top bit) is the event; the result's nibbles are the sums mod 16,
// as combine_i4's.
struct I4Counted {
  using Unit = std::uint8_t;
  static constexpr std::uint8_t kFlag = 0x80;
  [[gnu::always_inline]] static std::uint8_t wraps(std::uint8_t x, std::uint8_t y, std::uint8_t& lo,
                                                   std::uint8_t& hi) noexcept {
    const auto xl = static_cast<std::uint8_t>(x << 4), yl = static_cast<std::uint8_t>(y << 4);
    const auto xh = static_cast<std::uint8_t>(x & 0xf0), yh = static_cast<std::uint8_t>(y & 0xf0);
    const auto rl = static_cast<std::uint8_t>(xl + yl), rh = static_cast<std::uint8_t>(xh + yh);
    lo = static_cast<std::uint8_t>((xl ^ rl) & (yl ^ rl));
    hi = static_cast<std::uint8_t>((xh ^ rh) & (yh ^ rh));
    return static_cast<std::uint8_t>((rl >> 4) | rh);
  }
  [[gnu::always_inline]] static std::uint8_t sum(std::uint8_t x, std::uint8_t y, std::uint8_t& flag) noexcept {
    std::uint8_t lo, hi;
    const std::uint8_t r = wraps(x, y, lo, hi);
    flag = static_cast<std::uint8_t>(lo | hi);
    return r;
  }
  [[gnu::always_inline]] static unsigned event(std::uint8_t x, std::uint8_t y, std::uint8_t) noexcept {
    std::uint8_t lo, hi;
    wraps(x, y, lo, hi);
    return static_cast<unsigned>((lo >> 7) + (hi >> 7));
  }
};

template <class C>
std::uint64_t sum_counted_small(void* dst, const void* a, const void* b, std::size_t n) noexcept {
  using U = typename C::Unit;
  constexpr std::size_t kBlock = 128 / sizeof(U);
  auto* d = static_cast<unsigned char*>(dst);
  const auto* px = static_cast<const unsigned char*>(a);
  const auto* py = static_cast<const unsigned char*>(b);
  std::uint64_t ev = 0;
  std::size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    U x[kBlock], y[kBlock], r[kBlock];
    __builtin_memcpy(x, px + i * sizeof(U), sizeof x);
    __builtin_memcpy(y, py + i * sizeof(U), sizeof y);
    U s = 0;
    for (std::size_t k = 0; k < kBlock; ++k) {
      U f;
      r[k] = C::sum(x[k], y[k], f);
      s = static_cast<U>(s | f);
    }
    if (__builtin_expect((s & C::kFlag) != 0, 0))
      for (std::size_t k = 0; k < kBlock; ++k) ev += C::event(x[k], y[k], r[k]);
    __builtin_memcpy(d + i * sizeof(U), r, sizeof r);
  }
  for (; i < n; ++i) {
    U x, y, f;
    __builtin_memcpy(&x, px + i * sizeof(U), sizeof(U));
    __builtin_memcpy(&y, py + i * sizeof(U), sizeof(U));
    const U r = C::sum(x, y, f);
    ev += C::event(x, y, r);
    __builtin_memcpy(d + i * sizeof(U), &r, sizeof(U));
  }
  return ev;
}

// bf16 in whole vectors: 32 bytes = 8 words of two elements, each half widened to f32 in its
// own vector as combine_widened does (low half: shifted up; high half: the low one cleared),
// added, narrowed with f32_to_bf16's integer rounding (NaNs: see below) and joined again. The
// screen is the rounded pair's (w & 0x7fff7fff) + 0x00800080: bit 15 / 31 set iff that half's
// |h| >= 0x7f80 (the halves cannot carry into each other).
typedef std::uint32_t Bf16Words __attribute__((vector_size(32)));
typedef float Bf16Floats __attribute__((vector_size(32)));

// One vector of 16 bf16 sums and its screen (bit 15 / 31 of a word: that half's flag). The
// rounding is f32_to_bf16's (+ 0x7fff + the kept lsb) without its NaN select, the high half
// rounded in place (masked, not shifted down and up): a NaN sum only occurs in a tripped block,
// which is redone below with the full rule. (Every NaN sum trips the screen: the add's NaN is an
// operand's, whose low 16 bits are zero as widened, or the default NaN, so the rounding adds no
// carry and keeps |h| > 0x7f80.) Fewer operations per vector than the plain kernel's loop, which
// must select NaNs: at the L1-resident size the fused sum no longer trails the two passes.
[[gnu::always_inline]] inline void bf16_sum_screen(const unsigned char* px, const unsigned char* py, Bf16Words& r,
                                                   Bf16Words& s) noexcept {
  using W = Bf16Words;
  using F = Bf16Floats;
  W x, y;
  __builtin_memcpy(&x, px, 32);
  __builtin_memcpy(&y, py, 32);
  const W lo = __builtin_bit_cast(W, __builtin_bit_cast(F, x << 16) + __builtin_bit_cast(F, y << 16));
  const W hi = __builtin_bit_cast(W, __builtin_bit_cast(F, x & 0xffff0000u) + __builtin_bit_cast(F, y & 0xffff0000u));
  r = ((lo + 0x7fffu + ((lo >> 16) & 1u)) >> 16) | ((hi + 0x7fffu + ((hi >> 16) & 1u)) & 0xffff0000u);
  s = (r & 0x7fff7fffu) + 0x00800080u;
}

// A tripped block (an event, or a NaN / infinity somewhere) again one element at a time from its
// operands (not yet overwritten): the count, and the results with NaNOfB's rule. Out of line, so
// that the hot loop keeps its registers.
[[gnu::noinline, gnu::cold]] inline std::uint64_t bf16_tripped_block(unsigned char* d, const unsigned char* px,
                                                                    const unsigned char* py) noexcept {
  constexpr std::size_t kBlock = 64;
  std::uint16_t x[kBlock], y[kBlock], rr[kBlock];
  __builtin_memcpy(x, px, sizeof x);
  __builtin_memcpy(y, py, sizeof y);
  std::uint64_t ev = 0;
  for (std::size_t k = 0; k < kBlock; ++k) {
    std::uint16_t f;
    rr[k] = Bf16Counted::sum(x[k], y[k], f);
    ev += Bf16Counted::event(x[k], y[k], rr[k]);
  }
  __builtin_memcpy(d, rr, sizeof rr);
  return ev;
}

template <class Isa>
std::uint64_t sum_counted_bf16(void* dst, const void* a, const void* b, std::size_t n) noexcept {
  constexpr std::size_t kBlock = 64;  // elements: 4 vectors
  auto* d = static_cast<unsigned char*>(dst);
  const auto* px = static_cast<const unsigned char*>(a);
  const auto* py = static_cast<const unsigned char*>(b);
  std::uint64_t ev = 0;
  std::size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    const std::size_t o = 2 * i;
    Bf16Words r0, r1, r2, r3, s0, s1, s2, s3;
    bf16_sum_screen(px + o, py + o, r0, s0);
    bf16_sum_screen(px + o + 32, py + o + 32, r1, s1);
    bf16_sum_screen(px + o + 64, py + o + 64, r2, s2);
    bf16_sum_screen(px + o + 96, py + o + 96, r3, s3);
    if (__builtin_expect(Isa::template any<1>(__builtin_bit_cast(Mask256, (s0 | s1 | s2 | s3) & 0x80008000u)), 0)) {
      ev += bf16_tripped_block(d + o, px + o, py + o);
      continue;
    }
    __builtin_memcpy(d + o, &r0, 32);
    __builtin_memcpy(d + o + 32, &r1, 32);
    __builtin_memcpy(d + o + 64, &r2, 32);
    __builtin_memcpy(d + o + 96, &r3, 32);
  }
  return ev + sum_counted_small<Bf16Counted>(d + 2 * i, px + 2 * i, py + 2 * i, n - i);  // the tail
}

// i4 in whole vectors of bytes, I4Counted's steps lane by lane; the flags are the events, so a
// tripped block counts them (the sign bits of the low- and high-nibble wrap vectors).
typedef std::uint8_t I4Bytes __attribute__((vector_size(32)));

[[gnu::always_inline]] inline void i4_sum_wraps(const unsigned char* px, const unsigned char* py, I4Bytes& r, I4Bytes& lo,
                                                I4Bytes& hi) noexcept {
  I4Bytes x, y;
  __builtin_memcpy(&x, px, 32);
  __builtin_memcpy(&y, py, 32);
  const I4Bytes xl = x << 4, yl = y << 4, xh = x & 0xf0, yh = y & 0xf0;
  const I4Bytes rl = xl + yl, rh = xh + yh;
  lo = (xl ^ rl) & (yl ^ rl);
  hi = (xh ^ rh) & (yh ^ rh);
  r = (rl >> 4) | rh;
}

template <class Isa>
std::uint64_t sum_counted_i4(void* dst, const void* a, const void* b, std::size_t n) noexcept {
  constexpr std::size_t kBlock = 128;  // bytes: 4 vectors
  auto* d = static_cast<unsigned char*>(dst);
  const auto* px = static_cast<const unsigned char*>(a);
  const auto* py = static_cast<const unsigned char*>(b);
  auto count = [](const I4Bytes& v) __attribute__((always_inline)) {
    return Isa::template count<1>(__builtin_bit_cast(Mask256, v));
  };
  std::uint64_t ev = 0;
  std::size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    I4Bytes r0, r1, r2, r3, l0, l1, l2, l3, h0, h1, h2, h3;
    i4_sum_wraps(px + i, py + i, r0, l0, h0);
    i4_sum_wraps(px + i + 32, py + i + 32, r1, l1, h1);
    i4_sum_wraps(px + i + 64, py + i + 64, r2, l2, h2);
    i4_sum_wraps(px + i + 96, py + i + 96, r3, l3, h3);
    if (__builtin_expect(Isa::template any<1>(__builtin_bit_cast(Mask256, l0 | h0 | l1 | h1 | l2 | h2 | l3 | h3)), 0))
      ev += count(l0) + count(h0) + count(l1) + count(h1) + count(l2) + count(h2) + count(l3) + count(h3);
    __builtin_memcpy(d + i, &r0, 32);
    __builtin_memcpy(d + i + 32, &r1, 32);
    __builtin_memcpy(d + i + 64, &r2, 32);
    __builtin_memcpy(d + i + 96, &r3, 32);
  }
  return ev + sum_counted_small<I4Counted>(d + i, px + i, py + i, n - i);  // the tail
}

// The types summed and counted here; false (nothing done) for the others (MX), which
// events.cpp counts in its own pass (and f16 on the generic variant; x86-64-v3 counts it with
// F16C before this).
template <class Isa>
bool sum_counted_all(DataType t, void* dst, const void* a, const void* b, std::size_t n,
                     std::uint64_t& events) noexcept {
  switch (t) {
    case DataType::f64: events = sum_counted<double, Isa>(dst, a, b, n); return true;
    case DataType::f32: events = sum_counted<float, Isa>(dst, a, b, n); return true;
    case DataType::i8: events = sum_counted<std::int8_t, Isa>(dst, a, b, n); return true;
    case DataType::u8: events = sum_counted<std::uint8_t, Isa>(dst, a, b, n); return true;
    case DataType::i32: events = sum_counted<std::int32_t, Isa>(dst, a, b, n); return true;
    case DataType::u32: events = sum_counted<std::uint32_t, Isa>(dst, a, b, n); return true;
    case DataType::i64: events = sum_counted<std::int64_t, Isa>(dst, a, b, n); return true;
    case DataType::u64: events = sum_counted<std::uint64_t, Isa>(dst, a, b, n); return true;
    case DataType::bf16: events = sum_counted_bf16<Isa>(dst, a, b, n); return true;
    case DataType::e4m3: events = sum_counted_small<E4m3Counted>(dst, a, b, n); return true;
    case DataType::e5m2: events = sum_counted_small<E5m2Counted>(dst, a, b, n); return true;
    case DataType::i4: events = sum_counted_i4<Isa>(dst, a, b, n); return true;
    default: return false;
  }
}

}  // namespace kern
}  // namespace
}  // namespace inc::numerics
