#include "src/switch/arith.hpp"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "src/numerics/fp8.hpp"
#include "src/numerics/events.hpp"
#include "src/numerics/half.hpp"
#include "src/numerics/int4.hpp"
#include "src/numerics/reduce.hpp"

namespace inc::sw {

// The hosts' sum and its events in one pass (numerics reduce_counted: the count is fused into
// the add's loop, AVX2 where the CPU has it); `src` may be unaligned.
std::uint32_t add_i32_wrap(std::int32_t* acc, const std::byte* src, std::size_t n) noexcept {
  return static_cast<std::uint32_t>(numerics::reduce_counted(DataType::i32, ReduceOp::sum, acc, acc, src, n));
}

std::uint32_t add_f32(float* acc, const std::byte* src, std::size_t n) noexcept {
  return static_cast<std::uint32_t>(numerics::reduce_counted(DataType::f32, ReduceOp::sum, acc, acc, src, n));
}

namespace {
template <class T, class F>
void elementwise(T* acc, const std::byte* src, std::size_t n, F f) noexcept {
  for (std::size_t i = 0; i < n; ++i) {
    T b;
    std::memcpy(&b, src + sizeof(T) * i, sizeof(T));
    acc[i] = f(acc[i], b);
  }
}
std::uint32_t bits(float x) noexcept { return std::bit_cast<std::uint32_t>(x); }

float ieee_maximum(float x, float y) noexcept {
  if (x != x || y != y) return x + y;  // a quiet NaN
  if (x == y) return std::bit_cast<float>(bits(x) & bits(y));  // +0 and -0: +0
  return x < y ? y : x;
}

float ieee_minimum(float x, float y) noexcept {
  if (x != x || y != y) return x + y;
  if (x == y) return std::bit_cast<float>(bits(x) | bits(y));  // +0 and -0: -0
  return y < x ? y : x;
}
}  // namespace

std::uint32_t combine(proto::ElemType t, proto::WireOp op, void* acc, const std::byte* src,
                      std::size_t count) noexcept {
  using proto::ElemType;
  using proto::WireOp;
  if (t == ElemType::i32) {
    auto* a = static_cast<std::int32_t*>(acc);
    if (op == WireOp::sum) return add_i32_wrap(a, src, count);
    if (op == WireOp::max) elementwise(a, src, count, [](auto x, auto y) { return x < y ? y : x; });
    if (op == WireOp::min) elementwise(a, src, count, [](auto x, auto y) { return y < x ? y : x; });
    return 0;
  }
  if (t == ElemType::f32) {
    auto* a = static_cast<float*>(acc);
    if (op == WireOp::sum) return add_f32(a, src, count);
    // IEEE 754-2019 maximum/minimum, as on the hosts (src/numerics/kernels.hpp): a NaN
    // operand gives a quiet NaN, and -0 < +0, so the result does not depend on which member's
    // packet arrived first.
    if (op == WireOp::max) elementwise(a, src, count, ieee_maximum);
    if (op == WireOp::min) elementwise(a, src, count, ieee_minimum);
  }
  return 0;
}

namespace {
// The hosts' f16/bf16 kernel (widen, combine in f32, round once; F16C where the CPU has it),
// so a narrow sum in the switch rounds exactly as a host step would, and counts its events
// as the hosts do (reduce_counted). It reads the payload as 16/32-bit words: an odd address
// (never from our receive paths) takes the portable loop.
std::uint32_t combine_h16(proto::ElemType t, proto::WireOp op, void* acc, const std::byte* src,
                          std::size_t n) noexcept {
  const DataType dt = t == proto::ElemType::f16 ? DataType::f16 : DataType::bf16;
  const ReduceOp rop = op == proto::WireOp::max   ? ReduceOp::max
                       : op == proto::WireOp::min ? ReduceOp::min
                                                  : ReduceOp::sum;
  if (reinterpret_cast<std::uintptr_t>(src) % 4 == 0 && reinterpret_cast<std::uintptr_t>(acc) % 4 == 0)
    return static_cast<std::uint32_t>(numerics::reduce_counted(dt, rop, acc, acc, src, n));
  auto* a = static_cast<std::uint16_t*>(acc);
  std::uint32_t ev = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint16_t b;
    std::memcpy(&b, src + 2 * i, 2);
    ev += static_cast<std::uint32_t>(numerics::reduce_counted(dt, rop, &a[i], &a[i], &b, 1));
  }
  return ev;
}
}  // namespace

