// Packet authentication (wire format version 3, docs/PROTOCOL.md "Authentication").
//
// A job may have a 32-byte key. Every packet of a keyed job carries the flag `auth` and a
// 40-byte trailer after its payload:
//
//   inst[16]  the sender's instance: random per sender (a worker, a switch lane), never reused
//   seq[8]    strictly increasing per sender; starts at the sender's wall clock in ns, so it
//             keeps increasing when the sender restarts with a new instance
//   tag[16]   AES-256-GMAC over header || payload || inst || seq under the sender's subkey
//             HMAC-SHA256(key, "INC v3 sender" || inst), nonce = seq || 0u32
//             (src/proto/gmac.hpp: AES-NI + VPCLMULQDQ where the CPU has them, else OpenSSL)
//
// Per-sender subkeys make (subkey, nonce) unique across every sender of a tree (GMAC must never
// see one nonce twice under one key); the receiver refuses a sequence number it has seen or
// one older than its replay window (ReplayWindow), so a captured packet cannot be replayed.
// The MAC is checked before any job state is touched; packets that fail are dropped, counted
// and never answered (an answer would leak state or make the receiver a reflector).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "src/proto/packet.hpp"

namespace inc::proto::gmac {
enum class Isa : std::uint8_t;  // src/proto/gmac.hpp (internal)
}

namespace inc::proto::auth {

inline constexpr std::size_t kKeyBytes = 32;
inline constexpr std::size_t kInstBytes = 16;
inline constexpr std::size_t kTagBytes = 16;
inline constexpr std::size_t kTrailerBytes = kInstBytes + 8 + kTagBytes;  // 40
static_assert(kTrailerBytes == kAuthTrailerBytes);

using Key = std::array<std::uint8_t, kKeyBytes>;
using Instance = std::array<std::uint8_t, kInstBytes>;

// Fresh random bytes from the kernel (getrandom); throws std::runtime_error if it fails.
Key random_key();
Instance random_instance();

// The first sequence number of a new sender: the wall clock in ns, so that a sender that
// restarts (a new instance) keeps counting upwards for its peers' replay windows.
std::uint64_t clock_seq_base();

// "64 hex digits" -> key (nullopt otherwise).
std::optional<Key> parse_key(std::string_view hex);
std::string key_hex(const Key& k);

// A key file: one line per job, "JOB HEX64", '#' comments. Refused when group- or
// world-readable (like ssh private keys). nullopt + `err` ("FILE:LINE: ...") on error.
struct KeyEntry {
  std::uint32_t job = 0;
  Key key{};
};
std::optional<std::vector<KeyEntry>> load_key_file(const std::string& path, std::string& err);
std::optional<std::vector<KeyEntry>> parse_key_file(std::string_view text, const std::string& name,
                                                    std::string& err);
// Writes a key file of one job (mode 600, replacing the file); false + `err` on failure.
bool write_key_file(const std::string& path, std::uint32_t job, const Key& key, std::string& err);

// One sender instance's MAC state under one job key (its subkey, expanded once, and the AES
// blocks of its next nonces, a batch at a time: tag() updates them, so one thread at a time).
class Mac {
 public:
  Mac(const Key& key, const Instance& inst);
  // With a named GMAC implementation (tests and benchmarks; all give the same tags).
  Mac(const Key& key, const Instance& inst, gmac::Isa isa);
  ~Mac();
  Mac(Mac&&) noexcept;
  Mac& operator=(Mac&&) noexcept;
  const Instance& instance() const { return inst_; }
  gmac::Isa isa() const;
  // Tag over `covered` (everything before the tag) with sequence number `seq`.
  void tag(std::span<const std::byte> covered, std::uint64_t seq, std::byte* out) const;
  // The same over the concatenation of `parts` (a header, a payload read where it lies, ...).
  void tag(std::span<const std::span<const std::byte>> parts, std::uint64_t seq, std::byte* out) const;
  bool verify(std::span<const std::byte> covered, std::uint64_t seq, const std::byte* tag) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  Instance inst_{};
};

// Appends the trailer of sequence number `seq` to the `size` bytes of header + payload at
// `pkt` (room for kTrailerBytes more) and sets the header's auth flag; returns the new size.
std::size_t seal(const Mac& mac, std::uint64_t seq, std::byte* pkt, std::size_t size);
// The same for a datagram sent as a head, a payload kept elsewhere and a trailer: sets the
// auth flag in `head` and writes the kTrailerBytes trailer at `trailer`.
void seal_parts(const Mac& mac, std::uint64_t seq, std::byte* head, std::size_t head_size,
                std::span<const std::byte> payload, std::byte* trailer);

// The sending side of one sender instance: appends trailers.
class Sealer {
 public:
  Sealer(const Key& key, const Instance& inst, std::uint64_t seq_base)
      : mac_(key, inst), next_(seq_base) {}
  // `pkt` holds `size` bytes of header + payload and room for kTrailerBytes more: sets the
  // header's auth flag, appends the trailer; returns size + kTrailerBytes.
  std::size_t seal(std::byte* pkt, std::size_t size);
  void seal_parts(std::byte* head, std::size_t head_size, std::span<const std::byte> payload,
                  std::byte* trailer);

