// Bit packing of element codes (bitpack.hpp): the generic loops and the dispatch to AVX2.
#include "numerics/bitpack.hpp"

#include <cstring>

namespace inc::numerics {

namespace {

std::uint8_t* pack_generic(unsigned bits, const std::uint8_t* codes, std::size_t n, std::uint8_t* out) noexcept {
  if (bits == 8) {
    if (n) std::memcpy(out, codes, n);
    return out + n;
  }
  std::uint32_t acc = 0;
  unsigned have = 0;
  for (std::size_t i = 0; i < n; ++i) {
    acc |= static_cast<std::uint32_t>(codes[i] & ((1u << bits) - 1)) << have;
    for (have += bits; have >= 8; have -= 8, acc >>= 8) *out++ = static_cast<std::uint8_t>(acc);
  }
  if (have) *out++ = static_cast<std::uint8_t>(acc);
  return out;
}

void unpack_generic(unsigned bits, const std::uint8_t* in, std::size_t n, std::uint8_t* codes) noexcept {
  if (bits == 8) {
    if (n) std::memcpy(codes, in, n);
    return;
  }
  std::uint32_t acc = 0;
  unsigned have = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (have < bits) {
      acc |= static_cast<std::uint32_t>(*in++) << have;
      have += 8;
    }
    codes[i] = static_cast<std::uint8_t>(acc & ((1u << bits) - 1));
    acc >>= bits;
    have -= bits;
  }
}

}  // namespace

namespace detail {

std::uint8_t* pack_codes_with(KernelIsa isa, unsigned bits, const std::uint8_t* codes, std::size_t n,
                              std::uint8_t* out) noexcept {
  std::size_t done = 0;
#if defined(INC_NUMERICS_X86_64_V3)
  if (isa == KernelIsa::x86_64_v3 && kernel_isa_available(isa)) done = pack_codes_x86_64_v3(bits, codes, n, out);
#else
  (void)isa;
#endif
  // done is a multiple of 32 codes: a whole number of bytes for every width
  return pack_generic(bits, codes + done, n - done, out + done * bits / 8);
}

void unpack_codes_with(KernelIsa isa, unsigned bits, const std::uint8_t* in, std::size_t n,
                       std::uint8_t* codes) noexcept {
  std::size_t done = 0;
#if defined(INC_NUMERICS_X86_64_V3)
  if (isa == KernelIsa::x86_64_v3 && kernel_isa_available(isa)) done = unpack_codes_x86_64_v3(bits, in, n, codes);
#else
  (void)isa;
#endif
  unpack_generic(bits, in + done * bits / 8, n - done, codes + done);
}

}  // namespace detail

std::uint8_t* pack_codes(unsigned bits, const std::uint8_t* codes, std::size_t n, std::uint8_t* out) noexcept {
  return detail::pack_codes_with(detail::selected_kernel_isa(), bits, codes, n, out);
}

void unpack_codes(unsigned bits, const std::uint8_t* in, std::size_t n, std::uint8_t* codes) noexcept {
  detail::unpack_codes_with(detail::selected_kernel_isa(), bits, in, n, codes);
}

}  // namespace inc::numerics