namespace {
// 8-bit sums wrap; counted where a partial sum left the range (signed overflow or a carry out
// of bit 7), by the hosts' fused sum and count.
std::uint32_t add_8_wrap(bool is_signed, std::uint8_t* a, const std::byte* src, std::size_t n) noexcept {
  return static_cast<std::uint32_t>(
      numerics::reduce_counted(is_signed ? DataType::i8 : DataType::u8, ReduceOp::sum, a, a, src, n));
}
template <class T>
void minmax_8(proto::WireOp op, void* acc, const std::byte* src, std::size_t n) noexcept {
  auto* a = static_cast<T*>(acc);
  for (std::size_t i = 0; i < n; ++i) {
    const T b = static_cast<T>(std::to_integer<unsigned>(src[i]));
    a[i] = op == proto::WireOp::max ? (a[i] < b ? b : a[i]) : (b < a[i] ? b : a[i]);
  }
}
}  // namespace

namespace {
// OCP fp8 (e4m3/e5m2): a non-finite pattern (e4m3: NaN only; e5m2: infinities and NaNs).
bool fp8_nonfinite(bool e4m3, std::uint8_t b) noexcept {
  return e4m3 ? (b & 0x7f) == 0x7f : (b & 0x7c) == 0x7c;
}
// Byte-pair tables for the 8- and 4-bit sums (64 Ki entries, built once from the hosts'
// arithmetic): the low byte is the sum, bit 8 the overflow condition. A switch's add is then
// one lookup per byte, as a match-action stage would do it, and bit-identical to the hosts.
//  fp8: widen both to f32, add, round once to nearest-even with IEEE overflow (the hosts'
//       kernel: e4m3 NaN, e5m2 infinity); overflow = a finite pair gave a non-finite sum.
//  i4:  both nibbles added modulo 16; overflow = a nibble's sum left -8..7.
struct PairTable {
  std::uint16_t t[65536];
  explicit PairTable(int kind) {  // 0: e4m3, 1: e5m2, 2: i4
    for (unsigned a = 0; a < 256; ++a)
      for (unsigned b = 0; b < 256; ++b) {
        const auto x = std::uint8_t(a), y = std::uint8_t(b);
        std::uint8_t r;
        bool ov;
        if (kind == 2) {
          const int lo = numerics::i4_get(x, 0) + numerics::i4_get(y, 0);
          const int hi = numerics::i4_get(x, 1) + numerics::i4_get(y, 1);
          ov = lo < -8 || lo > 7 || hi < -8 || hi > 7;
          r = numerics::i4_set(numerics::i4_set(0, 0, lo), 1, hi);
        } else {
          const bool e4m3 = kind == 0;
          r = e4m3 ? numerics::f32_to_e4m3(numerics::e4m3_to_f32(x) + numerics::e4m3_to_f32(y))
                   : numerics::f32_to_e5m2(numerics::e5m2_to_f32(x) + numerics::e5m2_to_f32(y));
          ov = fp8_nonfinite(e4m3, r) && !fp8_nonfinite(e4m3, x) && !fp8_nonfinite(e4m3, y);
        }
        t[a << 8 | b] = std::uint16_t(r | (ov ? 0x100 : 0));
      }
  }
};
const PairTable& pair_table(proto::ElemType t) {
  static const PairTable e4m3(0), e5m2(1), i4(2);
  return t == proto::ElemType::e4m3 ? e4m3 : t == proto::ElemType::e5m2 ? e5m2 : i4;
}
// acc[i] = acc[i] + src[i] by table; returns the adds that overflowed (events).
std::uint32_t add_by_table(proto::ElemType t, std::uint8_t* a, const std::byte* src, std::size_t n) noexcept {
  const std::uint16_t* tab = pair_table(t).t;
  std::uint32_t ev = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint16_t r = tab[unsigned(a[i]) << 8 | std::to_integer<unsigned>(src[i])];
    ev += r >> 8;
    a[i] = std::uint8_t(r);
  }
  return ev;
}
// fp8 code -> f32 (exact), by table.
struct Fp8Values {
  float e4m3[256], e5m2[256];
  Fp8Values() {
    for (unsigned c = 0; c < 256; ++c) {
      e4m3[c] = numerics::e4m3_to_f32(std::uint8_t(c));
      e5m2[c] = numerics::e5m2_to_f32(std::uint8_t(c));
    }
  }
};
const float* fp8_values(proto::ElemType t) {
  static const Fp8Values v;
  return t == proto::ElemType::e4m3 ? v.e4m3 : v.e5m2;
}
// min/max of fp8 and i4 (exact): the hosts' kernel.
void minmax_lowp(proto::ElemType t, proto::WireOp op, void* acc, const std::byte* src,
                 std::size_t n) noexcept {
  const DataType dt = t == proto::ElemType::e4m3 ? DataType::e4m3
                      : t == proto::ElemType::e5m2 ? DataType::e5m2
                                                   : DataType::i4;
  numerics::reduce(dt, op == proto::WireOp::max ? ReduceOp::max : ReduceOp::min, acc, acc, src, n);
}
}  // namespace

