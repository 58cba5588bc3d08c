#include "numerics/repro.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "numerics/half.hpp"
#include "numerics/reduce.hpp"

namespace inc::numerics::repro {

namespace {

// Element i as f32 bits (f16/bf16 widen exactly).
std::uint32_t bits_at(DataType t, const void* x, std::uint64_t i) noexcept {
  if (t == DataType::f32) {
    std::uint32_t b;
    std::memcpy(&b, static_cast<const std::byte*>(x) + 4 * i, 4);
    return b;
  }
  std::uint16_t h;
  std::memcpy(&h, static_cast<const std::byte*>(x) + 2 * i, 2);
  return std::bit_cast<std::uint32_t>(t == DataType::f16 ? f16_to_f32(h) : bf16_to_f32(h));
}

// A finite nonzero f32 as m * 2^q, m an integer below 2^24.
struct Parts {
  bool negative;
  std::uint32_t m;
  int q;
};
enum class Kind { zero, finite, nonfinite };
Kind split(std::uint32_t b, Parts& p) noexcept {
  const std::uint32_t e = (b >> 23) & 0xFF, f = b & 0x7FFFFF;
  if (e == 0xFF) return Kind::nonfinite;
  if (e == 0 && f == 0) return Kind::zero;
  p.negative = (b >> 31) != 0;
  p.m = e == 0 ? f : (f | 0x800000u);
  p.q = e == 0 ? -149 : static_cast<int>(e) - 150;
  return Kind::finite;
}

}  // namespace

int limb_bits(int nranks) noexcept {
  int h = 0;
  while (h < 30 && (std::int64_t{1} << h) < nranks) ++h;
  return 31 - h;
}

void detail::scan_generic(DataType t, const void* x, std::uint64_t n, std::uint64_t elem0, std::int32_t* out) noexcept {
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::uint64_t b = (elem0 + i) / kBlock;
    Parts p;
    switch (split(bits_at(t, x, i), p)) {
      case Kind::zero: break;
      case Kind::nonfinite: out[2 * b] = kNonFinite; break;
      case Kind::finite: {
        const int hi = p.q + static_cast<int>(std::bit_width(p.m));  // |x| < 2^hi
        const int lo = p.q + std::countr_zero(p.m);                  // lowest set bit
        if (out[2 * b] != kNonFinite && hi > out[2 * b]) out[2 * b] = hi;
        if (-lo > out[2 * b + 1]) out[2 * b + 1] = -lo;
        break;
      }
    }
  }
}

void detail::encode_generic(DataType t, const void* x, std::uint64_t n, std::uint64_t elem0,
                            const std::int32_t* exps, int nranks, std::int32_t* limbs) noexcept {
  const int L = limb_bits(nranks);
  const std::uint64_t lo_mask = (std::uint64_t{1} << L) - 1;
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::int32_t e = exps[2 * ((elem0 + i) / kBlock)];
    std::int64_t X = 0;
    Parts p;
    if (e != kNonFinite && e != kZero && split(bits_at(t, x, i), p) == Kind::finite) {
      const int sh = p.q + 2 * L - e;  // X = m * 2^sh; |X| < 2^2L since |x| < 2^e
      std::uint64_t mag;
      if (sh >= 0) {
        mag = std::uint64_t{p.m} << sh;
      } else if (sh < -25) {
        mag = 0;  // below half the window's unit (m < 2^24)
      } else {
        const int k = -sh;
        const std::uint64_t m = p.m, rem = m & ((std::uint64_t{1} << k) - 1), half = std::uint64_t{1} << (k - 1);
        mag = m >> k;
        if (rem > half || (rem == half && (mag & 1))) ++mag;  // to nearest, ties to even
      }
      X = p.negative ? -static_cast<std::int64_t>(mag) : static_cast<std::int64_t>(mag);
    }
    limbs[2 * i] = static_cast<std::int32_t>(static_cast<std::uint64_t>(X) & lo_mask);
    limbs[2 * i + 1] = static_cast<std::int32_t>(X >> L);  // floor division (arithmetic shift)
  }
}