 private:
  Mac mac_;
  std::uint64_t next_;
};

// Anti-replay window over one sender's sequence numbers (RFC 6479 style, 1024 wide).
class ReplayWindow {
 public:
  // True (and the number is recorded) if `seq` is new: above the highest seen, or within the
  // window below it and not seen yet.
  bool accept(std::uint64_t seq);
  std::uint64_t highest() const { return top_; }

 private:
  static constexpr std::uint64_t kBits = 1024;
  std::uint64_t top_ = 0;
  bool any_ = false;
  std::array<std::uint64_t, kBits / 64> bits_{};
};

// Checks a sealed datagram from one sender slot (a member at a switch, a lane at a worker):
// the tag under the subkey of the trailer's instance (`cache` holds the MAC of the last
// instance accepted for this slot; a packet naming another instance is checked with a fresh
// subkey that replaces the cache only if the tag is right), then the replay window.
// (stale and busy: ControlReplay only.)
enum class Verdict : std::uint8_t { ok, bad_tag, replayed, stale, busy };
Verdict open(const Key& key, std::optional<Mac>& cache, ReplayWindow& window,
             std::span<const std::byte> datagram);

// Control packets (admit/release sent to a switch without a controller; docs/PROTOCOL.md
// "Control plane") are sealed like a keyed job's packets, under the control key, by any number
// of short-lived senders (a fresh instance per request). Their sequence number is the sender's
// wall clock in ns when it sent the packet (strictly increasing per instance). The receiver
// accepts one only if its tag is right (else bad_tag), its sequence number lies within
// kControlFreshnessNs of the receiver's wall clock either way (else stale: a packet recorded
// earlier, or a sender whose clock is off), and it is new for its instance (else replayed).
// The instances seen within the freshness span are remembered (at most kMaxSenders; a new one
// beyond them is refused as busy); an older one can be forgotten safely: all its packets are
// stale by then.
inline constexpr std::uint64_t kControlFreshnessNs = 30'000'000'000ull;  // 30 s
class ControlReplay {
 public:
  static constexpr std::size_t kMaxSenders = 1024;
  Verdict open(const Key& key, std::span<const std::byte> datagram, std::uint64_t wall_ns);
  std::size_t senders() const { return senders_.size(); }

 private:
  struct Sender {
    Instance inst{};
    ReplayWindow window;
  };
  std::vector<Sender> senders_;
};
// The sequence number a control packet sent now carries, after `last` (0: none yet) of the
// same instance: the wall clock in ns, or last + 1 if the clock did not advance.
std::uint64_t control_seq(std::uint64_t last);

}  // namespace inc::proto::auth
