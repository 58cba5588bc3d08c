// The hosts' width passes (widening.hpp): the scalar loops (generic) and the dispatch to the
// AVX2 ones (minifloat_x86_64_v3.cpp).
#include "numerics/widening.hpp"

#include <cmath>
#include <cstring>

#include "numerics/half.hpp"
#include "numerics/minifloat.hpp"
#include "numerics/mx_type.hpp"

namespace inc::numerics {

namespace {

bool use_v3(detail::KernelIsa isa) noexcept {
  return isa == detail::KernelIsa::x86_64_v3 && detail::kernel_isa_available(isa);
}

MxElem fp8_fmt(DataType t) noexcept { return t == DataType::e4m3 ? MxElem::fp8_e4m3 : MxElem::fp8_e5m2; }

// The scalar passes (what src/coll/widened.cpp ran per element before the vector ones).
void widen_generic(DataType t, const std::byte* src, std::size_t units, float* dst) noexcept {
  const std::size_t n = units * elements_per_unit(t);
  if (is_mx(t)) return mx_decode_blocks(t, src, units, dst);
  if (t == DataType::e4m3 || t == DataType::e5m2)
    return fp8_to_f32(fp8_fmt(t), reinterpret_cast<const std::uint8_t*>(src), n, dst);
  const bool bf = t == DataType::bf16;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    dst[i] = bf ? bf16_to_f32(h) : f16_to_f32(h);
  }
}

// The scalar pass (what src/coll/widened.cpp ran per element before) on `generic`; on x86_64_v3
// the fp8 encoder's and the f16/bf16 loops' AVX2 variants, the f16/bf16 tail scalar. (MX:
// mx_encode_blocks, which runs the selected variant's element encoder itself.)
std::uint64_t narrow_pass(detail::KernelIsa isa, DataType t, const float* in, std::size_t units,
                          std::byte* dst) noexcept {
  const std::size_t n = units * elements_per_unit(t);
  if (is_mx(t)) {
    mx_encode_blocks(t, in, units, dst);
    return 0;
  }
  if (t == DataType::e4m3 || t == DataType::e5m2)
    return detail::f32_to_fp8_counted_with(isa, fp8_fmt(t), in, n, reinterpret_cast<std::uint8_t*>(dst));
  const bool bf = t == DataType::bf16;
  const std::uint16_t mask = bf ? 0x7f80 : 0x7c00;
  std::uint64_t events = 0;
  std::size_t i = 0;
#if defined(INC_NUMERICS_X86_64_V3)
  if (use_v3(isa)) i = detail::f32_to_half_counted_x86_64_v3(!bf, in, n, dst, events);
#endif
  for (; i < n; ++i) {
    const std::uint16_t h = bf ? f32_to_bf16(in[i]) : f32_to_f16(in[i]);
    std::memcpy(dst + 2 * i, &h, 2);
    events += std::isfinite(in[i]) && (h & mask) == mask;
  }
  return events;
}

#if defined(INC_NUMERICS_X86_64_V3)
void widen_v3(DataType t, const std::byte* src, std::size_t units, float* dst) noexcept {
  const std::size_t n = units * elements_per_unit(t);
  if (t == DataType::f16 || t == DataType::bf16) return detail::half_to_f32_with(detail::KernelIsa::x86_64_v3, t, src, n, dst);
  const auto* p = reinterpret_cast<const std::uint8_t*>(src);
  if (!is_mx(t)) {  // e4m3, e5m2: decoded in integers / by vcvtph2ps, the tail by the table
    const float* table = mx_element_table(fp8_fmt(t)).data();
    for (std::size_t i = detail::fp8_to_f32_x86_64_v3(t == DataType::e4m3, p, n, false, 1.0f, dst); i < n; ++i)
      dst[i] = table[p[i]];
    return;
  }
  // MX: per block, the codes unpacked (8-bit ones read in place), decoded (fp8 elements as above,
  // the others gathered from the table) and scaled in f32 (mx_type.cpp's decode_block: element x
  // scale, one rounding of an exact product).
  const MxElem e = mx_elem_of(t);
  const bool fp8 = e == MxElem::fp8_e4m3 || e == MxElem::fp8_e5m2;
  const float* table = mx_element_table(e).data();
  const float* scales = mx_scale_table().data();
  const std::size_t esz = size_of(t);
  const bool eight = esz == 1 + kMxBlockElements;
  std::uint8_t codes[kMxBlockElements];
  for (std::size_t b = 0; b < units; ++b) {
    const std::uint8_t* blk = p + b * esz;
    const std::uint8_t* c = blk + 1;
    if (!eight) {
      mx_unpack_codes(t, blk + 1, codes);
      c = codes;
    }
    float* out = dst + b * kMxBlockElements;
    if (fp8) detail::fp8_to_f32_x86_64_v3(e == MxElem::fp8_e4m3, c, kMxBlockElements, true, scales[blk[0]], out);
    else detail::table_to_f32_x86_64_v3(table, c, kMxBlockElements, true, scales[blk[0]], out);
  }
}

#endif

}  // namespace

bool has_width_passes(DataType t) noexcept {
  return t == DataType::f16 || t == DataType::bf16 || t == DataType::e4m3 || t == DataType::e5m2 || is_mx(t);
}

namespace detail {

void widen_to_f32_with(KernelIsa isa, DataType t, const void* src, std::size_t units, float* dst) noexcept {
  const auto* s = static_cast<const std::byte*>(src);
#if defined(INC_NUMERICS_X86_64_V3)
  if (use_v3(isa)) return widen_v3(t, s, units, dst);
#else
  (void)isa;
#endif
  widen_generic(t, s, units, dst);
}

std::uint64_t narrow_from_f32_with(KernelIsa isa, DataType t, const float* src, std::size_t units,
                                   void* dst) noexcept {
  auto* d = static_cast<std::byte*>(dst);
  return narrow_pass(use_v3(isa) ? isa : KernelIsa::generic, t, src, units, d);
}

}  // namespace detail

void widen_to_f32(DataType t, const void* src, std::size_t units, float* dst) noexcept {
  detail::widen_to_f32_with(detail::selected_kernel_isa(), t, src, units, dst);
}

std::uint64_t narrow_from_f32(DataType t, const float* src, std::size_t units, void* dst) noexcept {
  return detail::narrow_from_f32_with(detail::selected_kernel_isa(), t, src, units, dst);
}

}  // namespace inc::numerics
