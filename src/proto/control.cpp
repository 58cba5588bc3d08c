#include "src/proto/control.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cstring>
#include <memory>
#include <stdexcept>
#include <type_traits>

namespace inc::proto::ctl {

namespace {

constexpr char kMagic[4] = {'I', 'N', 'C', 'c'};

struct CtxFree {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};

void put_le(std::vector<std::byte>& b, std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) b.push_back(std::byte((v >> (8 * i)) & 0xFF));
}

class Writer {
 public:
  std::vector<std::byte> b;
  void u8(std::uint8_t v) { put_le(b, v, 1); }
  void u16(std::uint16_t v) { put_le(b, v, 2); }
  void u32(std::uint32_t v) { put_le(b, v, 4); }
  void u64(std::uint64_t v) { put_le(b, v, 8); }
  void str(const std::string& s, std::size_t max = 0xFFFF) {
    if (s.size() > max) throw std::length_error("control message: string of " + std::to_string(s.size()) + " bytes");
    if (max > 0xFFFF) u32(std::uint32_t(s.size()));
    else u16(std::uint16_t(s.size()));
    for (char c : s) b.push_back(std::byte(c));
  }
  void key(const auth::Key& k) {
    for (auto x : k) b.push_back(std::byte(x));
  }
  void job(const SwitchJob& j) {
    u32(j.job);
    u16(j.members);
    u32(j.slots);
    u16(j.parent_member);
  }
  void tree(const std::vector<std::pair<std::string, SwitchJob>>& t) {
    u16(std::uint16_t(t.size()));
    for (const auto& [sw, j] : t) {
      str(sw, 255);
      job(j);
    }
  }
};

class Reader {
 public:
  explicit Reader(std::span<const std::byte> s) : s_(s) {}
  bool ok() const { return ok_; }
  bool done() const { return ok_ && pos_ == s_.size(); }
  std::string why;
  std::uint64_t le(int n, const char* what) {
    if (!ok_) return 0;
    if (s_.size() - pos_ < std::size_t(n)) return fail(what, "truncated"), 0;
    std::uint64_t v = 0;
    for (int i = 0; i < n; ++i) v |= std::uint64_t(s_[pos_ + std::size_t(i)]) << (8 * i);
    pos_ += std::size_t(n);
    return v;
  }
  std::uint8_t u8(const char* w) { return std::uint8_t(le(1, w)); }
  std::uint16_t u16(const char* w) { return std::uint16_t(le(2, w)); }
  std::uint32_t u32(const char* w) { return std::uint32_t(le(4, w)); }
  std::uint64_t u64(const char* w) { return le(8, w); }
  std::string str(const char* w, std::size_t max = 0xFFFF) {
    const std::size_t n = max > 0xFFFF ? u32(w) : u16(w);
    if (!ok_) return {};
    if (n > max) return fail(w, "too long"), std::string();
    if (s_.size() - pos_ < n) return fail(w, "truncated"), std::string();
    std::string s(reinterpret_cast<const char*>(s_.data() + pos_), n);
    pos_ += n;
    return s;
  }
  auth::Key key(const char* w) {
    auth::Key k{};
    for (auto& x : k) x = u8(w);
    return k;
  }
  SwitchJob job() {
    SwitchJob j;
    j.job = u32("job id");
    j.members = u16("members");
    j.slots = u32("slots");
    j.parent_member = u16("parent member");
    if (ok_ && (j.job == 0 || j.members == 0 || j.members > kMaxMembers || j.slots == 0 || j.slots > 0xFFFF ||
                (j.parent_member != kNoMember && j.parent_member >= kMaxMembers)))
      fail("job", "out of range");
    return j;
  }
  std::vector<std::pair<std::string, SwitchJob>> tree() {
    std::vector<std::pair<std::string, SwitchJob>> t;
    const std::size_t n = u16("tree size");
    for (std::size_t i = 0; i < n && ok_; ++i) {
      std::string sw = str("switch name", 255);
      SwitchJob j = job();
      t.emplace_back(std::move(sw), j);
    }
    return t;
  }
  void fail(const char* what, const char* how) {
    if (ok_) why = std::string(what) + ": " + how;
    ok_ = false;
  }

