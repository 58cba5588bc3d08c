#include "src/proto/auth.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "src/proto/gmac.hpp"
#include "src/proto/packet.hpp"

namespace inc::proto::auth {

namespace {

void fill_random(std::uint8_t* p, std::size_t n) {
  while (n > 0) {
    ssize_t got = getrandom(p, n, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("getrandom: ") + std::strerror(errno));
    }
    p += got;
    n -= std::size_t(got);
  }
}

constexpr std::string_view kLabel = "INC v3 sender";

// The trailer of a sealed datagram (auth flag set, decoded).
struct Trailer {
  Instance inst{};
  std::uint64_t seq = 0;
  const std::byte* tag = nullptr;
  std::span<const std::byte> covered;  // header + payload + inst + seq
};

Trailer read_trailer(std::span<const std::byte> d) {
  Trailer t;
  const std::byte* p = d.data() + d.size() - kTrailerBytes;
  std::memcpy(t.inst.data(), p, kInstBytes);
  t.seq = load_u64(p + kInstBytes);
  t.tag = p + kInstBytes + 8;
  t.covered = d.first(d.size() - kTagBytes);
  return t;
}

// Instances are public: a plain comparison, two words rather than a call to memcmp.
bool same_instance(const Instance& a, const Instance& b) {
  std::uint64_t x[2], y[2];
  std::memcpy(x, a.data(), kInstBytes);
  std::memcpy(y, b.data(), kInstBytes);
  return x[0] == y[0] && x[1] == y[1];
}

// The nonce of sequence number `seq`: seq (LE) || 0u32.
void nonce_of(std::uint64_t seq, std::uint8_t* iv) {
  store_u64(reinterpret_cast<std::byte*>(iv), seq);
  std::memset(iv + 8, 0, gmac::kIvBytes - 8);
}

}  // namespace

std::uint64_t clock_seq_base() {
  return std::uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count());
}

Key random_key() {
  Key k;
  fill_random(k.data(), k.size());
  return k;
}

Instance random_instance() {
  Instance i;
  fill_random(i.data(), i.size());
  return i;
}

std::optional<Key> parse_key(std::string_view hex) {
  if (hex.size() != 2 * kKeyBytes) return std::nullopt;
  Key k;
  for (std::size_t i = 0; i < kKeyBytes; ++i) {
    unsigned v = 0;
    auto [ptr, ec] = std::from_chars(hex.data() + 2 * i, hex.data() + 2 * i + 2, v, 16);
    if (ec != std::errc() || ptr != hex.data() + 2 * i + 2) return std::nullopt;
    k[i] = std::uint8_t(v);
  }
  return k;
}

std::string key_hex(const Key& k) {
  static constexpr char d[] = "0123456789abcdef";
  std::string s;
  for (auto b : k) {
    s += d[b >> 4];
    s += d[b & 15];
  }
  return s;
}

std::optional<std::vector<KeyEntry>> parse_key_file(std::string_view text, const std::string& name,
                                                    std::string& err) {
  std::vector<KeyEntry> out;
  std::istringstream in{std::string(text)};
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (auto h = line.find('#'); h != std::string::npos) line.resize(h);
    std::istringstream ls(line);
    std::string job, hex, extra;
    if (!(ls >> job)) continue;
    auto fail = [&](const std::string& why) {
      err = name + ":" + std::to_string(n) + ": " + why;
      return std::nullopt;
    };
    if (!(ls >> hex) || (ls >> extra)) return fail("want 'JOB KEY' (KEY: 64 hex digits)");
    std::uint64_t id = 0;
    auto [ptr, ec] = std::from_chars(job.data(), job.data() + job.size(), id);
    if (ec != std::errc() || ptr != job.data() + job.size() || id == 0 || id > 0xFFFFFFFFull)
      return fail("'" + job + "' is not a job id (1..2^32-1)");
    auto key = parse_key(hex);
    if (!key) return fail("the key of job " + job + " is not 64 hex digits");
    for (const auto& e : out)
      if (e.job == id) return fail("job " + job + " has two keys");
    out.push_back({std::uint32_t(id), *key});
  }
  return out;
}

