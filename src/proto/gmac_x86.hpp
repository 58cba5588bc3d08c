// Internal to gmac.cpp: the x86 implementations of AES-256-GMAC, each compiled in its own file
// with its own instruction-set flags (gmac_clmul.cpp, gmac_avx2.cpp,
// gmac_avx512.cpp) and called only when
// gmac::available() says the CPU has them. Plain pointers only, no inline library code, so
// nothing compiled for one instruction set is shared with another file.
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/proto/gmac.hpp"

namespace inc::proto::gmac::x86 {

struct Part {
  const std::uint8_t* data;
  std::size_t size;
};

// AES-NI + PCLMULQDQ: the AES-256 key schedule of `key` and the GHASH key powers into `t`.
void clmul_setup(const std::uint8_t* key, Tables& t);
// The tag of the concatenation of `parts` under `iv` (12 bytes) into `out` (16 bytes); `pad`:
// AES(J0) of `iv` if known (aes_pads), else null.
void clmul_tag(const Tables& t, const Part* parts, std::size_t nparts, const std::uint8_t* iv,
               const std::uint8_t* pad, std::uint8_t* out);
// AES(iv || 0x00000001) of up to kPadBatch IVs (12 bytes each), interleaved, into `out` (16 each).
void aes_pads(const Tables& t, const std::uint8_t* ivs, std::size_t n, std::uint8_t* out);
// The same with VPCLMULQDQ on 256-bit registers and AVX2 (tables from clmul_setup).
void avx2_tag(const Tables& t, const Part* parts, std::size_t nparts, const std::uint8_t* iv,
              const std::uint8_t* pad, std::uint8_t* out);
// The same with VPCLMULQDQ on 512-bit registers (tables from clmul_setup).
void avx512_tag(const Tables& t, const Part* parts, std::size_t nparts, const std::uint8_t* iv,
                const std::uint8_t* pad, std::uint8_t* out);

}  // namespace inc::proto::gmac::x86