std::uint32_t combine(proto::ElemType acc_t, proto::ElemType src_t, proto::WireOp op, void* acc,
                      const std::byte* src, std::size_t count) noexcept {
  using proto::ElemType;
  if (acc_t == ElemType::i8 || acc_t == ElemType::u8) {  // src_t is the same (narrow)
    if (op == proto::WireOp::max || op == proto::WireOp::min) {
      if (acc_t == ElemType::i8) minmax_8<std::int8_t>(op, acc, src, count);
      else minmax_8<std::uint8_t>(op, acc, src, count);
      return 0;
    }
    return add_8_wrap(acc_t == ElemType::i8, static_cast<std::uint8_t*>(acc), src, count);
  }
  if (acc_t == ElemType::e4m3 || acc_t == ElemType::e5m2 || acc_t == ElemType::i4) {  // narrow
    if (op == proto::WireOp::max || op == proto::WireOp::min) {
      minmax_lowp(acc_t, op, acc, src, count);
      return 0;
    }
    return add_by_table(acc_t, static_cast<std::uint8_t*>(acc), src, count);
  }
  if (acc_t == ElemType::e4m3w || acc_t == ElemType::e5m2w) {  // f32 accumulators
    auto* a = static_cast<float*>(acc);
    if (src_t == acc_t) {
      add_f32(a, src, count);
    } else {
      const float* v = fp8_values(src_t);
      for (std::size_t i = 0; i < count; ++i) a[i] += v[std::to_integer<unsigned>(src[i])];
    }
    return 0;
  }
  if (acc_t == ElemType::i4w) {  // two i16 per byte of i4 (wrapping; exact below 4096 members)
    auto* a = static_cast<std::uint16_t*>(acc);
    for (std::size_t i = 0; i < count; ++i) {
      if (src_t == acc_t) {
        std::uint16_t lo, hi;
        std::memcpy(&lo, src + 4 * i, 2);
        std::memcpy(&hi, src + 4 * i + 2, 2);
        a[2 * i] = static_cast<std::uint16_t>(a[2 * i] + lo);
        a[2 * i + 1] = static_cast<std::uint16_t>(a[2 * i + 1] + hi);
      } else {
        const auto b = std::to_integer<std::uint8_t>(src[i]);
        a[2 * i] = static_cast<std::uint16_t>(a[2 * i] + numerics::i4_get(b, 0));
        a[2 * i + 1] = static_cast<std::uint16_t>(a[2 * i + 1] + numerics::i4_get(b, 1));
      }
    }
    return 0;
  }
  if (proto::is_mx(proto::narrow_of(acc_t))) {
    add_mx_blocks(acc_t, src_t, static_cast<float*>(acc), src, count);
    return 0;
  }
  if (acc_t == ElemType::i8w || acc_t == ElemType::u8w) {  // i32 accumulators: exact
    auto* a = static_cast<std::int32_t*>(acc);
    if (src_t == acc_t) {
      return add_i32_wrap(a, src, count);  // (cannot wrap: |total| < 2^8 x 64 members per hop x depth)
    } else if (src_t == ElemType::i8) {
      for (std::size_t i = 0; i < count; ++i) a[i] += static_cast<std::int8_t>(std::to_integer<unsigned>(src[i]));
    } else {
      for (std::size_t i = 0; i < count; ++i) a[i] += static_cast<std::int32_t>(std::to_integer<unsigned>(src[i]));
    }
    return 0;
  }
  if (acc_t == src_t) {
    if (acc_t == ElemType::f16 || acc_t == ElemType::bf16) return combine_h16(acc_t, op, acc, src, count);
    if (acc_t == ElemType::f16w || acc_t == ElemType::bf16w) return add_f32(static_cast<float*>(acc), src, count);
    return combine(acc_t, op, acc, src, count);
  }
  // A narrow input into a widened accumulator: acc += (f32) src (arith_h16.cpp).
  if (src_t == ElemType::f16 || src_t == ElemType::bf16)
    return add_h16_with(numerics::detail::selected_kernel_isa(), src_t, static_cast<float*>(acc), src, count);
  return 0;
}

