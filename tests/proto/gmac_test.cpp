// AES-256-GMAC (src/proto/gmac.hpp): every implementation this CPU can run gives the NIST tags
// and the same tag as OpenSSL's EVP path on random keys, IVs, lengths and part splits; auth::Mac
// gives the same trailer whichever it uses.
#include "src/proto/gmac.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "src/proto/auth.hpp"
#include "src/proto/packet.hpp"

namespace inc::proto::gmac {
namespace {

std::vector<std::uint8_t> unhex(std::string_view h) {
  std::vector<std::uint8_t> v;
  for (std::size_t i = 0; i + 1 < h.size(); i += 2) v.push_back(std::uint8_t(std::stoi(std::string(h.substr(i, 2)), nullptr, 16)));
  return v;
}

std::vector<Isa> runnable() {
  std::vector<Isa> v;
  for (Isa i : kAllIsas)
    if (available(i)) v.push_back(i);
  return v;
}

std::string hex(const std::uint8_t* p, std::size_t n) {
  std::string s;
  char b[3];
  for (std::size_t i = 0; i < n; ++i) {
    std::snprintf(b, sizeof b, "%02x", p[i]);
    s += b;
  }
  return s;
}

std::string tag_hex(const Gmac& g, const std::vector<std::span<const std::byte>>& parts, const std::uint8_t* iv) {
  std::uint8_t t[kTagBytes];
  g.tag(parts, iv, t);
  return hex(t, sizeof t);
}

// A random key from `rng` and its Gmac with each implementation this CPU runs, evp first.
std::vector<std::unique_ptr<Gmac>> every_gmac_of_a_random_key(std::mt19937_64& rng) {
  std::array<std::uint8_t, kKeyBytes> key;
  for (auto& b : key) b = std::uint8_t(rng());
  std::vector<std::unique_ptr<Gmac>> impls;
  for (Isa isa : runnable()) impls.push_back(std::make_unique<Gmac>(key, isa));
  return impls;
}

TEST(Gmac, ReportsWhatRuns) {
  EXPECT_TRUE(available(Isa::evp));
  EXPECT_TRUE(available(selected()));
  for (Isa i : kAllIsas) std::printf("gmac %s: %s\n", std::string(name(i)).c_str(), available(i) ? "available" : "not available");
  std::printf("selected: %s\n", std::string(name(selected())).c_str());
}

// NIST CAVP gcmEncryptExtIV256.rsp (Keylen 256, IVlen 96, PTlen 0, AADlen 0 and 128), and the
// GCM specification's test case 13 (McGrew & Viega: zero key, zero IV, nothing).
TEST(Gmac, NistVectorsWithEmptyPlaintext) {
  struct V {
    const char *key, *iv, *aad, *tag;
  };
  const V vs[] = {
      {"b52c505a37d78eda5dd34f20c22540ea1b58963cf8e5bf8ffa85f9f2492505b4", "516c33929df5a3284ff463d7", "",
       "bdc1ac884d332457a1d2664f168c76f0"},
      {"5fe0861cdc2690ce69b3658c7f26f8458eec1c9243c5ba0845305d897e96ca0f", "770ac1a5a3d476d5d96944a1", "",
       "196d691e1047093ca4b3d2ef4baba216"},
      {"78dc4e0aaf52d935c3c01eea57428f00ca1fd475f5da86a49c8dd73d68c8e223", "d79cf22d504cc793c3fb6c8a",
       "b96baa8c1c75a671bfb2d08d06be5f36", "3e5d486aa2e30b22e040b85723a06e76"},
      {"4457ff33683cca6ca493878bdc00373893a9763412eef8cddb54f91318e0da88", "699d1f29d7b8c55300bb1fd2",
       "6749daeea367d0e9809e2dc2f309e6e3", "d60c74d2517fde4a74e0cd4709ed43a9"},
      {"0000000000000000000000000000000000000000000000000000000000000000", "000000000000000000000000", "",
       "530f8afbc74536b9a963b4f1c4cb738b"},
  };
  for (Isa isa : runnable()) {
    for (const V& v : vs) {
      const auto key = unhex(v.key), iv = unhex(v.iv), aad = unhex(v.aad);
      Gmac g(std::span<const std::uint8_t, kKeyBytes>(key.data(), kKeyBytes), isa);
      ASSERT_EQ(g.isa(), isa);
      const std::span<const std::byte> whole(reinterpret_cast<const std::byte*>(aad.data()), aad.size());
      EXPECT_EQ(tag_hex(g, {whole}, iv.data()), v.tag) << name(isa) << " key " << v.key;
      // The same message split into single bytes.
      std::vector<std::span<const std::byte>> bytes;
      for (std::size_t i = 0; i < std::min<std::size_t>(aad.size(), 8); ++i) bytes.push_back(whole.subspan(i, 1));
      if (aad.size() > 8) bytes.push_back(whole.subspan(8));
      EXPECT_EQ(tag_hex(g, bytes, iv.data()), v.tag) << name(isa) << " in bytes";
    }
  }
}

// Against EVP: random keys and IVs, every length that crosses a block, a reduction stride or a
// masked tail boundary, and the maximum packet, whole and in random parts (up to 12, as
// seal_parts makes 3), parts misaligned in memory.
TEST(Gmac, EveryImplementationMatchesEvp) {
  std::mt19937_64 rng(20261201);
  std::vector<std::size_t> lengths = {0, 1, 15, 16, 17, 31, 32, 33, 48, 63, 64, 65, 127, 128, 129, 255, 256, 257,
                                      511, 512, 513, 1023, 1024, 1025, 4096 + 56, 8192 + 56,
                                      kMaxPacketBytes - auth::kTagBytes, kMaxPacketBytes};
  for (int i = 0; i < 40; ++i) lengths.push_back(rng() % (kMaxPacketBytes + 1));
  std::vector<std::uint8_t> buf(kMaxPacketBytes + 64);
  int checked = 0;
  for (int round = 0; round < 6; ++round) {
    std::array<std::uint8_t, kKeyBytes> key;
    for (auto& b : key) b = std::uint8_t(rng());
    const Gmac ref(key, Isa::evp);
    std::vector<std::unique_ptr<Gmac>> fast;
    for (Isa isa : runnable())
      if (isa != Isa::evp) fast.push_back(std::make_unique<Gmac>(key, isa));
    for (auto& b : buf) b = std::uint8_t(rng());
    for (std::size_t len : lengths) {
      std::uint8_t iv[kIvBytes];
      for (auto& b : iv) b = std::uint8_t(rng());
      const std::size_t skew = rng() % 64;  // where the message starts in memory
      const std::span<const std::byte> msg(reinterpret_cast<const std::byte*>(buf.data()) + skew, len);
      std::vector<std::vector<std::span<const std::byte>>> splits = {{msg}, {}};
      // Random cut points, empty parts included.
      const std::size_t nparts = 1 + rng() % 12;
      std::vector<std::size_t> cuts = {0, len};
      for (std::size_t c = 1; c < nparts; ++c) cuts.push_back(len ? rng() % (len + 1) : 0);
      std::sort(cuts.begin(), cuts.end());
      for (std::size_t c = 0; c + 1 < cuts.size(); ++c) splits[1].push_back(msg.subspan(cuts[c], cuts[c + 1] - cuts[c]));
      // Like seal_parts: a 32-byte head, the payload, a 24-byte trailer part.
      if (len >= 56) splits.push_back({msg.first(32), msg.subspan(32, len - 56), msg.last(24)});
      const std::string want = tag_hex(ref, {msg}, iv);
      for (const auto& parts : splits) {
        EXPECT_EQ(tag_hex(ref, parts, iv), want) << "evp in " << parts.size() << " parts, length " << len;
        for (const auto& g : fast) {
          EXPECT_EQ(tag_hex(*g, parts, iv), want) << name(g->isa()) << " length " << len << " in " << parts.size() << " parts";
          ++checked;
        }
      }
    }
  }
  std::printf("%d tags compared with evp\n", checked);
}

// Precomputed pads (Gmac::pads, a batch of AES(J0) at a time) against the tag that encrypts its
// own J0 and against EVP, at every length 0..9000 (each block, stride and tail boundary), and
// a tampered message or nonce refused by every implementation.
TEST(Gmac, PrecomputedPadsGiveTheSameTagsAtEveryLength) {
  std::mt19937_64 rng(20261202);
  const auto impls = every_gmac_of_a_random_key(rng);
  const Gmac& ref = *impls[0];
  constexpr std::size_t kMax = 9000, B = Gmac::kPadBatch;
  std::vector<std::uint8_t> buf(kMax + 64);
  for (auto& b : buf) b = std::uint8_t(rng());
  std::vector<std::uint8_t> ivs((kMax + B) * kIvBytes);
  for (auto& b : ivs) b = std::uint8_t(rng());
  // Every implementation's pads, a batch of B at a time (the last batch short), equal EVP's.
  std::vector<std::vector<std::uint8_t>> pads(impls.size(), std::vector<std::uint8_t>((kMax + 1) * kTagBytes));
  for (std::size_t k = 0; k < impls.size(); ++k)
    for (std::size_t i = 0; i <= kMax; i += B)
      impls[k]->pads(&ivs[i * kIvBytes], std::min(B, kMax + 1 - i), &pads[k][i * kTagBytes]);
  for (std::size_t k = 1; k < impls.size(); ++k)
    ASSERT_EQ(hex(pads[k].data(), pads[k].size()), hex(pads[0].data(), pads[0].size())) << name(impls[k]->isa());
  int refused = 0;
  for (std::size_t len = 0; len <= kMax; ++len) {
    const std::uint8_t* iv = &ivs[len * kIvBytes];
    const std::size_t skew = len % 61;
    auto* msg = reinterpret_cast<std::byte*>(buf.data()) + skew;
    const std::vector<std::span<const std::byte>> whole = {{msg, len}};
    const std::string want = tag_hex(ref, whole, iv);
    std::uint8_t t[kTagBytes];
    for (std::size_t k = 0; k < impls.size(); ++k) {
      const Gmac& g = *impls[k];
      const std::uint8_t* pad = &pads[k][len * kTagBytes];
      g.tag(whole, iv, t, pad);
      ASSERT_EQ(hex(t, sizeof t), want) << name(g.isa()) << " with its pad, length " << len;
      ASSERT_EQ(tag_hex(g, whole, iv), want) << name(g.isa()) << " without a pad, length " << len;
      // Tampered: one byte of the message, or the nonce (the next one's IV and pad).
      if (len > 0) {
        const std::size_t at = rng() % len;
        const std::byte flip = std::byte(1u << (rng() % 8));
        msg[at] ^= flip;
        g.tag(whole, iv, t, pad);
        msg[at] ^= flip;
        EXPECT_NE(hex(t, sizeof t), want) << name(g.isa()) << " took byte " << at << " changed, length " << len;
        refused += hex(t, sizeof t) != want;
      }
      if (len < kMax) {
        g.tag(whole, iv + kIvBytes, t, pad + kTagBytes);
        EXPECT_NE(hex(t, sizeof t), want) << name(g.isa()) << " took another nonce, length " << len;
        refused += hex(t, sizeof t) != want;
      }
    }
  }
  std::printf("%zu implementations x %zu lengths with pads; %d tampered tags refused\n", impls.size(), kMax + 1,
              refused);
}

// The unstaged path (gmac_avx2.cpp: parts' whole blocks where they lie, the last partial block
// loaded as the 16 bytes ending there): at every length 0..9000, the message in a heap buffer of
// exactly its size (a read before or after it is an ASan error in the sanitizer build), whole and
// in the splits a packet has (a 32-byte head, the payload, a 24-byte trailer; head + payload with
// a payload whose size is or is not a multiple of 16; a last part of under 16 bytes, which takes
// the staged path), each against EVP; and a tampered tail byte changes every tag.
TEST(Gmac, PacketSplitsInExactBuffersAtEveryLength) {
  std::mt19937_64 rng(20261203);
  auto fast = every_gmac_of_a_random_key(rng);
  const std::unique_ptr<Gmac> evp = std::move(fast[0]);
  const Gmac& ref = *evp;
  fast.erase(fast.begin());
  int checked = 0;
  for (std::size_t len = 0; len <= 9000; ++len) {
    std::uint8_t iv[kIvBytes];
    for (auto& b : iv) b = std::uint8_t(rng());
    // Head, payload and trailer parts each in their own exact buffer, as seal_parts sees them.
    const std::size_t head = std::min<std::size_t>(32, len), tail = len >= 56 ? 24 : 0;
    std::vector<std::byte> whole(len), h(head), mid(len - head - tail), tr(tail);
    for (auto& b : whole) b = std::byte(rng());
    std::copy_n(whole.begin(), head, h.begin());
    std::copy_n(whole.begin() + std::ptrdiff_t(head), mid.size(), mid.begin());
    std::copy_n(whole.end() - std::ptrdiff_t(tail), tail, tr.begin());
    const std::size_t r = len % 16 ? len % 16 : std::min<std::size_t>(len, 7);
    std::vector<std::byte> front(whole.begin(), whole.end() - std::ptrdiff_t(r)), back(whole.end() - std::ptrdiff_t(r), whole.end());
    const std::vector<std::vector<std::span<const std::byte>>> splits = {
        {whole}, {h, mid, tr}, {h, std::span<const std::byte>(whole).subspan(head)}, {front, back}};
    const std::string want = tag_hex(ref, {whole}, iv);
    for (const auto& g : fast)
      for (const auto& parts : splits) {
        ASSERT_EQ(tag_hex(*g, parts, iv), want) << name(g->isa()) << " length " << len << " in " << parts.size() << " parts";
        ++checked;
      }
    if (len == 0) continue;
    whole.back() ^= std::byte(0x80);  // the last byte: in the partial block or the last whole one
    for (const auto& g : fast) EXPECT_NE(tag_hex(*g, {whole}, iv), want) << name(g->isa()) << " length " << len;
  }
  std::printf("%d tags of packet-shaped splits compared with evp\n", checked);
}

// auth::Mac keeps the pads of its next sequence numbers: in order, with gaps, backwards, across
// 2^64 and from a MAC used once, every tag is the one a fresh EVP MAC computes; a receiver
// opens such a stream (losses, reordering) and refuses a tampered packet in the middle of a batch.
TEST(Gmac, MacPadCacheGivesTheSameTags) {
  const auth::Key key = auth::random_key();
  const auth::Instance inst = auth::random_instance();
  std::vector<std::uint64_t> seqs;
  for (std::uint64_t s = 1; s <= 20; ++s) seqs.push_back(s);
  for (std::uint64_t s : {30, 31, 29, 29, 37, 38, 39, 40, 41, 7, 1000, 1001, 1003, 1002, 1009, 0})
    seqs.push_back(s);
  for (std::uint64_t s = ~std::uint64_t(0) - 5; s != 4; ++s) seqs.push_back(s);  // wraps to 0..3
  std::vector<std::byte> covered(kHeaderBytes + 1024 + 24);
  for (std::size_t i = 0; i < covered.size(); ++i) covered[i] = std::byte(i * 13 + 1);
  for (Isa isa : runnable()) {
    const auth::Mac mac(key, inst, isa);
    for (std::uint64_t seq : seqs) {
      std::byte got[kTagBytes], want[kTagBytes];
      mac.tag(covered, seq, got);
      auth::Mac(key, inst, Isa::evp).tag(covered, seq, want);
      ASSERT_EQ(hex(reinterpret_cast<std::uint8_t*>(got), kTagBytes), hex(reinterpret_cast<std::uint8_t*>(want), kTagBytes))
          << name(isa) << " seq " << seq;
    }
    // A stream sealed by a sender, opened by one receiver: every 5th lost, pairs swapped, and
    // the 11th altered after sealing.
    auth::Sealer sealer(key, inst, 100);
    std::vector<std::vector<std::byte>> pkts;
    for (int i = 0; i < 40; ++i) {
      std::vector<std::byte> p(kHeaderBytes + 64 + auth::kTrailerBytes, std::byte(i));
      sealer.seal(p.data(), kHeaderBytes + 64);
      pkts.push_back(std::move(p));
    }
    std::optional<auth::Mac> cache;
    cache.emplace(key, inst, isa);
    auth::ReplayWindow w;
    pkts[11][kHeaderBytes + 3] ^= std::byte(4);
    for (int i = 0; i < 40; ++i) {
      const int j = i % 2 == 0 && i + 1 < 40 ? i + 1 : i % 2 == 1 ? i - 1 : i;  // 1, 0, 3, 2, ...
      if (j % 5 == 4) continue;
      EXPECT_EQ(auth::open(key, cache, w, pkts[std::size_t(j)]), j == 11 ? auth::Verdict::bad_tag : auth::Verdict::ok)
          << name(isa) << " packet " << j;
    }
  }
}

TEST(Gmac, UnavailableFallsBackToEvp) {
  const std::array<std::uint8_t, kKeyBytes> key{};
  for (Isa isa : kAllIsas) {
    const Gmac g(key, isa);
    EXPECT_EQ(g.isa(), available(isa) ? isa : Isa::evp);
  }
}

// auth::Mac over each implementation: the same trailer, and each one opens the others' packets.
TEST(Gmac, MacTrailersAreTheSameWithEveryImplementation) {
  const auth::Key key = auth::random_key();
  const auth::Instance inst = auth::random_instance();
  std::vector<std::byte> pkt(kHeaderBytes + 8192 + auth::kTrailerBytes);
  for (std::size_t i = 0; i < pkt.size(); ++i) pkt[i] = std::byte(i * 31 + 7);
  std::string first;
  for (Isa isa : runnable()) {
    const auth::Mac mac(key, inst, isa);
    EXPECT_EQ(mac.isa(), isa);
    for (std::size_t payload : {std::size_t(0), std::size_t(1), std::size_t(100), std::size_t(8192)}) {
      auto b = pkt;
      const std::size_t n = auth::seal(mac, 12345 + payload, b.data(), kHeaderBytes + payload);
      // seal_parts with the payload elsewhere gives the same trailer.
      std::byte trailer[auth::kTrailerBytes];
      auto head = pkt;
      auth::seal_parts(mac, 12345 + payload, head.data(), kHeaderBytes,
                       std::span<const std::byte>(pkt.data() + kHeaderBytes, payload), trailer);
      EXPECT_EQ(0, std::memcmp(trailer, b.data() + kHeaderBytes + payload, auth::kTrailerBytes)) << name(isa);
      first += hex(reinterpret_cast<const std::uint8_t*>(b.data()) + n - auth::kTagBytes, auth::kTagBytes);
      for (Isa other : runnable()) {
        std::optional<auth::Mac> cache;
        cache.emplace(key, inst, other);
        auth::ReplayWindow w;
        EXPECT_EQ(auth::open(key, cache, w, std::span<const std::byte>(b.data(), n)), auth::Verdict::ok)
            << name(isa) << " sealed, " << name(other) << " opened";
        b[kHeaderBytes + payload / 2] ^= std::byte(1);  // one flipped bit anywhere covered
        auth::ReplayWindow w2;
        EXPECT_EQ(auth::open(key, cache, w2, std::span<const std::byte>(b.data(), n)), auth::Verdict::bad_tag);
        b[kHeaderBytes + payload / 2] ^= std::byte(1);
      }
    }
    first += "|";
  }
  // Every implementation's tags, concatenated, are the first one's repeated.
  const std::string one = first.substr(0, first.find('|') + 1);
  std::string rep;
  for (std::size_t i = 0; i < runnable().size(); ++i) rep += one;
  EXPECT_EQ(first, rep);
}

// The wire format: tags of fixed inputs as Python's `cryptography` computes them from
// docs/PROTOCOL.md (subkey HMAC-SHA256(key, "INC v3 sender" || inst), AES-256-GCM with an empty
// plaintext, nonce seq LE || 0u32), the same with every implementation.
TEST(Gmac, MacTagsAreTheProtocols) {
  auth::Key key;
  auth::Instance inst;
  for (int i = 0; i < 32; ++i) key[std::size_t(i)] = std::uint8_t(i);
  for (int i = 0; i < 16; ++i) inst[std::size_t(i)] = std::uint8_t(100 + i);
  const std::uint64_t seq = 0x0123456789abcdefull;
  const std::pair<std::size_t, const char*> want[] = {{0, "b388e9ff5492c25531b73b94bfe94e26"},
                                                      {100, "107101d36328c7b54212430c7244d798"},
                                                      {8248, "870b14b0b05a9d4d6d8ea4e4ab7a3f29"}};
  std::vector<std::byte> covered(8248);
  for (std::size_t i = 0; i < covered.size(); ++i) covered[i] = std::byte((i * 7 + 3) & 255);
  for (Isa isa : runnable()) {
    const auth::Mac mac(key, inst, isa);
    for (const auto& [n, tag] : want) {
      std::uint8_t t[kTagBytes];
      mac.tag(std::span<const std::byte>(covered.data(), n), seq, reinterpret_cast<std::byte*>(t));
      EXPECT_EQ(hex(t, sizeof t), tag) << name(isa) << ", " << n << " bytes";
    }
  }
}

}  // namespace
}  // namespace inc::proto::gmac