 private:
  std::span<const std::byte> s_;
  std::size_t pos_ = 0;
  bool ok_ = true;
};

void enc(Writer& w, const SwitchState& m) {
  w.str(m.name, 255);
  w.u32(m.ip);
  w.u16(m.port);
  w.u16(m.lanes);
  w.u32(m.slots_per_lane);
  w.u32(m.slot_elems);
  w.u32(m.caps);
  w.u64(m.incarnation);
  w.u32(m.parent_ip);
  w.u16(m.parent_port);
  for (const auto* list : {&m.jobs, &m.static_jobs}) {
    w.u16(std::uint16_t(list->size()));
    for (const auto& j : *list) w.job(j);
  }
}
void enc(Writer& w, const Admit& m) {
  w.u64(m.req);
  w.job(m.spec);
  w.key(m.key);
}
void enc(Writer& w, const Release& m) {
  w.u64(m.req);
  w.u32(m.job);
}
void enc(Writer& w, const Resize& m) {
  w.u64(m.req);
  w.u32(m.job);
  w.u32(m.slots);
}
void enc(Writer& w, const Outcome& m) {
  w.u64(m.req);
  w.u32(m.job);
  w.u8(m.reason);
}
void enc(Writer& w, const TreeRequest& m) {
  w.u32(m.slots_wanted);
  w.str(m.label, 255);
  w.u32(std::uint32_t(m.hosts.size()));
  for (const auto& h : m.hosts) w.str(h, 255);
  w.u32(m.wait_ms);
}
void enc(Writer& w, const TreeReply& m) {
  w.u8(m.ok ? 1 : 0);
  w.str(m.why, 4096);
  w.u32(m.job);
  w.u32(m.slots);
  w.u64(m.lease);
  w.u32(m.lease_ms);
  w.key(m.key);
  w.str(m.root, 255);
  w.u32(std::uint32_t(m.ranks.size()));
  for (const auto& r : m.ranks) {
    w.str(r.sw, 255);
    w.u32(r.ip);
    w.u16(r.port);
    w.u16(r.member);
  }
  w.tree(m.tree);
}
void enc(Writer& w, const LeaseRenew& m) {
  w.u32(m.job);
  w.u64(m.lease);
  w.tree(m.claim);
}
void enc(Writer& w, const LeaseReply& m) {
  w.u32(m.job);
  w.u8(m.known ? 1 : 0);
}
void enc(Writer& w, const TreeRelease& m) {
  w.u32(m.job);
  w.u64(m.lease);
}
void enc(Writer&, const StatusRequest&) {}
void enc(Writer& w, const StatusReply& m) { w.str(m.text, kMaxFrameBytes / 2); }

bool boolean(Reader& r, const char* w) {
  const std::uint8_t v = r.u8(w);
  if (v > 1) r.fail(w, "not 0 or 1");
  return v == 1;
}

std::optional<Message> dec(Reader& r, MsgType t) {
  switch (t) {
    case MsgType::switch_state: {
      SwitchState m;
      m.name = r.str("switch name", 255);
      m.ip = r.u32("address");
      m.port = r.u16("port");
      m.lanes = r.u16("lanes");
      m.slots_per_lane = r.u32("slots per lane");
      m.slot_elems = r.u32("slot elements");
      m.caps = r.u32("capabilities");
      m.incarnation = r.u64("incarnation");
      m.parent_ip = r.u32("parent address");
      m.parent_port = r.u16("parent port");
      for (auto* list : {&m.jobs, &m.static_jobs}) {
        const std::size_t n = r.u16("jobs");
        if (n > kMaxJobsPerSwitch) r.fail("jobs", "too many");
        for (std::size_t i = 0; i < n && r.ok(); ++i) list->push_back(r.job());
      }
      if (r.ok() && (m.name.empty() || m.port == 0 || m.lanes == 0 || m.lanes > kMaxLanes ||
                     m.slots_per_lane == 0 || m.slot_elems == 0 || m.slot_elems > kMaxPayloadBytes / 4))
        r.fail("switch state", "out of range");
      return m;
    }
    case MsgType::admit: {
      Admit m;
      m.req = r.u64("request");
      m.spec = r.job();
      m.key = r.key("key");
      return m;
    }
    case MsgType::release: {
      Release m;
      m.req = r.u64("request");
      m.job = r.u32("job id");
      return m;
    }
    case MsgType::resize: {
      Resize m;
      m.req = r.u64("request");
      m.job = r.u32("job id");
      if (m.job == 0) r.fail("job id", "0");
      m.slots = r.u32("slots");
      if (m.slots == 0 || m.slots > 0xFFFF) r.fail("slots", "not 1..65535");
      return m;
    }
    case MsgType::outcome: {
      Outcome m;
      m.req = r.u64("request");
      m.job = r.u32("job id");
      m.reason = r.u8("reason");
      if (m.reason >= kNumReasons) r.fail("reason", "unknown");
      return m;
    }
    case MsgType::tree_request: {
      TreeRequest m;
      m.slots_wanted = r.u32("slots wanted");
      if (m.slots_wanted > 0xFFFF) r.fail("slots wanted", "above 65535");
      m.label = r.str("label", 255);
      const std::size_t n = r.u32("ranks");
      if (n == 0 || n > kMaxRanks) r.fail("ranks", "0 or above the limit");
      for (std::size_t i = 0; i < n && r.ok(); ++i) m.hosts.push_back(r.str("host", 255));
      m.wait_ms = r.u32("wait");
      if (m.wait_ms > kMaxWaitMs) r.fail("wait", "above one day");
      return m;
    }
    case MsgType::tree_reply: {
      TreeReply m;
      m.ok = boolean(r, "ok");
      m.why = r.str("why", 4096);
      m.job = r.u32("job id");
      m.slots = r.u32("slots");
      m.lease = r.u64("lease");
      m.lease_ms = r.u32("lease ms");
      m.key = r.key("key");
      m.root = r.str("root", 255);
      const std::size_t n = r.u32("ranks");
      if (n > kMaxRanks) r.fail("ranks", "above the limit");
      for (std::size_t i = 0; i < n && r.ok(); ++i) {
        RankAttachment a;
        a.sw = r.str("switch name", 255);
        a.ip = r.u32("address");
        a.port = r.u16("port");
        a.member = r.u16("member");
        if (r.ok() && (a.port == 0 || a.member >= kMaxMembers)) r.fail("attachment", "out of range");
        m.ranks.push_back(a);
      }
      m.tree = r.tree();
      if (r.ok() && m.ok && (m.job == 0 || m.slots == 0 || m.slots > 0xFFFF || m.ranks.empty() || m.lease_ms == 0))
        r.fail("tree reply", "granted without a job, slots, ranks or lease");
      return m;
    }
    case MsgType::lease_renew: {
      LeaseRenew m;
      m.job = r.u32("job id");
      m.lease = r.u64("lease");
      m.claim = r.tree();
      return m;
    }
    case MsgType::lease_reply: {
      LeaseReply m;
      m.job = r.u32("job id");
      m.known = boolean(r, "known");
      return m;
    }
    case MsgType::tree_release: {
      TreeRelease m;
      m.job = r.u32("job id");
      m.lease = r.u64("lease");
      return m;
    }
    case MsgType::status_request:
      return StatusRequest{};
    case MsgType::status_reply: {
      StatusReply m;
      m.text = r.str("text", kMaxFrameBytes / 2);
      return m;
    }
  }
  r.fail("type", "unknown");
  return std::nullopt;
}

}  // namespace

