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
#include <unordered_map>

namespace inc::transport {

namespace {

using std::chrono::milliseconds;

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

void put_u8(std::string& b, std::uint8_t v) { b.push_back(static_cast<char>(v)); }
void put_u16(std::string& b, std::uint16_t v) {
  for (int i = 0; i < 2; ++i) b.push_back(static_cast<char>(v >> (8 * i)));
}
void put_u32(std::string& b, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) b.push_back(static_cast<char>(v >> (8 * i)));
}
void put_u64(std::string& b, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) b.push_back(static_cast<char>(v >> (8 * i)));
}
void put_str(std::string& b, std::string_view s) {
  put_u32(b, static_cast<std::uint32_t>(s.size()));
  b.append(s);
}
// Prepends the u32 frame length to a body.
std::string frame(const std::string& body) {
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

std::optional<std::int64_t> parse_i64(std::string_view s) {
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::string quote_key(std::string_view k) {
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

}  // namespace

// ---- server ---------------------------------------------------------------------------------

struct StoreServer::Impl {
  struct Client {
    Fd fd;
    std::string peer;
    std::string in;  // received bytes not yet consumed
    std::size_t in_off = 0;
    std::string out;  // response bytes not yet sent
    std::size_t out_off = 0;
    bool hello_done = false;
    bool close_after_flush = false;
    bool dead = false;
    // A get/wait the server holds until its keys exist or its deadline passes.
    enum class Pending { none, get, wait_all, wait_any } pending = Pending::none;
    std::vector<std::string> keys;
    Deadline deadline{};
  };

  Listener listener;
  Fd wake;  // eventfd: the destructor writes it to stop the thread
  std::thread thread;
  std::atomic<bool> stop{false};

  mutable std::mutex mu;  // guards data and stats (the thread is the only writer)
  std::unordered_map<std::string, std::string> data;
  StoreServerStats st;

  std::vector<std::unique_ptr<Client>> clients;

  void run();
  bool iterate(std::vector<pollfd>& pfds);
  void accept_clients();
  void read_client(Client& c);
  void flush_client(Client& c);
  void process_requests(Client& c);
  void handle_request(Client& c, std::string_view body);
  void try_complete(Client& c, bool expired);
  void reply(Client& c, Status s, const std::string& payload = {});
  void bad_request(Client& c, const std::string& why);
};

StoreServer::StoreServer(const std::string& host, int port)
    : host_(host), impl_(std::make_unique<Impl>()) {
  impl_->listener = listen_tcp(host, port, 1024);
  port_ = impl_->listener.port;
  set_nonblocking(impl_->listener.fd.get());
  impl_->wake = Fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!impl_->wake)
    throw Error(Error::Kind::internal, fmt::format("store: eventfd: {}", std::strerror(errno)));
  impl_->thread = std::thread([impl = impl_.get()] { impl->run(); });
}

StoreServer::~StoreServer() {
  impl_->stop = true;
  std::uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(impl_->wake.get(), &one, sizeof one);
  if (impl_->thread.joinable()) impl_->thread.join();
}

std::optional<std::string> StoreServer::peek(const std::string& key) const {
  std::lock_guard lock(impl_->mu);
  auto it = impl_->data.find(key);
  if (it == impl_->data.end()) return std::nullopt;
  return it->second;
}

StoreServerStats StoreServer::stats() const {
  std::lock_guard lock(impl_->mu);
  StoreServerStats s = impl_->st;
  s.keys = impl_->data.size();
  return s;
}

void StoreServer::Impl::run() {
  std::vector<pollfd> pfds;
  while (!stop.load()) {
    try {
      if (!iterate(pfds)) break;
    } catch (const std::exception& e) {
      // Only resource exhaustion gets here; keep serving rather than take the job down.
      std::lock_guard lock(mu);
      st.last_bad_request = fmt::format("server error: {}", e.what());
      std::this_thread::sleep_for(milliseconds(10));
    }
  }
  clients.clear();
}

// One poll round: accept, read, answer, release held requests. False when asked to stop.
bool StoreServer::Impl::iterate(std::vector<pollfd>& pfds) {
  pfds.clear();
  pfds.push_back({wake.get(), POLLIN, 0});
  pfds.push_back({listener.fd.get(), POLLIN, 0});
  Deadline next = Clock::now() + std::chrono::hours(1);
  for (auto& c : clients) {
    short ev = POLLRDHUP;
    // One request at a time per client: read more only when nothing is pending or unsent.
    if (c->pending == Client::Pending::none && c->out_off == c->out.size() && !c->close_after_flush)
      ev |= POLLIN;
    if (c->out_off < c->out.size()) ev |= POLLOUT;
    if (c->pending != Client::Pending::none) next = std::min(next, c->deadline);
    pfds.push_back({c->fd.get(), ev, 0});
  }
  int rc = ::poll(pfds.data(), pfds.size(), ms_until(next) + 1);
  if (rc < 0) {
    // EINTR, or ENOMEM: nothing sensible to do but retry.
    if (errno != EINTR) std::this_thread::sleep_for(milliseconds(10));
    return true;
  }
  if (pfds[0].revents) return false;
  if (pfds[1].revents & POLLIN) accept_clients();
  for (std::size_t i = 0; i + 2 < pfds.size(); ++i) {
    Client& c = *clients[i];
    short re = pfds[i + 2].revents;
    if (!re || c.dead) continue;
    if (re & POLLOUT) {
      flush_client(c);
      process_requests(c);  // requests that arrived while the reply was going out
    }
    if (c.dead) continue;
    try {
      if (re & POLLIN)
        read_client(c);  // reads up to EOF when idle
      else if (re & (POLLRDHUP | POLLHUP | POLLERR))
        c.dead = true;  // gone while a request was held or a reply was unsent
    } catch (const std::exception& e) {
      // e.g. bad_alloc for a huge value: drop this client, keep serving the others.
      bad_request(c, fmt::format("server error while handling the request: {}", e.what()));
    }
  }
  // Requests may have created keys that held gets/waits wait for, and deadlines may have
  // passed. Completing a wait lets that client's buffered next request run, which can create
  // keys in turn, so repeat until a pass changes nothing.
  for (bool again = true; again;) {
    again = false;
    auto now = Clock::now();
    for (auto& c : clients) {
      if (c->dead || c->pending == Client::Pending::none) continue;
      try_complete(*c, now >= c->deadline);
      if (c->pending == Client::Pending::none) {
        process_requests(*c);
        again = true;
      }
    }
  }
  auto gone = std::remove_if(clients.begin(), clients.end(), [](auto& c) { return c->dead; });
  if (gone != clients.end()) {
    clients.erase(gone, clients.end());
    std::lock_guard lock(mu);
    st.clients = clients.size();
  }
  return true;
}

void StoreServer::Impl::accept_clients() {
  for (int i = 0; i < 64; ++i) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    int fd = ::accept4(listener.fd.get(), reinterpret_cast<sockaddr*>(&ss), &len,
                       SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;  // EAGAIN, or a transient error (EMFILE, ECONNABORTED): retry next poll
    auto c = std::make_unique<Client>();
    c->fd = Fd(fd);
    c->peer = peer_endpoint(fd);
    try {
      set_nodelay(fd);
    } catch (const Error&) {
      // not TCP (cannot happen for a TCP listener) or already reset: harmless
    }
    clients.push_back(std::move(c));
    std::lock_guard lock(mu);
    ++st.connections_accepted;
    st.clients = clients.size();
  }
}

void StoreServer::Impl::read_client(Client& c) {
  char buf[64 * 1024];
  for (;;) {
    ssize_t n = ::recv(c.fd.get(), buf, sizeof buf, 0);
    if (n > 0) {
      if (c.in_off > 0 && c.in_off == c.in.size()) {
        c.in.clear();
        c.in_off = 0;
      }
      c.in.append(buf, static_cast<std::size_t>(n));
      process_requests(c);
      if (c.dead || c.pending != Client::Pending::none || c.out_off < c.out.size()) return;
      continue;
    }
    if (n == 0) {
      c.dead = true;  // orderly close
      return;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) c.dead = true;
    return;
  }
}

void StoreServer::Impl::flush_client(Client& c) {
  while (c.out_off < c.out.size()) {
    ssize_t n = ::send(c.fd.get(), c.out.data() + c.out_off, c.out.size() - c.out_off,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      c.out_off += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    c.dead = true;
    return;
  }
  c.out.clear();
  c.out_off = 0;
  if (c.close_after_flush) c.dead = true;
}

// Handles complete frames in the input buffer, one at a time, while the client is not
// waiting on a held request and its previous reply has been sent.
void StoreServer::Impl::process_requests(Client& c) {
  while (!c.dead && c.pending == Client::Pending::none && c.out_off == c.out.size() &&
         !c.close_after_flush) {
    std::size_t avail = c.in.size() - c.in_off;
    if (avail < 4) break;
    Reader hdr(std::string_view(c.in).substr(c.in_off, 4));
    std::uint32_t len = hdr.u32();
    if (len == 0 || len > kMaxStoreFrameBytes) {
      bad_request(c, fmt::format("frame length {} outside 1..{}", len, kMaxStoreFrameBytes));
      return;
    }
    if (avail < 4 + static_cast<std::size_t>(len)) break;
    std::string_view body = std::string_view(c.in).substr(c.in_off + 4, len);
    c.in_off += 4 + len;
    handle_request(c, body);
    if (c.in_off == c.in.size()) {
      c.in.clear();
      c.in_off = 0;
    } else if (c.in_off > (1u << 20)) {
      c.in.erase(0, c.in_off);
      c.in_off = 0;
    }
    if (c.out_off < c.out.size()) flush_client(c);
  }
}

void StoreServer::Impl::bad_request(Client& c, const std::string& why) {
  c.dead = true;
  std::lock_guard lock(mu);
  ++st.bad_requests;
  st.last_bad_request = fmt::format("from {}: {}", c.peer, why);
}

void StoreServer::Impl::reply(Client& c, Status s, const std::string& payload) {
  std::string body;
  put_u8(body, static_cast<std::uint8_t>(s));
  body += payload;
  c.out += frame(body);
}

void StoreServer::Impl::handle_request(Client& c, std::string_view body) {
  try {
    Reader r(body);
    auto op = static_cast<Op>(r.u8());
    if (!c.hello_done && op != Op::hello)
      throw ParseError{fmt::format("first request is op {}, not hello", static_cast<int>(op))};
    auto read_timeout = [&] {
      std::uint32_t t = r.u32();
      if (t > kMaxStoreTimeoutMs)
        throw ParseError{fmt::format("timeout {} ms exceeds {} ms", t, kMaxStoreTimeoutMs)};
      return Clock::now() + milliseconds(t);
    };
    {
      std::lock_guard lock(mu);
      ++st.requests;
    }
    switch (op) {
      case Op::hello: {
        std::uint32_t magic = r.u32();
        std::uint16_t version = r.u16();
        r.end();
        if (magic != kStoreMagic)
          throw ParseError{fmt::format("bad magic 0x{:08x} (not an INC store client)", magic)};
        if (c.hello_done) throw ParseError{"second hello"};
        if (version != kStoreVersion) {
          std::string p;
          put_str(p, fmt::format("store protocol version mismatch: server {}, client {}",
                                 kStoreVersion, version));
          reply(c, Status::error, p);
          c.close_after_flush = true;
          return;
        }
        c.hello_done = true;
        reply(c, Status::ok);
        return;
      }
      case Op::set:
      case Op::set_new: {
        auto key = r.str(kMaxStoreKeyBytes, "key");
        auto value = r.str(kMaxStoreValueBytes, "value");
        r.end();
        bool stored = true;
        {
          std::lock_guard lock(mu);
          if (op == Op::set)
            data[std::string(key)] = std::string(value);
          else
            stored = data.try_emplace(std::string(key), std::string(value)).second;
        }
        std::string p;
        if (op == Op::set_new) put_u8(p, stored ? 1 : 0);
        reply(c, Status::ok, p);
        return;
      }
      case Op::get: {
        auto key = r.str(kMaxStoreKeyBytes, "key");
        auto deadline = read_timeout();
        r.end();
        c.pending = Client::Pending::get;
        c.keys.assign(1, std::string(key));
        c.deadline = deadline;
        try_complete(c, false);
        return;
      }
      case Op::add: {
        auto key = r.str(kMaxStoreKeyBytes, "key");
        auto delta = static_cast<std::int64_t>(r.u64());
        r.end();
        std::string p;
        std::lock_guard lock(mu);
        auto& v = data[std::string(key)];
        std::int64_t cur = 0;
        if (!v.empty()) {
          auto parsed = parse_i64(v);
          if (!parsed) {
            put_str(p, fmt::format("add({}): the key holds {} bytes that are not a decimal integer",
                                   quote_key(key), v.size()));
            reply(c, Status::error, p);
            return;
          }
          cur = *parsed;
        }
        std::int64_t next = 0;
        if (__builtin_add_overflow(cur, delta, &next)) {
          put_str(p, fmt::format("add({}, {}): overflows the current value {}", quote_key(key),
                                 delta, cur));
          reply(c, Status::error, p);
          return;
        }
        v = std::to_string(next);
        put_u64(p, static_cast<std::uint64_t>(next));
        reply(c, Status::ok, p);
        return;
      }
      case Op::check:
      case Op::wait: {
        std::uint32_t n = r.u32();
        if (n == 0 || n > kMaxStoreKeysPerRequest)
          throw ParseError{fmt::format("key count {} outside 1..{}", n, kMaxStoreKeysPerRequest)};
        std::vector<std::string> keys;
        keys.reserve(std::min<std::uint32_t>(n, 1024));
        for (std::uint32_t i = 0; i < n; ++i) keys.emplace_back(r.str(kMaxStoreKeyBytes, "key"));
        if (op == Op::check) {
          r.end();
          bool all = true;
          {
            std::lock_guard lock(mu);
            for (auto& k : keys) all = all && data.count(k) > 0;
          }
          std::string p;
          put_u8(p, all ? 1 : 0);
          reply(c, Status::ok, p);
          return;
        }
        std::uint8_t any = r.u8();
        if (any > 1) throw ParseError{fmt::format("wait mode {} is neither 0 nor 1", any)};
        auto deadline = read_timeout();
        r.end();
        c.pending = any ? Client::Pending::wait_any : Client::Pending::wait_all;
        c.keys = std::move(keys);
        c.deadline = deadline;
        try_complete(c, false);
        return;
      }
      case Op::erase: {
        auto key = r.str(kMaxStoreKeyBytes, "key");
        r.end();
        bool existed;
        {
          std::lock_guard lock(mu);
          existed = data.erase(std::string(key)) > 0;
        }
        std::string p;
        put_u8(p, existed ? 1 : 0);
        reply(c, Status::ok, p);
        return;
      }
    }
    throw ParseError{fmt::format("unknown op {}", static_cast<int>(op))};
  } catch (const ParseError& e) {
    {
      std::lock_guard lock(mu);
      --st.requests;  // do not count a rejected request as served
    }
    bad_request(c, e.why);
  }
}

// Answers a held get/wait if its keys exist, or with a timeout status once expired.
void StoreServer::Impl::try_complete(Client& c, bool expired) {
  std::string p;
  std::vector<std::uint32_t> missing;
  std::optional<std::uint32_t> found;
  {
    std::lock_guard lock(mu);
    for (std::uint32_t i = 0; i < c.keys.size(); ++i) {
      auto it = data.find(c.keys[i]);
      if (it == data.end()) {
        missing.push_back(i);
      } else if (!found) {
        found = i;
        if (c.pending == Client::Pending::get) put_str(p, it->second);
      }
    }
  }
  bool done = c.pending == Client::Pending::wait_any ? found.has_value() : missing.empty();
  if (done) {
    if (c.pending == Client::Pending::wait_any) put_u32(p, *found);
    reply(c, Status::ok, p);
  } else if (expired) {
    p.clear();
    put_u32(p, static_cast<std::uint32_t>(missing.size()));
    for (auto i : missing) put_u32(p, i);
    reply(c, Status::timeout, p);
  } else {
    return;
  }
  c.pending = Client::Pending::none;
  c.keys.clear();
  flush_client(c);
}

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
      return Reply{static_cast<Status>(status), buf.substr(1)};
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
  std::string body;
  put_u8(body, static_cast<std::uint8_t>(Op::get));
  put_str(body, key);
  put_u32(body, timeout_ms(timeout, what));
  std::lock_guard lock(impl_->mu);
  auto start = Clock::now();
  auto rep = impl_->call(body, what, timeout);
  if (rep.status == Status::timeout) {
    auto waited = std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
    throw Error(Error::Kind::timeout,
                fmt::format("store {}: key {} was not set within {} ms (waited {} ms)",
                            impl_->address, quote_key(key), timeout.count(), waited));
  }
  return impl_->parse(impl_->ok_payload(rep, what), what,
                      [](Reader& r) { return std::string(r.str(kMaxStoreValueBytes, "value")); });
}

std::optional<std::string> StoreClient::try_get(std::string_view key) {
  std::string what = fmt::format("try_get({})", quote_key(key));
  check_key(key, what);
  std::string body;
  put_u8(body, static_cast<std::uint8_t>(Op::get));
  put_str(body, key);
  put_u32(body, 0);
  std::lock_guard lock(impl_->mu);
  auto rep = impl_->call(body, what, milliseconds(0));
  if (rep.status == Status::timeout) return std::nullopt;
  return impl_->parse(impl_->ok_payload(rep, what), what,
                      [](Reader& r) { return std::string(r.str(kMaxStoreValueBytes, "value")); });
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
  std::string body = keys_body(Op::wait, keys, what);
  put_u8(body, 0);
  put_u32(body, timeout_ms(timeout, what));
  std::lock_guard lock(impl_->mu);
  auto start = Clock::now();
  auto rep = impl_->call(body, what, timeout);
  if (rep.status == Status::timeout) {
    auto waited = std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
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
                            impl_->address, missing.size(), keys.size(), timeout.count(), waited,
                            key_list(missing)));
  }
  impl_->parse(impl_->ok_payload(rep, what), what, [](Reader&) { return 0; });
}

std::size_t StoreClient::wait_any(std::span<const std::string> keys, milliseconds timeout) {
  std::string what = fmt::format("wait_any({})", key_list(keys));
  std::string body = keys_body(Op::wait, keys, what);
  put_u8(body, 1);
  put_u32(body, timeout_ms(timeout, what));
  std::lock_guard lock(impl_->mu);
  auto start = Clock::now();
  auto rep = impl_->call(body, what, timeout);
  if (rep.status == Status::timeout) {
    auto waited = std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
    throw Error(Error::Kind::timeout,
                fmt::format("store {}: none of {} was set within {} ms (waited {} ms)",
                            impl_->address, key_list(keys), timeout.count(), waited));
  }
  auto idx = impl_->parse(impl_->ok_payload(rep, what), what, [](Reader& r) { return r.u32(); });
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
