#include "transport/store.hpp"

#include <fmt/format.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>
#include <unordered_map>

#include "transport/store_wire.hpp"

namespace inc::transport {

using namespace store_wire;
using std::chrono::milliseconds;

// ---- client ---------------------------------------------------------------------------------

struct StoreClient::Impl {
  std::string address;
  Options opts;
  Fd fd;
  std::mutex mu;
  std::string broken;  // set when the connection can no longer be used

  struct Reply {
    Status status;
    std::string payload;
    long long waited_ms;  // from sending the request to its reply (held requests: the wait)
  };

  // Sends one request and reads its reply; `wait_for` extends the reply deadline for held
  // requests. Any transport failure breaks the connection for good (the stream would be out of
  // step), and is rethrown with `what` in front.
  Reply call(const std::string& body, std::string_view what, milliseconds wait_for) {
    if (!broken.empty())
      throw Error(Error::Kind::network,
                  fmt::format("store {}: {}: connection unusable after an earlier failure: {}",
                              address, what, broken));
    std::string label = fmt::format("store {}: {}", address, what);
    auto start = Clock::now();
    try {
      auto send_deadline = deadline_after(opts.request_timeout);
      send_all(fd.get(), frame(body), send_deadline, label);
      // A held request is answered by the server at its timeout; allow a little more for the
      // reply to travel before deciding the server is gone.
      auto grace = std::min<milliseconds>(opts.request_timeout, std::chrono::seconds(5));
      auto deadline = deadline_after(wait_for + grace);
      std::byte hdr[4];
      recv_all(fd.get(), hdr, deadline, label);
      std::uint32_t len = 0;
      for (int i = 3; i >= 0; --i) len = (len << 8) | static_cast<std::uint8_t>(hdr[i]);
      if (len == 0 || len > kMaxStoreFrameBytes)
        throw Error(Error::Kind::network,
                    fmt::format("{}: invalid reply length {} (not an INC store?)", label, len));
      std::string buf(len, '\0');
      recv_all(fd.get(), std::as_writable_bytes(std::span(buf.data(), buf.size())), deadline,
               label);
      auto status = static_cast<std::uint8_t>(buf[0]);
      if (status > 2)
        throw Error(Error::Kind::network,
                    fmt::format("{}: invalid reply status {}", label, status));
      auto waited = std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
      return Reply{static_cast<Status>(status), buf.substr(1), waited};
    } catch (const Error& e) {
      broken = e.what();
      throw;
    }
  }

  // Checks a reply's status: errors become exceptions.
  std::string_view ok_payload(const Reply& rep, std::string_view what) {
    if (rep.status == Status::error) {
      Reader r(rep.payload);
      std::string msg;
      try {
        msg = std::string(r.str(kMaxStoreFrameBytes, "message"));
      } catch (const ParseError&) {
        msg = "(unreadable error message)";
      }
      throw Error(Error::Kind::invalid_argument,
                  fmt::format("store {}: {}: {}", address, what, msg));
    }
    if (rep.status != Status::ok)
      throw Error(Error::Kind::network,
                  fmt::format("store {}: {}: unexpected reply status", address, what));
    return rep.payload;
  }

  template <class F>
  auto parse(std::string_view payload, std::string_view what, F&& f) {
    try {
      Reader r(payload);
      auto v = f(r);
      r.end();
      return v;
    } catch (const ParseError& e) {
      broken = fmt::format("malformed reply: {}", e.why);
      throw Error(Error::Kind::network,
                  fmt::format("store {}: {}: malformed reply: {}", address, what, e.why));
    }
  }

