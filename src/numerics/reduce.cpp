// reduce(): dispatch to the best compiled kernel variant (kernels.hpp, kernel_isa.hpp);
// element access (not hot) lives here only.
#include "numerics/reduce.hpp"

#include <cstring>
#include <limits>
#include <type_traits>

#include "numerics/fp8.hpp"
#include "numerics/half.hpp"
#include "numerics/int4.hpp"
#include "numerics/kernel_isa.hpp"
#include "numerics/mx_type.hpp"
#include "numerics/kernels.hpp"
#include "numerics/kernels_counted.hpp"

namespace inc::numerics {

namespace detail {
#if defined(INC_NUMERICS_X86_64_V3)
void reduce_x86_64_v3(DataType t, ReduceOp op, void* dst, const void* a, const void* b,
                      std::size_t n) noexcept;  // reduce_x86_64_v3.cpp
void divide_x86_64_v3(DataType t, void* buf, std::size_t count, std::uint64_t n) noexcept;
bool sum_counted_x86_64_v3(DataType t, void* dst, const void* a, const void* b, std::size_t n,
                           std::uint64_t& events) noexcept;
#endif

bool kernel_isa_available(KernelIsa isa) noexcept {
  switch (isa) {
    case KernelIsa::generic: return true;
    case KernelIsa::x86_64_v3:
#if defined(INC_NUMERICS_X86_64_V3)
      return __builtin_cpu_supports("x86-64-v3");
#else
      return false;
#endif
  }
  return false;
}

KernelIsa selected_kernel_isa() noexcept {
  // Decided once per process. Every variant gives bit-identical results; only speed differs.
  static const KernelIsa isa =
      kernel_isa_available(KernelIsa::x86_64_v3) ? KernelIsa::x86_64_v3 : KernelIsa::generic;
  return isa;
}

void reduce_with(KernelIsa isa, DataType t, ReduceOp op, void* dst, const void* a, const void* b,
                 std::size_t count) noexcept {
  if (count == 0) return;
#if defined(INC_NUMERICS_X86_64_V3)
  if (isa == KernelIsa::x86_64_v3 && kernel_isa_available(isa))
    return reduce_x86_64_v3(t, op, dst, a, b, count);
#endif
  (void)isa;
  kern::reduce_all<kern::F16Soft>(t, op, dst, a, b, count);
}
bool sum_counted_with(KernelIsa isa, DataType t, void* dst, const void* a, const void* b,
                      std::size_t count, std::uint64_t& events) noexcept {
#if defined(INC_NUMERICS_X86_64_V3)
  if (isa == KernelIsa::x86_64_v3 && kernel_isa_available(isa))
    return sum_counted_x86_64_v3(t, dst, a, b, count, events);
#endif
  (void)isa;
  return kern::sum_counted_all<kern::AnyLanes>(t, dst, a, b, count, events);
}
void divide_with(KernelIsa isa, DataType t, void* buf, std::size_t count,
                 std::uint64_t n) noexcept {
  if (count == 0 || n == 0) return;  // n == 0 is a caller error; leave the data untouched
#if defined(INC_NUMERICS_X86_64_V3)
  if (isa == KernelIsa::x86_64_v3 && kernel_isa_available(isa))
    return divide_x86_64_v3(t, buf, count, n);
#endif
  (void)isa;
  kern::divide_all<kern::F16Soft>(t, buf, count, n);
}
}  // namespace detail

namespace {

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
  if (is_mx(t)) return mx_reduce(t, op, dst, a, b, count);  // blocks: mx_type.cpp
  detail::reduce_with(detail::selected_kernel_isa(), t, op, dst, a, b, count);
}

void divide(DataType t, void* buf, std::size_t count, std::uint64_t n) noexcept {
  if (is_mx(t)) return mx_divide(t, buf, count, n);
  detail::divide_with(detail::selected_kernel_isa(), t, buf, count, n);
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
    case DataType::e4m3: return e4m3_to_f32(load_raw<std::uint8_t>(buf, i));
    case DataType::e5m2: return e5m2_to_f32(load_raw<std::uint8_t>(buf, i));
    case DataType::i4: return i4_get(load_raw<std::uint8_t>(buf, i / 2), i % 2);
    case DataType::mxfp8_e4m3: case DataType::mxfp8_e5m2: case DataType::mxint8:
    case DataType::mxfp4: case DataType::mxfp6_e2m3: case DataType::mxfp6_e3m2: return mx_load(t, buf, i);
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
    case DataType::e4m3: return store_raw(buf, i, f64_to_e4m3(v));
    case DataType::e5m2: return store_raw(buf, i, f64_to_e5m2(v));
    case DataType::i4: {
      const double c = v != v ? 0.0 : v <= -8.0 ? -8.0 : v >= 7.0 ? 7.0 : v;
      return store_raw(buf, i / 2,
                       i4_set(load_raw<std::uint8_t>(buf, i / 2), i % 2, static_cast<int>(c)));
    }
    case DataType::mxfp8_e4m3: case DataType::mxfp8_e5m2: case DataType::mxint8:
    case DataType::mxfp4: case DataType::mxfp6_e2m3: case DataType::mxfp6_e3m2: return mx_store(t, buf, i, v);
  }
}

}  // namespace inc::numerics