std::array<std::byte, kHelloBytes> encode_hello(const Hello& h) {
  std::array<std::byte, kHelloBytes> b{};
  std::memcpy(b.data(), kMagic, 4);
  b[4] = std::byte(h.version);
  b[5] = std::byte(h.role);
  std::memcpy(b.data() + 6, h.nonce.data(), kNonceBytes);
  return b;
}

std::optional<Hello> decode_hello(std::span<const std::byte> b, std::string& why) {
  if (b.size() != kHelloBytes || std::memcmp(b.data(), kMagic, 4) != 0) {
    why = "not an INC control connection (bad magic)";
    return std::nullopt;
  }
  Hello h;
  h.version = std::uint8_t(b[4]);
  if (h.version != kVersion) {
    why = "control protocol version " + std::to_string(h.version) + ", this side speaks " +
          std::to_string(kVersion);
    return std::nullopt;
  }
  const auto role = std::uint8_t(b[5]);
  if (role < 1 || role > 3) {
    why = "unknown role " + std::to_string(role);
    return std::nullopt;
  }
  h.role = Role(role);
  std::memcpy(h.nonce.data(), b.data() + 6, kNonceBytes);
  return h;
}

Sealer::Sealer(const auth::Key& secret, const Nonce& client, const Nonce& server, bool c2s) {
  const std::string label = c2s ? "INC control v1 c2s" : "INC control v1 s2c";
  std::vector<unsigned char> msg(label.begin(), label.end());
  msg.insert(msg.end(), client.begin(), client.end());
  msg.insert(msg.end(), server.begin(), server.end());
  unsigned int len = 0;
  if (!HMAC(EVP_sha256(), secret.data(), int(secret.size()), msg.data(), msg.size(), key_.data(), &len) ||
      len != key_.size())
    throw std::runtime_error("control channel: key derivation failed");
}