std::optional<std::vector<KeyEntry>> load_key_file(const std::string& path, std::string& err) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    err = path + ": " + std::strerror(errno);
    return std::nullopt;
  }
  if (st.st_mode & (S_IRWXG | S_IRWXO)) {
    err = path + ": readable by group or others (mode " + std::to_string((st.st_mode >> 6) & 7) +
          std::to_string((st.st_mode >> 3) & 7) + std::to_string(st.st_mode & 7) +
          "); a key file must be private: chmod 600 " + path;
    return std::nullopt;
  }
  std::ifstream f(path);
  if (!f) {
    err = path + ": cannot read";
    return std::nullopt;
  }
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_key_file(ss.str(), path, err);
}

bool write_key_file(const std::string& path, std::uint32_t job, const Key& key, std::string& err) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  const std::string text = std::to_string(job) + " " + key_hex(key) + "\n";
  // fchmod: an existing file keeps its mode through O_TRUNC.
  const bool ok = fd >= 0 && ::fchmod(fd, 0600) == 0 &&
                  ::write(fd, text.data(), text.size()) == ssize_t(text.size());
  if (!ok) err = path + ": " + std::strerror(errno);
  if (fd >= 0) ::close(fd);
  return ok;
}

// ---- MAC ------------------------------------------------------------------------------------

struct Mac::Impl {
  explicit Impl(std::span<const std::uint8_t, 32> sub, gmac::Isa isa) : g(sub, isa) {}
  ~Impl() { OPENSSL_cleanse(pads, sizeof pads); }
  gmac::Gmac g;
  // AES(J0) of the nonces of sequence numbers pad_base .. pad_base + npads - 1, computed a batch
  // at a time (gmac::Gmac::pads) once this MAC has seen a number above the one before it: a
  // sender's numbers and, in order, a receiver's from one sender are consecutive, so one pass
  // of kPadBatch AES blocks serves the next kPadBatch packets. A MAC used once (a control packet,
  // a new sender's first packet) encrypts its one J0 as before.
  static constexpr std::size_t kBatch = gmac::Gmac::kPadBatch;
  std::uint8_t pads[kBatch][gmac::kTagBytes] = {};
  std::uint64_t pad_base = 0;
  std::size_t npads = 0;
  std::uint64_t last = 0;
  bool used = false;

  // pads()'s block of `seq` if this MAC has it or now makes it; null: encrypt J0 in the tag.
  const std::uint8_t* pad(std::uint64_t seq) {
    if (g.isa() == gmac::Isa::evp) return nullptr;
    const bool forward = used && seq > last;
    used = true;
    last = seq;
    if (seq - pad_base < npads) return pads[seq - pad_base];
    if (!forward) return nullptr;
    std::uint8_t ivs[kBatch][gmac::kIvBytes];
    for (std::size_t i = 0; i < kBatch; ++i) nonce_of(seq + i, ivs[i]);
    g.pads(&ivs[0][0], kBatch, &pads[0][0]);
    pad_base = seq;
    npads = kBatch;
    return pads[0];
  }
};

Mac::Mac(const Key& key, const Instance& inst) : Mac(key, inst, gmac::selected()) {}

Mac::Mac(const Key& key, const Instance& inst, gmac::Isa isa) : inst_(inst) {
  std::uint8_t msg[kLabel.size() + kInstBytes];
  std::memcpy(msg, kLabel.data(), kLabel.size());
  std::memcpy(msg + kLabel.size(), inst.data(), kInstBytes);
  std::uint8_t sub[32];
  unsigned len = 0;
  if (!HMAC(EVP_sha256(), key.data(), int(key.size()), msg, sizeof msg, sub, &len) || len != 32)
    throw std::runtime_error("HMAC-SHA256 failed");
  impl_ = std::make_unique<Impl>(std::span<const std::uint8_t, 32>(sub), isa);
  OPENSSL_cleanse(sub, sizeof sub);
}
Mac::~Mac() = default;
Mac::Mac(Mac&&) noexcept = default;
Mac& Mac::operator=(Mac&&) noexcept = default;

gmac::Isa Mac::isa() const { return impl_->g.isa(); }

void Mac::tag(std::span<const std::byte> covered, std::uint64_t seq, std::byte* out) const {
  const std::span<const std::byte> one[1] = {covered};
  tag(std::span<const std::span<const std::byte>>(one), seq, out);
}

void Mac::tag(std::span<const std::span<const std::byte>> parts, std::uint64_t seq, std::byte* out) const {
  std::uint8_t iv[gmac::kIvBytes];
  nonce_of(seq, iv);
  impl_->g.tag(parts, iv, reinterpret_cast<std::uint8_t*>(out), impl_->pad(seq));
}

