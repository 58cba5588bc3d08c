// Reduction kernels. Each (type, op) pair is one plain loop over typed pointers; GCC 12
// vectorises all of them at -O3 (see docs/NUMERICS.md for how this was checked). The loops
// need no restrict: GCC's runtime overlap check accepts distance 0, so in-place calls
// (dst == a or dst == b) take the vector path too.
#include "numerics/reduce.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "numerics/half.hpp"

namespace inc::numerics {
namespace {

// Storage tags for the 16-bit float formats: the element is a uint16_t bit pattern, the
// arithmetic is done in f32.
struct F16 {
  using storage = std::uint16_t;
  static float load(storage v) noexcept { return f16_to_f32(v); }
  static storage store(float v) noexcept { return f32_to_f16(v); }
};
struct BF16 {
  using storage = std::uint16_t;
  static float load(storage v) noexcept { return bf16_to_f32(v); }
  static storage store(float v) noexcept { return f32_to_bf16(v); }
};

// Floating-point min/max follow IEEE 754-2019 minimum/maximum: a NaN operand gives a (quiet)
// NaN, and -0 < +0. Both choices make the operation commutative, so a reduction's result does
// not depend on the order in which ranks or switch ports are combined (NaN payloads aside).
template <class F>
F fmax_prop(F a, F b) noexcept {
  F m = a > b ? a : b;
  // Equal values differ only for +0/-0: take the operand with the sign bit clear.
  m = a == b ? (std::signbit(a) ? b : a) : m;
  // a + b is a quiet NaN whenever a or b is NaN.
  m = (a != a || b != b) ? a + b : m;
  return m;
}
template <class F>
F fmin_prop(F a, F b) noexcept {
  F m = a < b ? a : b;
  m = a == b ? (std::signbit(a) ? a : b) : m;
  m = (a != a || b != b) ? a + b : m;
  return m;
}

struct Sum {
  template <class T>
  T operator()(T a, T b) const noexcept {
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
  T operator()(T a, T b) const noexcept {
    if constexpr (std::is_integral_v<T>) {
      // Unsigned, and at least unsigned int so that u8/i8 do not promote to signed int.
      using U = std::common_type_t<std::make_unsigned_t<T>, unsigned>;
      return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
    } else {
      return a * b;
    }
  }
};
struct Min {
  template <class T>
  T operator()(T a, T b) const noexcept {
    if constexpr (std::is_integral_v<T>) {
      return a < b ? a : b;
    } else {
      return fmin_prop(a, b);
    }
  }
};
struct Max {
  template <class T>
  T operator()(T a, T b) const noexcept {
    if constexpr (std::is_integral_v<T>) {
      return a > b ? a : b;
    } else {
      return fmax_prop(a, b);
    }
  }
};

template <class T, class Op>
void combine(void* dst, const void* a, const void* b, std::size_t n) noexcept {
  auto* d = static_cast<T*>(dst);
  const auto* x = static_cast<const T*>(a);
  const auto* y = static_cast<const T*>(b);
  const Op op;
  for (std::size_t i = 0; i < n; ++i) d[i] = op(x[i], y[i]);
}

// 16-bit floats: widen both operands to f32, combine, round once. One fused loop per block;
// the block keeps the f32 temporaries in registers/L1 and bounds the loop for the vectoriser.
template <class H, class Op>
void combine_half(void* dst, const void* a, const void* b, std::size_t n) noexcept {
  using S = typename H::storage;
  auto* d = static_cast<S*>(dst);
  const auto* x = static_cast<const S*>(a);
  const auto* y = static_cast<const S*>(b);
  const Op op;
  for (std::size_t i = 0; i < n; ++i) d[i] = H::store(op(H::load(x[i]), H::load(y[i])));
}

template <class Op>
void dispatch_type(DataType t, void* dst, const void* a, const void* b, std::size_t n) noexcept {
  switch (t) {
    case DataType::f64: return combine<double, Op>(dst, a, b, n);
    case DataType::f32: return combine<float, Op>(dst, a, b, n);
    case DataType::f16: return combine_half<F16, Op>(dst, a, b, n);
    case DataType::bf16: return combine_half<BF16, Op>(dst, a, b, n);
    case DataType::i8: return combine<std::int8_t, Op>(dst, a, b, n);
    case DataType::u8: return combine<std::uint8_t, Op>(dst, a, b, n);
    case DataType::i32: return combine<std::int32_t, Op>(dst, a, b, n);
    case DataType::u32: return combine<std::uint32_t, Op>(dst, a, b, n);
    case DataType::i64: return combine<std::int64_t, Op>(dst, a, b, n);
    case DataType::u64: return combine<std::uint64_t, Op>(dst, a, b, n);
  }
}

template <class T>
void divide_int(void* buf, std::size_t n, std::uint64_t d) noexcept {
  auto* p = static_cast<T*>(buf);
  if constexpr (std::is_signed_v<T>) {
    // |x| <= 2^63 < d means every quotient truncates to 0.
    if (d > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      for (std::size_t i = 0; i < n; ++i) p[i] = 0;
      return;
    }
    const auto sd = static_cast<std::int64_t>(d);
    for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<T>(static_cast<std::int64_t>(p[i]) / sd);
  } else {
    for (std::size_t i = 0; i < n; ++i)
      p[i] = static_cast<T>(static_cast<std::uint64_t>(p[i]) / d);
  }
}

template <class F>
void divide_float(void* buf, std::size_t n, std::uint64_t d) noexcept {
  auto* p = static_cast<F*>(buf);
  const F fd = static_cast<F>(d);
  for (std::size_t i = 0; i < n; ++i) p[i] = p[i] / fd;
}

template <class H>
void divide_half(void* buf, std::size_t n, std::uint64_t d) noexcept {
  auto* p = static_cast<std::uint16_t*>(buf);
  const float fd = static_cast<float>(d);
  for (std::size_t i = 0; i < n; ++i) p[i] = H::store(H::load(p[i]) / fd);
}

template <class T>
T load_raw(const void* buf, std::size_t i) noexcept {
  T v;
  std::memcpy(&v, static_cast<const unsigned char*>(buf) + i * sizeof(T), sizeof(T));
  return v;
}
template <class T>
void store_raw(void* buf, std::size_t i, T v) noexcept {
  std::memcpy(static_cast<unsigned char*>(buf) + i * sizeof(T), &v, sizeof(T));
}

// double -> integer with defined results for every input: NaN -> 0, out of range saturates,
// otherwise truncation toward zero (as a C++ cast).
template <class T>
T saturate_cast(double v) noexcept {
  if (v != v) return 0;
  constexpr double lo = static_cast<double>(std::numeric_limits<T>::min());
  // 2^bits (unsigned) or 2^(bits-1) (signed): exactly representable, first value out of range.
  constexpr double hi_excl = std::is_signed_v<T> ? -lo
                                                 : 2.0 * static_cast<double>(std::uint64_t{1}
                                                                             << (sizeof(T) * 8 - 1));
  if (v <= lo) return std::numeric_limits<T>::min();
  if (v >= hi_excl) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}

}  // namespace

void reduce(DataType t, ReduceOp op, void* dst, const void* a, const void* b,
            std::size_t count) noexcept {
  if (count == 0) return;
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return dispatch_type<Sum>(t, dst, a, b, count);
    case ReduceOp::prod: return dispatch_type<Prod>(t, dst, a, b, count);
    case ReduceOp::min: return dispatch_type<Min>(t, dst, a, b, count);
    case ReduceOp::max: return dispatch_type<Max>(t, dst, a, b, count);
  }
}

void divide(DataType t, void* buf, std::size_t count, std::uint64_t n) noexcept {
  if (count == 0 || n == 0) return;  // n == 0 is a caller error; leave the data untouched
  switch (t) {
    case DataType::f64: return divide_float<double>(buf, count, n);
    case DataType::f32: return divide_float<float>(buf, count, n);
    case DataType::f16: return divide_half<F16>(buf, count, n);
    case DataType::bf16: return divide_half<BF16>(buf, count, n);
    case DataType::i8: return divide_int<std::int8_t>(buf, count, n);
    case DataType::u8: return divide_int<std::uint8_t>(buf, count, n);
    case DataType::i32: return divide_int<std::int32_t>(buf, count, n);
    case DataType::u32: return divide_int<std::uint32_t>(buf, count, n);
    case DataType::i64: return divide_int<std::int64_t>(buf, count, n);
    case DataType::u64: return divide_int<std::uint64_t>(buf, count, n);
  }
}

double load_as_double(DataType t, const void* buf, std::size_t i) noexcept {
  switch (t) {
    case DataType::f64: return load_raw<double>(buf, i);
    case DataType::f32: return load_raw<float>(buf, i);
    case DataType::f16: return f16_to_f32(load_raw<std::uint16_t>(buf, i));
    case DataType::bf16: return bf16_to_f32(load_raw<std::uint16_t>(buf, i));
    case DataType::i8: return load_raw<std::int8_t>(buf, i);
    case DataType::u8: return load_raw<std::uint8_t>(buf, i);
    case DataType::i32: return load_raw<std::int32_t>(buf, i);
    case DataType::u32: return load_raw<std::uint32_t>(buf, i);
    case DataType::i64: return static_cast<double>(load_raw<std::int64_t>(buf, i));
    case DataType::u64: return static_cast<double>(load_raw<std::uint64_t>(buf, i));
  }
  return 0.0;
}

void store_from_double(DataType t, void* buf, std::size_t i, double v) noexcept {
  switch (t) {
    case DataType::f64: return store_raw<double>(buf, i, v);
    case DataType::f32: return store_raw<float>(buf, i, static_cast<float>(v));
    case DataType::f16: return store_raw<std::uint16_t>(buf, i, f64_to_f16(v));
    case DataType::bf16: return store_raw<std::uint16_t>(buf, i, f64_to_bf16(v));
    case DataType::i8: return store_raw(buf, i, saturate_cast<std::int8_t>(v));
    case DataType::u8: return store_raw(buf, i, saturate_cast<std::uint8_t>(v));
    case DataType::i32: return store_raw(buf, i, saturate_cast<std::int32_t>(v));
    case DataType::u32: return store_raw(buf, i, saturate_cast<std::uint32_t>(v));
    case DataType::i64: return store_raw(buf, i, saturate_cast<std::int64_t>(v));
    case DataType::u64: return store_raw(buf, i, saturate_cast<std::uint64_t>(v));
  }
}

}  // namespace inc::numerics
