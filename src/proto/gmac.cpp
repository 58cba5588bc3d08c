#include "src/proto/gmac.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#if defined(INC_PROTO_GMAC_X86)
#include "src/proto/gmac_x86.hpp"
#endif

namespace inc::proto::gmac {

bool available(Isa isa) noexcept {
#if defined(INC_PROTO_GMAC_X86)
  __builtin_cpu_init();  // idempotent; needed if a MAC is made during static initialisation
#endif
  switch (isa) {
    case Isa::evp: return true;
    case Isa::clmul:
#if defined(INC_PROTO_GMAC_X86)
      return __builtin_cpu_supports("aes") && __builtin_cpu_supports("pclmul") &&
             __builtin_cpu_supports("ssse3");
#else
      return false;
#endif
    case Isa::avx2:
#if defined(INC_PROTO_GMAC_X86)
      // avx2 is reported only when the OS saves the 256-bit state.
      return available(Isa::clmul) && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("vpclmulqdq");
#else
      return false;
#endif
    case Isa::avx512:
#if defined(INC_PROTO_GMAC_X86)
      // avx512f is reported only when the OS saves the 512-bit state.
      return available(Isa::clmul) && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("vpclmulqdq");
#else
      return false;
#endif
  }
  return false;
}

namespace {
std::atomic<Isa>& chosen() noexcept {
  // Decided once per process (or by use()); every implementation gives the same tags.
  static std::atomic<Isa> isa{available(Isa::avx512) ? Isa::avx512
                                : available(Isa::avx2)   ? Isa::avx2
                                : available(Isa::clmul) ? Isa::clmul : Isa::evp};
  return isa;
}
}  // namespace

Isa selected() noexcept { return chosen().load(std::memory_order_relaxed); }

Isa use(Isa isa) noexcept {
  const Isa got = available(isa) ? isa : Isa::evp;
  chosen().store(got, std::memory_order_relaxed);
  return got;
}

Gmac::Gmac(std::span<const std::uint8_t, kKeyBytes> key, Isa isa) : isa_(available(isa) ? isa : Isa::evp) {
#if defined(INC_PROTO_GMAC_X86)
  if (isa_ != Isa::evp) {
    x86::clmul_setup(key.data(), t_);
    return;
  }
#endif
  auto* c = EVP_CIPHER_CTX_new();
  evp_ = c;
  if (!c || EVP_EncryptInit_ex(c, EVP_aes_256_gcm(), nullptr, key.data(), nullptr) != 1) {
    EVP_CIPHER_CTX_free(c);
    throw std::runtime_error("AES-256-GCM set-up failed");
  }
}

Gmac::~Gmac() {
  EVP_CIPHER_CTX_free(static_cast<EVP_CIPHER_CTX*>(evp_));
  OPENSSL_cleanse(&t_, sizeof t_);
}

void Gmac::pads(const std::uint8_t* ivs, std::size_t n, std::uint8_t* out) const {
#if defined(INC_PROTO_GMAC_X86)
  if (isa_ != Isa::evp) {
    for (std::size_t i = 0; i < n; i += kPadBatch)
      x86::aes_pads(t_, ivs + kIvBytes * i, n - i < kPadBatch ? n - i : kPadBatch, out + kTagBytes * i);
    return;
  }
#endif
  // The tag of the empty message is AES(J0) XOR GHASH of a zero length block, which is zero.
  for (std::size_t i = 0; i < n; ++i) tag({}, ivs + kIvBytes * i, out + kTagBytes * i);
}

void Gmac::tag(std::span<const std::span<const std::byte>> parts, const std::uint8_t* iv, std::uint8_t* out,
               const std::uint8_t* pad) const {
#if defined(INC_PROTO_GMAC_X86)
  if (isa_ != Isa::evp) {
    x86::Part few[8];  // a packet has 1-3 parts; more go to the heap
    std::vector<x86::Part> many(parts.size() > std::size(few) ? parts.size() : 0);
    x86::Part* p = many.empty() ? few : many.data();
    for (std::size_t i = 0; i < parts.size(); ++i)
      p[i] = {reinterpret_cast<const std::uint8_t*>(parts[i].data()), parts[i].size()};
    (isa_ == Isa::avx512 ? x86::avx512_tag : isa_ == Isa::avx2 ? x86::avx2_tag : x86::clmul_tag)(t_, p, parts.size(),
                                                                                                 iv, pad, out);
    return;
  }
#endif
  // EVP: the IV re-initialises the context (~350 ns), AAD in pieces, then the tag (no use for
  // a pad).
  auto* c = static_cast<EVP_CIPHER_CTX*>(evp_);
  int outl = 0;
  bool ok = EVP_EncryptInit_ex(c, nullptr, nullptr, nullptr, iv) == 1;
  for (const auto& part : parts)
    ok = ok && (part.empty() || EVP_EncryptUpdate(c, nullptr, &outl, reinterpret_cast<const unsigned char*>(part.data()),
                                                  int(part.size())) == 1);
  if (!ok || EVP_EncryptFinal_ex(c, out, &outl) != 1 ||
      EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, int(kTagBytes), out) != 1)
    throw std::runtime_error("AES-256-GMAC failed");
}

}  // namespace inc::proto::gmac