namespace {
std::array<unsigned char, 12> gcm_nonce(std::uint64_t counter) {
  std::array<unsigned char, 12> n{};
  for (int i = 0; i < 8; ++i) n[std::size_t(i)] = static_cast<unsigned char>(counter >> (8 * i));
  return n;
}
}  // namespace

std::vector<std::byte> Sealer::seal(std::span<const std::byte> plain) {
  if (plain.size() + kTagBytes > kMaxFrameBytes) throw std::length_error("control message too large");
  const std::uint32_t len = std::uint32_t(plain.size() + kTagBytes);
  std::vector<std::byte> out(4 + plain.size() + kTagBytes);
  for (int i = 0; i < 4; ++i) out[std::size_t(i)] = std::byte((len >> (8 * i)) & 0xFF);
  std::unique_ptr<EVP_CIPHER_CTX, CtxFree> ctx(EVP_CIPHER_CTX_new());
  const auto nonce = gcm_nonce(counter_);
  int n = 0;
  auto* o = reinterpret_cast<unsigned char*>(out.data());
  if (!ctx || EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key_.data(), nonce.data()) != 1 ||
      EVP_EncryptUpdate(ctx.get(), nullptr, &n, o, 4) != 1 ||
      (!plain.empty() && EVP_EncryptUpdate(ctx.get(), o + 4, &n, reinterpret_cast<const unsigned char*>(plain.data()),
                                           int(plain.size())) != 1) ||
      EVP_EncryptFinal_ex(ctx.get(), o + 4 + plain.size(), &n) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, int(kTagBytes), o + 4 + plain.size()) != 1)
    throw std::runtime_error("control channel: AES-GCM sealing failed");
  ++counter_;
  return out;
}

std::optional<std::vector<std::byte>> Sealer::open(std::span<const std::byte> body) {
  if (body.size() < kTagBytes || body.size() > kMaxFrameBytes) return std::nullopt;
  const std::size_t plen = body.size() - kTagBytes;
  std::vector<std::byte> plain(plen);
  unsigned char len[4];
  for (int i = 0; i < 4; ++i) len[i] = static_cast<unsigned char>(body.size() >> (8 * i));
  std::unique_ptr<EVP_CIPHER_CTX, CtxFree> ctx(EVP_CIPHER_CTX_new());
  const auto nonce = gcm_nonce(counter_);
  unsigned char tag[kTagBytes];
  std::memcpy(tag, body.data() + plen, kTagBytes);
  int n = 0;
  auto* in = reinterpret_cast<const unsigned char*>(body.data());
  if (!ctx || EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key_.data(), nonce.data()) != 1 ||
      EVP_DecryptUpdate(ctx.get(), nullptr, &n, len, 4) != 1 ||
      (plen && EVP_DecryptUpdate(ctx.get(), reinterpret_cast<unsigned char*>(plain.data()), &n, in, int(plen)) != 1) ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, int(kTagBytes), tag) != 1)
    return std::nullopt;
  unsigned char fin[16];
  if (EVP_DecryptFinal_ex(ctx.get(), fin, &n) != 1) return std::nullopt;
  ++counter_;
  return plain;
}

std::vector<std::byte> encode(const Message& m) {
  Writer w;
  w.u8(std::uint8_t(m.index() + 1));
  std::visit([&](const auto& x) { enc(w, x); }, m);
  return std::move(w.b);
}

std::optional<Message> decode(std::span<const std::byte> plain, std::string& why) {
  Reader r(plain);
  const std::uint8_t t = r.u8("type");
  if (!r.ok() || t < 1 || t > std::variant_size_v<Message>) {
    why = r.ok() ? "unknown message type " + std::to_string(t) : r.why;
    return std::nullopt;
  }
  auto m = dec(r, MsgType(t));
  if (!r.ok()) {
    why = r.why;
    return std::nullopt;
  }
  if (!r.done()) {
    why = "bytes left over after the message";
    return std::nullopt;
  }
  return m;
}

}  // namespace inc::proto::ctl