void widen_into(proto::ElemType src_t, float* acc, const std::byte* src, std::size_t n) noexcept {
  if (src_t == proto::ElemType::i8 || src_t == proto::ElemType::u8) {
    auto* a = reinterpret_cast<std::int32_t*>(acc);
    for (std::size_t i = 0; i < n; ++i) {
      const unsigned b = std::to_integer<unsigned>(src[i]);
      a[i] = src_t == proto::ElemType::i8 ? std::int32_t(static_cast<std::int8_t>(b)) : std::int32_t(b);
    }
    return;
  }
  if (src_t == proto::ElemType::e4m3 || src_t == proto::ElemType::e5m2) {
    const float* v = fp8_values(src_t);
    for (std::size_t i = 0; i < n; ++i) acc[i] = v[std::to_integer<unsigned>(src[i])];
    return;
  }
  if (src_t == proto::ElemType::i4) {
    auto* a = reinterpret_cast<std::int16_t*>(acc);
    for (std::size_t i = 0; i < n; ++i) {
      const auto b = std::to_integer<std::uint8_t>(src[i]);
      a[2 * i] = static_cast<std::int16_t>(numerics::i4_get(b, 0));
      a[2 * i + 1] = static_cast<std::int16_t>(numerics::i4_get(b, 1));
    }
    return;
  }
  if (proto::is_mx(src_t)) {
    std::memset(acc, 0, n * proto::elem_size(proto::widened(src_t)));
    add_mx_blocks(proto::widened(src_t), src_t, acc, src, n);
    return;
  }
  widen_h16_with(numerics::detail::selected_kernel_isa(), src_t, acc, src, n);
}