void detail::decode_generic(DataType t, const std::int32_t* limbs, std::uint64_t n, std::uint64_t elem0,
                            const std::int32_t* exps, int nranks, void* y) noexcept {
  const int L = limb_bits(nranks);
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::int32_t e = exps[2 * ((elem0 + i) / kBlock)];
    double d = 0;
    if (e == kNonFinite) {
      d = std::numeric_limits<double>::quiet_NaN();
    } else if (e != kZero) {
      // lo sums are in [0, 2^31): read as unsigned; V is exact (|V| < 2^62).
      const std::int64_t V = static_cast<std::int64_t>(limbs[2 * i + 1]) * (std::int64_t{1} << L) +
                             static_cast<std::int64_t>(static_cast<std::uint32_t>(limbs[2 * i]));
      std::uint64_t mag = V < 0 ? static_cast<std::uint64_t>(-V) : static_cast<std::uint64_t>(V);
      int sh = 0;
      if (std::bit_width(mag) > 53) {
        // Round to odd at 53 bits: the one rounding to 24 (or 11, 8) bits below is then correct.
        sh = static_cast<int>(std::bit_width(mag)) - 53;
        const bool sticky = (mag & ((std::uint64_t{1} << sh) - 1)) != 0;
        mag = (mag >> sh) | (sticky ? 1u : 0u);
      }
      d = std::ldexp(static_cast<double>(mag), sh + e - 2 * L);  // exact
      if (V < 0) d = -d;
    }
    store_from_double(t, y, i, d);
  }
}

namespace detail {
#if defined(INC_NUMERICS_X86_64_V3)
void scan_x86_64_v3(DataType t, const void* x, std::uint64_t n, std::uint64_t elem0, std::int32_t* out) noexcept;
void encode_x86_64_v3(DataType t, const void* x, std::uint64_t n, std::uint64_t elem0, const std::int32_t* exps,
                      int nranks, std::int32_t* limbs) noexcept;
void decode_x86_64_v3(DataType t, const std::int32_t* limbs, std::uint64_t n, std::uint64_t elem0,
                      const std::int32_t* exps, int nranks, void* y) noexcept;
#endif
namespace {
bool use_v3(KernelIsa isa) noexcept {
  return isa == KernelIsa::x86_64_v3 && numerics::detail::kernel_isa_available(isa);
}
}  // namespace

void scan_with(KernelIsa isa, DataType t, const void* x, std::uint64_t n, std::uint64_t elem0,
               std::int32_t* out) noexcept {
#if defined(INC_NUMERICS_X86_64_V3)
  if (use_v3(isa)) return scan_x86_64_v3(t, x, n, elem0, out);
#endif
  (void)isa;
  scan_generic(t, x, n, elem0, out);
}
void encode_with(KernelIsa isa, DataType t, const void* x, std::uint64_t n, std::uint64_t elem0,
                 const std::int32_t* exps, int nranks, std::int32_t* limbs) noexcept {
#if defined(INC_NUMERICS_X86_64_V3)
  if (use_v3(isa)) return encode_x86_64_v3(t, x, n, elem0, exps, nranks, limbs);
#endif
  (void)isa;
  encode_generic(t, x, n, elem0, exps, nranks, limbs);
}
void decode_with(KernelIsa isa, DataType t, const std::int32_t* limbs, std::uint64_t n, std::uint64_t elem0,
                 const std::int32_t* exps, int nranks, void* y) noexcept {
#if defined(INC_NUMERICS_X86_64_V3)
  if (use_v3(isa)) return decode_x86_64_v3(t, limbs, n, elem0, exps, nranks, y);
#endif
  (void)isa;
  decode_generic(t, limbs, n, elem0, exps, nranks, y);
}
}  // namespace detail

void scan(DataType t, const void* x, std::uint64_t n, std::uint64_t elem0, std::int32_t* out) noexcept {
  detail::scan_with(numerics::detail::selected_kernel_isa(), t, x, n, elem0, out);
}
void encode(DataType t, const void* x, std::uint64_t n, std::uint64_t elem0, const std::int32_t* exps,
            int nranks, std::int32_t* limbs) noexcept {
  detail::encode_with(numerics::detail::selected_kernel_isa(), t, x, n, elem0, exps, nranks, limbs);
}
void decode(DataType t, const std::int32_t* limbs, std::uint64_t n, std::uint64_t elem0,
            const std::int32_t* exps, int nranks, void* y) noexcept {
  detail::decode_with(numerics::detail::selected_kernel_isa(), t, limbs, n, elem0, exps, nranks, y);
}

BlockStats block_stats(const std::int32_t* exps, std::uint64_t nblocks, int nranks) noexcept {
  const int L = limb_bits(nranks);
  BlockStats s;
  for (std::uint64_t b = 0; b < nblocks; ++b) {
    const std::int64_t e = exps[2 * b], nlow = exps[2 * b + 1];
    if (e == kNonFinite) ++s.nonfinite;
    else if (e != kZero && e + nlow > 2 * L) ++s.inexact;
  }
  return s;
}

}  // namespace inc::numerics::repro
