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

#include "transport/store_wire.hpp"

namespace inc::transport {

using namespace store_wire;
using std::chrono::milliseconds;

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

}  // namespace inc::transport
