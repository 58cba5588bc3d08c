// Internal to inc_proto: AES-256-GMAC (the GCM tag of an empty plaintext; the message is the
// additional authenticated data), the MAC of src/proto/auth. Several implementations give
// bit-identical tags and differ only in speed; one is chosen at run time by what the CPU has,
// once per process, like src/numerics/kernel_isa.hpp chooses the reduction kernels. Tests and
// benchmarks name an implementation explicitly to compare them.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace inc::proto::gmac {

enum class Isa : std::uint8_t {
  evp,     // OpenSSL's EVP AES-256-GCM, re-initialised per tag (any CPU)
  clmul,   // AES-NI + PCLMULQDQ on 128-bit registers, Karatsuba, 8 blocks per reduction
  avx512,  // AES-NI + VPCLMULQDQ on 512-bit registers (AVX-512 F/BW/VL), 32 blocks per reduction
  avx2,    // AES-NI + VPCLMULQDQ on 256-bit registers (AVX2), Karatsuba, 32 blocks per reduction
};
inline constexpr Isa kAllIsas[] = {Isa::evp, Isa::clmul, Isa::avx2, Isa::avx512};

constexpr std::string_view name(Isa isa) noexcept {
  return isa == Isa::evp ? "evp" : isa == Isa::clmul ? "clmul" : isa == Isa::avx2 ? "avx2" : "avx512";
}

// Compiled into this build and supported by this CPU (and its OS, for the 512-bit state).
bool available(Isa isa) noexcept;
// The fastest available implementation, unless use() chose another; what auth::Mac uses.
Isa selected() noexcept;
// Benchmarks: every MAC made from now on (switch, workers) uses `isa` if it is available
// (else evp). Returns the implementation now selected.
Isa use(Isa isa) noexcept;

inline constexpr std::size_t kKeyBytes = 32;
inline constexpr std::size_t kIvBytes = 12;
inline constexpr std::size_t kTagBytes = 16;

// The precomputed state of one key: the AES-256 round keys and the GHASH key's powers H^32..H^1
// (bit-reflected, premultiplied by x; see gmac_x86_inl.hpp), then zeros for masked tails; and
// for Karatsuba multiplication (clmul, avx2), each power's two 64-bit halves added, in both halves.
struct alignas(64) Tables {
  std::uint8_t powers[36][16];
  std::uint8_t karatsuba[36][16];
  std::uint8_t round_keys[15][16];
};

// One key's GMAC. Not copyable or movable (holds its tables inline); wipes them when destroyed.
class Gmac {
 public:
  // An unavailable `isa` falls back to evp.
  explicit Gmac(std::span<const std::uint8_t, kKeyBytes> key, Isa isa = selected());
  ~Gmac();
  Gmac(const Gmac&) = delete;
  Gmac& operator=(const Gmac&) = delete;

  Isa isa() const noexcept { return isa_; }
  // The tag of the concatenation of `parts` (empty parts allowed) under the 96-bit `iv`.
  // `pad`, if given, is pads()'s block of that `iv`, computed earlier (x86 implementations use
  // it instead of encrypting J0 again; evp ignores it).
  void tag(std::span<const std::span<const std::byte>> parts, const std::uint8_t* iv, std::uint8_t* out,
           const std::uint8_t* pad = nullptr) const;
  // AES(J0) for each of `n` IVs (`ivs`: n x kIvBytes; J0 = iv || 0x00000001) into `out`
  // (n x kTagBytes): the block a tag under that IV is XORed with, i.e. the tag of the empty
  // message. The x86 implementations encrypt up to kPadBatch blocks in one pipelined pass (AES
  // rounds have a latency of several cycles but several can be in flight), so that a sender or a
  // receiver that knows its next nonces pays a fraction of one AES per packet.
  static constexpr std::size_t kPadBatch = 8;
  void pads(const std::uint8_t* ivs, std::size_t n, std::uint8_t* out) const;

 private:
  Tables t_{};
  void* evp_ = nullptr;  // EVP_CIPHER_CTX*, evp only
  Isa isa_;
};

}  // namespace inc::proto::gmac