proto::ElemType narrow_in_place(proto::ElemType wide_t, void* cells, std::size_t n,
                                std::uint32_t& events) noexcept {
  if (wide_t == proto::ElemType::i8w || wide_t == proto::ElemType::u8w) {
    auto* p = static_cast<std::byte*>(cells);
    const std::int32_t lo = wide_t == proto::ElemType::i8w ? -128 : 0, hi = lo + 255;
    for (std::size_t i = 0; i < n; ++i) {  // byte i lands below its own i32 at 4i
      std::int32_t x;
      std::memcpy(&x, p + 4 * i, 4);
      events += (x < lo) | (x > hi);
      p[i] = static_cast<std::byte>(static_cast<std::uint32_t>(x) & 0xFF);
    }
    return proto::narrow_of(wide_t);
  }
  if (wide_t == proto::ElemType::e4m3w || wide_t == proto::ElemType::e5m2w) {
    const bool e4m3 = wide_t == proto::ElemType::e4m3w;
    auto* p = static_cast<std::uint8_t*>(cells);
    for (std::size_t i = 0; i < n; ++i) {  // byte i lands below its own f32 at 4i
      float x;
      std::memcpy(&x, p + 4 * i, 4);
      p[i] = e4m3 ? numerics::f32_to_e4m3(x) : numerics::f32_to_e5m2(x);  // IEEE overflow
      events += std::isfinite(x) && fp8_nonfinite(e4m3, p[i]);
    }
    return proto::narrow_of(wide_t);
  }
  if (wide_t == proto::ElemType::i4w) {
    auto* p = static_cast<std::uint8_t*>(cells);
    for (std::size_t i = 0; i < n; ++i) {  // byte i lands below its own two i16 at 4i
      std::int16_t lo, hi;
      std::memcpy(&lo, p + 4 * i, 2);
      std::memcpy(&hi, p + 4 * i + 2, 2);
      events += (lo < -8 || lo > 7) + (hi < -8 || hi > 7);
      p[i] = numerics::i4_set(numerics::i4_set(0, 0, lo), 1, hi);
    }
    return proto::narrow_of(wide_t);
  }
  if (proto::is_mx(proto::narrow_of(wide_t))) {
    narrow_mx_blocks(wide_t, cells, n);
    return proto::narrow_of(wide_t);
  }
  // f16w/bf16w: in place, element i's 2 bytes landing at 2i (arith_h16.cpp).
  events += narrow_h16_with(numerics::detail::selected_kernel_isa(), wide_t, static_cast<std::byte*>(cells), n);
  return proto::narrow_of(wide_t);
}

std::int32_t fx32_block_exponent(const float* x, std::size_t n) noexcept {
  std::int32_t e = kFxZeroBlock;
  bool all_negative_zero = n > 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) return kFxNonFinite;
    if (x[i] == 0.0f) {
      all_negative_zero &= std::signbit(x[i]);
      continue;
    }
    all_negative_zero = false;
    int ex = 0;
    std::frexp(x[i], &ex);  // |x| = f * 2^ex, f in [0.5, 1): |x| < 2^ex
    if (ex > e) e = ex;
  }
  return all_negative_zero ? kFxNegativeZeroBlock : e;
}

int fx32_headroom(std::uint32_t contributors) noexcept {
  int h = 0;
  while ((std::uint64_t(1) << h) < contributors) ++h;
  return h;
}

void fx32_encode(const float* x, std::size_t n, std::int32_t e, int h, std::int32_t* q) noexcept {
  if (e <= kFxZeroBlock) {
    std::memset(q, 0, n * sizeof(std::int32_t));
    return;
  }
  int shift = 30 - h - e;
  for (std::size_t i = 0; i < n; ++i)
    q[i] = static_cast<std::int32_t>(std::nearbyint(std::ldexp(double(x[i]), shift)));
}

void fx32_decode(const std::int32_t* q, std::size_t n, std::int32_t e, int h, float* x) noexcept {
  if (e <= kFxZeroBlock) {
    // The shared exponent is the members' maximum: kFxNegativeZeroBlock only when every
    // member's block was all -0, whose IEEE sum is -0 (as on the hosts); else +0.
    const float zero = e == kFxNegativeZeroBlock ? -0.0f : 0.0f;
    for (std::size_t i = 0; i < n; ++i) x[i] = zero;
    return;
  }
  int shift = e - 30 + h;
  for (std::size_t i = 0; i < n; ++i) x[i] = static_cast<float>(std::ldexp(double(q[i]), shift));
}

}  // namespace inc::sw