  // A request the server may hold up to `wait_for` (get, wait): what `f` reads from the ok
  // reply, or nothing when the server's wait ran out; the reply itself in `rep` (waited_ms,
  // and the timeout's payload) for the caller's message.
  template <class F>
  auto held(const std::string& body, std::string_view what, milliseconds wait_for, Reply& rep, F&& f)
      -> std::optional<std::invoke_result_t<F, Reader&>> {
    rep = call(body, what, wait_for);
    if (rep.status == Status::timeout) return std::nullopt;
    return parse(ok_payload(rep, what), what, std::forward<F>(f));
  }
};

namespace {

void check_key(std::string_view key, std::string_view what) {
  if (key.size() > kMaxStoreKeyBytes)
    throw Error(Error::Kind::invalid_argument,
                fmt::format("store {}: key of {} bytes exceeds {} bytes", what, key.size(),
                            kMaxStoreKeyBytes));
}

// The request body of set / set_if_absent, after checking key and value sizes.
std::string key_value_request(Op op, std::string_view key, std::string_view value,
                              std::string_view what) {
  check_key(key, what);
  if (value.size() > kMaxStoreValueBytes)
    throw Error(Error::Kind::invalid_argument,
                fmt::format("store {}: value of {} bytes exceeds {} bytes", what, value.size(),
                            kMaxStoreValueBytes));
  std::string body;
  put_u8(body, static_cast<std::uint8_t>(op));
  put_str(body, key);
  put_str(body, value);
  return body;
}

std::uint32_t timeout_ms(milliseconds t, std::string_view what) {
  if (t.count() < 0 || t.count() > kMaxStoreTimeoutMs)
    throw Error(Error::Kind::invalid_argument,
                fmt::format("store {}: timeout {} ms outside 0..{} ms", what, t.count(),
                            kMaxStoreTimeoutMs));
  return static_cast<std::uint32_t>(t.count());
}

// The request body of get / try_get: the server holds it up to wait_ms for the key.
std::string get_request(std::string_view key, std::uint32_t wait_ms) {
  std::string body;
  put_u8(body, static_cast<std::uint8_t>(Op::get));
  put_str(body, key);
  put_u32(body, wait_ms);
  return body;
}

std::string read_value(Reader& r) { return std::string(r.str(kMaxStoreValueBytes, "value")); }

std::string key_list(std::span<const std::string> keys) {
  std::string s;
  for (std::size_t i = 0; i < keys.size() && i < 16; ++i) s += (i ? ", " : "") + quote_key(keys[i]);
  if (keys.size() > 16) s += fmt::format(", ... ({} keys)", keys.size());
  return s;
}

}  // namespace

StoreClient::StoreClient(const std::string& host, int port) : StoreClient(host, port, Options{}) {}

StoreClient::StoreClient(const std::string& host, int port, Options opts)
    : impl_(std::make_unique<Impl>()) {
  impl_->address = format_host_port(host, port);
  impl_->opts = opts;
  try {
    impl_->fd = connect_tcp(host, port, deadline_after(opts.connect_timeout));
  } catch (const Error& e) {
    throw Error(e.kind(), fmt::format("cannot reach the rendezvous store: {}", e.what()));
  }
  std::string body;
  put_u8(body, static_cast<std::uint8_t>(Op::hello));
  put_u32(body, kStoreMagic);
  put_u16(body, kStoreVersion);
  auto rep = impl_->call(body, "hello", milliseconds(0));
  impl_->ok_payload(rep, "hello");
}

StoreClient::~StoreClient() = default;
StoreClient::StoreClient(StoreClient&&) noexcept = default;
StoreClient& StoreClient::operator=(StoreClient&&) noexcept = default;

const std::string& StoreClient::address() const noexcept { return impl_->address; }

void StoreClient::set(std::string_view key, std::string_view value) {
  std::string what = fmt::format("set({})", quote_key(key));
  std::string body = key_value_request(Op::set, key, value, what);
  std::lock_guard lock(impl_->mu);
  auto rep = impl_->call(body, what, milliseconds(0));
  impl_->parse(impl_->ok_payload(rep, what), what, [](Reader&) { return 0; });
}

void StoreClient::set(std::string_view key, std::span<const std::byte> value) {
  set(key, std::string_view(reinterpret_cast<const char*>(value.data()), value.size()));
}

bool StoreClient::set_if_absent(std::string_view key, std::string_view value) {
  std::string what = fmt::format("set_if_absent({})", quote_key(key));
  std::string body = key_value_request(Op::set_new, key, value, what);
  std::lock_guard lock(impl_->mu);
  auto rep = impl_->call(body, what, milliseconds(0));
  return impl_->parse(impl_->ok_payload(rep, what), what, [](Reader& r) { return r.u8() == 1; });
}

std::string StoreClient::get(std::string_view key, milliseconds timeout) {
  std::string what = fmt::format("get({})", quote_key(key));
  check_key(key, what);
  std::string body = get_request(key, timeout_ms(timeout, what));
  std::lock_guard lock(impl_->mu);
  Impl::Reply rep;
  auto value = impl_->held(body, what, timeout, rep, read_value);
  if (!value)
    throw Error(Error::Kind::timeout,
                fmt::format("store {}: key {} was not set within {} ms (waited {} ms)",
                            impl_->address, quote_key(key), timeout.count(), rep.waited_ms));
  return std::move(*value);
}

std::optional<std::string> StoreClient::try_get(std::string_view key) {
  std::string what = fmt::format("try_get({})", quote_key(key));
  check_key(key, what);
  std::lock_guard lock(impl_->mu);
  Impl::Reply rep;
  return impl_->held(get_request(key, 0), what, milliseconds(0), rep, read_value);
}

std::int64_t StoreClient::add(std::string_view key, std::int64_t delta) {
  std::string what = fmt::format("add({}, {})", quote_key(key), delta);
  check_key(key, what);
  std::string body;
  put_u8(body, static_cast<std::uint8_t>(Op::add));
  put_str(body, key);
  put_u64(body, static_cast<std::uint64_t>(delta));
  std::lock_guard lock(impl_->mu);
  auto rep = impl_->call(body, what, milliseconds(0));
  return impl_->parse(impl_->ok_payload(rep, what), what,
                      [](Reader& r) { return static_cast<std::int64_t>(r.u64()); });
}

namespace {
std::string keys_body(Op op, std::span<const std::string> keys, std::string_view what) {
  if (keys.empty() || keys.size() > kMaxStoreKeysPerRequest)
    throw Error(Error::Kind::invalid_argument,
                fmt::format("store {}: {} keys, expected 1..{}", what, keys.size(),
                            kMaxStoreKeysPerRequest));
  std::string body;
  put_u8(body, static_cast<std::uint8_t>(op));
  put_u32(body, static_cast<std::uint32_t>(keys.size()));
  for (auto& k : keys) {
    check_key(k, what);
    put_str(body, k);
  }
  return body;
}

// The request body of wait / wait_any: the server holds it up to `timeout` for all (or any) of
// the keys.
std::string wait_request(std::span<const std::string> keys, bool any, milliseconds timeout, std::string_view what) {
  std::string body = keys_body(Op::wait, keys, what);
  put_u8(body, any ? 1 : 0);
  put_u32(body, timeout_ms(timeout, what));
  return body;
}
}  // namespace

bool StoreClient::check(std::span<const std::string> keys) {
  std::string what = fmt::format("check({})", key_list(keys));
  std::string body = keys_body(Op::check, keys, what);
  std::lock_guard lock(impl_->mu);
  auto rep = impl_->call(body, what, milliseconds(0));
  return impl_->parse(impl_->ok_payload(rep, what), what, [](Reader& r) { return r.u8() == 1; });
}

void StoreClient::wait(std::span<const std::string> keys, milliseconds timeout) {
  std::string what = fmt::format("wait({})", key_list(keys));
  std::string body = wait_request(keys, false, timeout, what);
  std::lock_guard lock(impl_->mu);
  Impl::Reply rep;
  if (!impl_->held(body, what, timeout, rep, [](Reader&) { return 0; })) {
    auto missing = impl_->parse(rep.payload, what, [&](Reader& r) {
      std::uint32_t n = r.u32();
      if (n > keys.size()) throw ParseError{"more missing keys than requested"};
      std::vector<std::string> m;
      for (std::uint32_t i = 0; i < n; ++i) {
        std::uint32_t idx = r.u32();
        if (idx >= keys.size()) throw ParseError{"missing-key index out of range"};
        m.push_back(keys[idx]);
      }
      return m;
    });
    throw Error(Error::Kind::timeout,
                fmt::format("store {}: {} of {} keys still missing after {} ms (waited {} ms): {}",
                            impl_->address, missing.size(), keys.size(), timeout.count(),
                            rep.waited_ms, key_list(missing)));
  }
}

std::size_t StoreClient::wait_any(std::span<const std::string> keys, milliseconds timeout) {
  std::string what = fmt::format("wait_any({})", key_list(keys));
  std::string body = wait_request(keys, true, timeout, what);
  std::lock_guard lock(impl_->mu);
  Impl::Reply rep;
  auto got = impl_->held(body, what, timeout, rep, [](Reader& r) { return r.u32(); });
  if (!got)
    throw Error(Error::Kind::timeout,
                fmt::format("store {}: none of {} was set within {} ms (waited {} ms)",
                            impl_->address, key_list(keys), timeout.count(), rep.waited_ms));
  const std::uint32_t idx = *got;
  if (idx >= keys.size())
    throw Error(Error::Kind::network, fmt::format("store {}: {}: reply index {} out of range",
                                                  impl_->address, what, idx));
  return idx;
}

bool StoreClient::erase(std::string_view key) {
  std::string what = fmt::format("erase({})", quote_key(key));
  check_key(key, what);
  std::string body;
  put_u8(body, static_cast<std::uint8_t>(Op::erase));
  put_str(body, key);
  std::lock_guard lock(impl_->mu);
  auto rep = impl_->call(body, what, milliseconds(0));
  return impl_->parse(impl_->ok_payload(rep, what), what, [](Reader& r) { return r.u8() == 1; });
}

// ---- abort and barrier ----------------------------------------------------------------------

bool publish_abort(StoreClient& store, int rank, std::string_view message) {
  std::string text = fmt::format("rank {} failed: {}", rank, message);
  if (text.size() > 64 * 1024) text.resize(64 * 1024);
  store.set(fmt::format("abort/{}", rank), text);
  return store.set_if_absent(kAbortKey, text);
}

std::optional<std::string> poll_abort(StoreClient& store) { return store.try_get(kAbortKey); }

void check_abort(StoreClient& store) {
  if (auto a = poll_abort(store)) throw Error(Error::Kind::peer_failure, *a);
}

void barrier(StoreClient& store, std::string_view name, int world, int rank, milliseconds timeout) {
  if (world < 1 || rank < 0 || rank >= world)
    throw Error(Error::Kind::invalid_argument,
                fmt::format("barrier '{}': rank {} is not in a world of {}", name, rank, world));
  const std::string count_key = fmt::format("barrier/{}/count", name);
  const std::string done_key = fmt::format("barrier/{}/done", name);
  auto start = Clock::now();
  std::int64_t arrived = store.add(count_key, 1);
  if (arrived > world)
    throw Error(Error::Kind::mismatch,
                fmt::format("barrier '{}': {} arrivals for a world of {} (was the barrier name "
                            "reused, or do ranks disagree on the world size?)",
                            name, arrived, world));
  if (arrived == world) store.set(done_key, "1");
  const std::string keys[] = {done_key, std::string(kAbortKey)};
  auto left = std::max<milliseconds>(
      milliseconds(0), timeout - std::chrono::duration_cast<milliseconds>(Clock::now() - start));
  std::size_t idx;
  try {
    idx = store.wait_any(keys, left);
  } catch (const Error& e) {
    if (e.kind() != Error::Kind::timeout) throw;
    std::int64_t now_arrived = store.add(count_key, 0);
    throw Error(Error::Kind::timeout,
                fmt::format("barrier '{}' (rank {}): only {} of {} ranks arrived within {} ms "
                            "(store {})",
                            name, rank, now_arrived, world, timeout.count(), store.address()));
  }
  if (idx == 1) {
    if (store.check(std::span(keys, 1))) return;  // completed and aborted: the barrier is done
    throw Error(Error::Kind::peer_failure,
                fmt::format("barrier '{}' (rank {}): {}", name, rank,
                            store.try_get(kAbortKey).value_or("aborted")));
  }
}

}  // namespace inc::transport