bool Mac::verify(std::span<const std::byte> covered, std::uint64_t seq, const std::byte* tag) const {
  std::byte t[kTagBytes];
  this->tag(covered, seq, t);
  // Constant time like CRYPTO_memcmp (no exit at the first differing byte), without a call.
  std::uint64_t a[2], b[2];
  std::memcpy(a, t, kTagBytes);
  std::memcpy(b, tag, kTagBytes);
  return ((a[0] ^ b[0]) | (a[1] ^ b[1])) == 0;
}

void seal_parts(const Mac& mac, std::uint64_t seq, std::byte* head, std::size_t head_size,
                std::span<const std::byte> payload, std::byte* trailer) {
  head[6] |= std::byte(flag::auth);
  std::memcpy(trailer, mac.instance().data(), kInstBytes);
  store_u64(trailer + kInstBytes, seq);
  const std::span<const std::byte> parts[3] = {{head, head_size}, payload, {trailer, kInstBytes + 8}};
  mac.tag(std::span<const std::span<const std::byte>>(parts), seq, trailer + kInstBytes + 8);
}

std::size_t seal(const Mac& mac, std::uint64_t seq, std::byte* pkt, std::size_t size) {
  seal_parts(mac, seq, pkt, size, {}, pkt + size);  // the trailer right after the payload
  return size + kTrailerBytes;
}

std::size_t Sealer::seal(std::byte* pkt, std::size_t size) { return auth::seal(mac_, next_++, pkt, size); }
void Sealer::seal_parts(std::byte* head, std::size_t head_size, std::span<const std::byte> payload,
                        std::byte* trailer) {
  auth::seal_parts(mac_, next_++, head, head_size, payload, trailer);
}

bool ReplayWindow::accept(std::uint64_t seq) {
  if (!any_ || seq > top_) {
    const std::uint64_t shift = any_ ? seq - top_ : kBits;
    if (shift >= kBits) {
      bits_.fill(0);
    } else {
      // Clear the bits of the numbers that enter the window (top_+1 .. seq).
      for (std::uint64_t s = top_ + 1; s != seq + 1; ++s) bits_[(s / 64) % bits_.size()] &= ~(1ull << (s % 64));
    }
    any_ = true;
    top_ = seq;
    bits_[(seq / 64) % bits_.size()] |= 1ull << (seq % 64);
    return true;
  }
  if (top_ - seq >= kBits) return false;  // older than the window
  std::uint64_t& w = bits_[(seq / 64) % bits_.size()];
  const std::uint64_t bit = 1ull << (seq % 64);
  if (w & bit) return false;
  w |= bit;
  return true;
}

Verdict open(const Key& key, std::optional<Mac>& cache, ReplayWindow& window,
             std::span<const std::byte> datagram) {
  const Trailer t = read_trailer(datagram);
  if (cache && same_instance(cache->instance(), t.inst)) {
    if (!cache->verify(t.covered, t.seq, t.tag)) return Verdict::bad_tag;
  } else {
    Mac fresh(key, t.inst);
    if (!fresh.verify(t.covered, t.seq, t.tag)) return Verdict::bad_tag;
    cache.emplace(std::move(fresh));
  }
  return window.accept(t.seq) ? Verdict::ok : Verdict::replayed;
}

Verdict ControlReplay::open(const Key& key, std::span<const std::byte> datagram,
                            std::uint64_t wall_ns) {
  const Trailer t = read_trailer(datagram);
  if (!Mac(key, t.inst).verify(t.covered, t.seq, t.tag)) return Verdict::bad_tag;
  const std::uint64_t gap = t.seq > wall_ns ? t.seq - wall_ns : wall_ns - t.seq;
  if (gap > kControlFreshnessNs) return Verdict::stale;
  // Forget the senders whose newest packet is stale: every packet they sent is stale now.
  std::erase_if(senders_, [&](const Sender& s) { return s.window.highest() + kControlFreshnessNs < wall_ns; });
  auto it = std::find_if(senders_.begin(), senders_.end(), [&](const Sender& s) { return s.inst == t.inst; });
  if (it == senders_.end()) {
    if (senders_.size() >= kMaxSenders) return Verdict::busy;
    senders_.push_back({t.inst, {}});
    it = senders_.end() - 1;
  }
  return it->window.accept(t.seq) ? Verdict::ok : Verdict::replayed;
}

std::uint64_t control_seq(std::uint64_t last) { return std::max(clock_seq_base(), last + 1); }

}  // namespace inc::proto::auth
