// Internal to inc_transport: the store's wire format (frames, ops, a bounds-checked reader),
// shared by the server (store_server.cpp) and the client (store_client.cpp).
#pragma once

#include <fmt/format.h>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace inc::transport::store_wire {

enum class Op : std::uint8_t {
  hello = 1,
  set = 2,
  set_new = 3,
  get = 4,
  add = 5,
  check = 6,
  wait = 7,
  erase = 8,
};
enum class Status : std::uint8_t { ok = 0, timeout = 1, error = 2 };

// ---- encoding -------------------------------------------------------------------------------

inline void put_u8(std::string& b, std::uint8_t v) { b.push_back(static_cast<char>(v)); }
inline void put_u16(std::string& b, std::uint16_t v) {
  for (int i = 0; i < 2; ++i) b.push_back(static_cast<char>(v >> (8 * i)));
}
inline void put_u32(std::string& b, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<char>(v >> (8 * i)));
}
inline void put_u64(std::string& b, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) b.push_back(static_cast<char>(v >> (8 * i)));
}
inline void put_str(std::string& b, std::string_view s) {
  put_u32(b, static_cast<std::uint32_t>(s.size()));
  b.append(s);
}
// Prepends the u32 frame length to a body.
inline std::string frame(const std::string& body) {
  std::string f;
  f.reserve(4 + body.size());
  put_u32(f, static_cast<std::uint32_t>(body.size()));
  f += body;
  return f;
}

struct ParseError {
  std::string why;
};

// Bounds-checked reader over untrusted bytes; every failure is a ParseError.
class Reader {
 public:
  explicit Reader(std::string_view b) : b_(b) {}
  std::uint8_t u8() { return static_cast<std::uint8_t>(take(1)[0]); }
  std::uint16_t u16() { return static_cast<std::uint16_t>(uint_le(2)); }
  std::uint32_t u32() { return static_cast<std::uint32_t>(uint_le(4)); }
  std::uint64_t u64() { return uint_le(8); }
  std::string_view str(std::size_t max, const char* what) {
    std::uint32_t n = u32();
    if (n > max)
      throw ParseError{fmt::format("{} of {} bytes exceeds the limit of {}", what, n, max)};
    return take(n);
  }
  void end() const {
    if (pos_ != b_.size())
      throw ParseError{fmt::format("{} trailing bytes after the request", b_.size() - pos_)};
  }

 private:
  std::string_view take(std::size_t n) {
    if (b_.size() - pos_ < n)
      throw ParseError{
          fmt::format("truncated: needed {} more bytes, {} left", n, b_.size() - pos_)};
    auto s = b_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  std::uint64_t uint_le(int bytes) {
    auto s = take(static_cast<std::size_t>(bytes));
    std::uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; --i)
      v = (v << 8) | static_cast<std::uint8_t>(s[static_cast<std::size_t>(i)]);
    return v;
  }
  std::string_view b_;
  std::size_t pos_ = 0;
};

inline std::optional<std::int64_t> parse_i64(std::string_view s) {
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

inline std::string quote_key(std::string_view k) {
  // Keys are bytes; keep messages printable.
  std::string out = "'";
  for (char c : k.substr(0, 200)) {
    if (c >= 0x20 && c < 0x7f)
      out += c;
    else
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
  }
  if (k.size() > 200) out += "...";
  return out + "'";
}

}  // namespace inc::transport::store_wire
