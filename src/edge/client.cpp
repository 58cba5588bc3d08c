#include "edge/client.hpp"

#include <fmt/format.h>
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>

namespace inc::edge {

namespace {

using Clock = std::chrono::steady_clock;

// The engine's own deadline (the collective's) normally reports first, with the better message;
// the rank's own catches an engine that hangs.
constexpr auto kGrace = std::chrono::seconds(2);

template <std::size_t N>
void put(char (&dst)[N], const std::string& s, const char* what) {
  if (s.size() >= N) throw Error(Error::Kind::config, fmt::format("edge: {} '{}' is longer than {} bytes", what, s, N - 1));
  std::memcpy(dst, s.c_str(), s.size() + 1);
}

}  // namespace

EdgeClient::EdgeClient(ClientConfig cfg) : cfg_(std::move(cfg)) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (cfg_.socket_path.empty() || cfg_.socket_path.size() >= sizeof a.sun_path)
    throw Error(Error::Kind::config, fmt::format("edge socket path '{}' is empty or too long", cfg_.socket_path));
  std::memcpy(a.sun_path, cfg_.socket_path.c_str(), cfg_.socket_path.size() + 1);
  sock_.reset(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!sock_ || ::connect(sock_.get(), reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0)
    throw Error(Error::Kind::config,
                fmt::format("no edge engine at {}: {}", cfg_.socket_path, std::strerror(errno)));
}

EdgeClient::~EdgeClient() = default;

// One control message and its reply (the engine answers every control message in order).
void EdgeClient::send_control(const void* msg, std::size_t n, int fd, const char* what) {
  if (dead_) throw *dead_;
  const int fds[1] = {fd};
  if (!send_msg(sock_.get(), msg, n, fd >= 0 ? std::span<const int>(fds, 1) : std::span<const int>())) {
    fail_everything(Error(Error::Kind::peer_failure,
                          fmt::format("edge engine at {}: the connection is closed (did the engine die?)",
                                      cfg_.socket_path)));
    throw *dead_;
  }
  await_reply(what);
}

void EdgeClient::await_reply(const char* what) {
  // The hello waits for the job's other proxies: up to the time-out, plus the grace.
  const auto deadline = Clock::now() + cfg_.timeout + kGrace;
  for (;;) {
    pollfd pfd{sock_.get(), POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0)
      throw Error(Error::Kind::timeout, fmt::format("edge engine at {}: no answer to the {} within {:.1f} s",
                                                    cfg_.socket_path, what, cfg_.timeout.count() / 1000.0 + 2));
    if (::poll(&pfd, 1, static_cast<int>(std::min<long long>(left, 1000))) <= 0) continue;
    Reply r;
    std::vector<transport::Fd> fds_in;
    long got = recv_msg(sock_.get(), &r, sizeof r, fds_in);
    if (got < 0 && errno == EINTR) continue;
    if (got != static_cast<long>(sizeof r) || r.h.magic != kMagic || r.h.kind != static_cast<std::uint16_t>(MsgKind::reply)) {
      fail_everything(Error(Error::Kind::peer_failure,
                            fmt::format("edge engine at {}: the connection closed during the {} (did the engine die?)",
                                        cfg_.socket_path, what)));
      throw *dead_;
    }
    r.message[sizeof r.message - 1] = '\0';
    if (!r.ok) {
      auto kind = r.error_kind <= static_cast<std::uint32_t>(Error::Kind::internal) ? static_cast<Error::Kind>(r.error_kind)
                                                                                   : Error::Kind::internal;
      throw Error(kind, r.message);
    }
    return;
  }
}

void EdgeClient::attach() {
  std::lock_guard lk(mu_);
  const std::uint64_t sq_bytes = SpscRing::bytes_for(kRingEntries, kSqEntryBytes);
  rings_ = SharedRegion::create(sq_bytes + SpscRing::bytes_for(kRingEntries, kCqEntryBytes), "inc-edge-rings");
  sq_ = SpscRing(rings_.data(), kRingEntries, kSqEntryBytes);
  cq_ = SpscRing(rings_.data() + sq_bytes, kRingEntries, kCqEntryBytes);
  sq_.init();
  cq_.init();
  doorbell_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  completion_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!doorbell_ || !completion_) throw Error(Error::Kind::internal, fmt::format("eventfd: {}", std::strerror(errno)));
  Hello h;
  h.job = cfg_.job;
  std::memcpy(h.token, cfg_.token, sizeof h.token);
  h.rank = cfg_.rank;
  h.world = cfg_.world;
  h.timeout_ms = static_cast<std::uint32_t>(std::clamp<long long>(cfg_.timeout.count(), 1, UINT32_MAX));
  h.ring_entries = kRingEntries;
  h.mesh_tag = cfg_.mesh_tag;
  put(h.store, cfg_.store, "store address");
  put(h.prefix, cfg_.prefix, "store prefix");
  put(h.listen_host, cfg_.listen_host, "listen host");
  put(h.handler, cfg_.handler, "handler name");
  const int fds[3] = {rings_.fd(), doorbell_.get(), completion_.get()};
  if (!send_msg(sock_.get(), &h, sizeof h, fds))
    throw Error(Error::Kind::config, fmt::format("edge engine at {}: cannot send the hello: {}", cfg_.socket_path,
                                                 std::strerror(errno)));
  await_reply("hello");
}

void EdgeClient::add_comm(std::uint32_t comm_id, const std::vector<int>& members) {
  std::lock_guard lk(mu_);
  if (members.size() > kMaxMembers)
    throw Error(Error::Kind::invalid_argument, fmt::format("edge: more than {} members", kMaxMembers));
  auto m = std::make_unique<AddComm>();
  m->comm_id = comm_id;
  m->nmembers = static_cast<std::uint32_t>(members.size());
  std::copy(members.begin(), members.end(), m->members);
  send_control(m.get(), sizeof *m, -1, "new communicator");
}

std::uint32_t EdgeClient::register_region(SharedRegion mem, bool user) {
  Register r;
  r.id = next_reg_++;
  r.bytes = mem.size();
  send_control(&r, sizeof r, mem.fd(), "memory registration");
  regs_.emplace(r.id, Reg{std::move(mem), user, false});
  return r.id;
}

void* EdgeClient::alloc(std::size_t bytes) {
  std::lock_guard lk(mu_);
  if (bytes == 0) bytes = 1;
  const std::uint32_t id = register_region(SharedRegion::create(bytes, "inc-edge-buffer"), true);
  return regs_.at(id).mem.data();
}

void EdgeClient::free(void* p) {
  std::lock_guard lk(mu_);
  for (auto& [id, r] : regs_)
    if (r.user && r.mem.data() == p) {
      // The engine keeps its mapping until the connection closes; unmapped here, so the
      // application cannot use it any more. (Registrations are bounded: kMaxRegistrations.)
      r.mem = SharedRegion();
      r.user = false;
      r.in_use = true;  // never handed out as staging
      return;
    }
  throw Error(Error::Kind::invalid_argument, "edge free(): not memory from alloc()");
}

// Where `bytes` at `p` are for the engine: in place if `p` lies in alloc() memory, else in a
// free staging region (copied in if `copy_in`).
BufRef EdgeClient::place(const void* p, std::uint64_t bytes, bool copy_in, EdgeOp& op, std::byte** staged) {
  *staged = nullptr;
  if (bytes == 0) return {};
  const auto* b = static_cast<const std::byte*>(p);
  for (auto& [id, r] : regs_)
    if (r.user && b >= r.mem.data() && b + bytes <= r.mem.data() + r.mem.size())
      return BufRef{id, 0, static_cast<std::uint64_t>(b - r.mem.data())};
  std::uint32_t best = 0;
  for (auto& [id, r] : regs_)
    if (!r.user && !r.in_use && r.mem.size() >= bytes && (!best || r.mem.size() < regs_.at(best).mem.size())) best = id;
  if (!best) best = register_region(SharedRegion::create(std::max<std::uint64_t>(std::bit_ceil(bytes), 65536), "inc-edge-staging"), false);
  Reg& r = regs_.at(best);
  r.in_use = true;
  op.staged.push_back(best);
  if (copy_in) std::memcpy(r.mem.data(), p, bytes);
  *staged = r.mem.data();
  return BufRef{best, 0, 0};
}

std::shared_ptr<EdgeOp> EdgeClient::start(std::uint32_t comm_id, const coll::CollectiveParams& p, const void* input,
                                          void* output) {
  std::lock_guard lk(mu_);
  if (dead_) throw *dead_;
  check_socket();
  if (dead_) throw *dead_;
  auto op = std::make_shared<EdgeOp>();
  op->uid = next_uid_++;
  op->deadline = Clock::now() + cfg_.timeout + kGrace;
  Descriptor d;
  d.uid = op->uid;
  d.comm_id = comm_id;
  d.coll = static_cast<std::uint8_t>(p.coll);
  d.algo = static_cast<std::uint8_t>(p.algo);
  d.dtype = static_cast<std::uint8_t>(p.dtype);
  d.op = static_cast<std::uint8_t>(p.op);
  d.nranks = p.nranks;
  d.rank = p.rank;
  d.root = p.root;
  d.in_place = p.in_place ? 1 : 0;
  d.count = p.count;
  d.segment_bytes = p.segment_bytes;
  d.accumulate = static_cast<std::uint8_t>(p.accumulate);
  d.timeout_ms = static_cast<std::uint32_t>(std::clamp<long long>(cfg_.timeout.count(), 1, UINT32_MAX));
  const coll::Region res = coll::result_region(p);
  std::byte* staged_out = nullptr;
  try {
    if (!p.in_place) {
      std::byte* staged_in = nullptr;
      d.input = place(input, coll::input_bytes(p), true, *op, &staged_in);
    }
    // In place, the one buffer goes in with its contents (this rank's contribution).
    d.output = place(output, coll::output_bytes(p), p.in_place, *op, &staged_out);
  } catch (...) {
    for (auto id : op->staged) regs_.at(id).in_use = false;
    // The call fails here; its peers must not wait for it: the engine refuses this descriptor
    // and tells them (its completion, under a uid nobody waits for, is dropped by reap()).
    if (!dead_) {
      d.unplaced = 1;
      d.input = d.output = BufRef{};
      backlog_.push_back(d);
      post_backlog();
    }
    throw;
  }
  if (staged_out && res.bytes) {
    op->copy_from = staged_out + res.offset;
    op->copy_to = static_cast<std::byte*>(output) + res.offset;
    op->copy_bytes = res.bytes;
  }
  inflight_[op->uid] = op;
  backlog_.push_back(d);
  post_backlog();
  return op;
}

void EdgeClient::post_backlog() {
  bool ok = true, pushed = false;
  while (!backlog_.empty() && sq_.push(&backlog_.front(), sizeof(Descriptor), ok)) {
    backlog_.pop_front();
    pushed = true;
  }
  if (!ok) fail_everything(Error(Error::Kind::internal, "edge: the engine corrupted the submission ring"));
  if (pushed) signal_eventfd(doorbell_.get());
}

void EdgeClient::finish(EdgeOp& op, const Completion& c) {
  op.result = c;
  op.result.message[sizeof op.result.message - 1] = '\0';
  if (!c.ok) {
    auto kind = c.error_kind <= static_cast<std::uint32_t>(Error::Kind::internal) ? static_cast<Error::Kind>(c.error_kind)
                                                                                 : Error::Kind::internal;
    op.error = Error(kind, fmt::format("{} (edge engine at {})", op.result.message, cfg_.socket_path));
  } else if (op.copy_bytes) {
    std::memcpy(op.copy_to, op.copy_from, op.copy_bytes);
  }
  for (auto id : op.staged) regs_.at(id).in_use = false;
  op.staged.clear();
  op.done = true;
}

void EdgeClient::reap() {
  Completion c;
  bool ok = true;
  while (cq_.pop(&c, sizeof c, ok)) {
    auto it = inflight_.find(c.uid);
    if (it == inflight_.end()) continue;  // not ours: ignored (the engine is not trusted blindly)
    auto op = it->second;
    inflight_.erase(it);
    finish(*op, c);
  }
  if (!ok) fail_everything(Error(Error::Kind::internal, "edge: the engine corrupted the completion ring"));
  post_backlog();
}

void EdgeClient::fail_everything(const Error& e) {
  if (!dead_) dead_ = e;
  for (auto& [uid, op] : inflight_) {
    // Staging regions stay marked in use: the engine may still be writing them.
    op->error = e;
    op->done = true;
  }
  inflight_.clear();
  backlog_.clear();
}

// The socket says something only when the engine goes away (or closes us after a protocol error).
void EdgeClient::check_socket() {
  pollfd pfd{sock_.get(), POLLIN, 0};
  if (::poll(&pfd, 1, 0) <= 0) return;
  Reply r;
  std::vector<transport::Fd> fds;
  long n = recv_msg(sock_.get(), &r, sizeof r, fds);
  std::string why = "the engine closed the connection (did it die?)";
  if (n == static_cast<long>(sizeof r) && !r.ok) {
    r.message[sizeof r.message - 1] = '\0';
    why = r.message;
  }
  fail_everything(Error(Error::Kind::peer_failure,
                        fmt::format("edge engine at {}: {}; every collective posted through it fails", cfg_.socket_path, why)));
}

void EdgeClient::progress(EdgeOp& op, int timeout_ms) {
  pollfd pfd[2] = {{completion_.get(), POLLIN, 0}, {sock_.get(), POLLIN, 0}};
  if (timeout_ms > 0) {
    for (const auto until = Clock::now() + kBusyPoll; Clock::now() < until;) {  // busy-poll, then sleep
      reap();
      if (op.done) return;
      ::sched_yield();
    }
    mu_.unlock();  // others may post while this thread sleeps
    ::poll(pfd, 2, timeout_ms);
    mu_.lock();
  } else {
    ::poll(pfd, 2, 0);
  }
  if (pfd[0].revents & POLLIN) drain_eventfd(completion_.get());
  reap();
  if (!op.done) check_socket();
}

void EdgeClient::wait(EdgeOp& op) {
  std::unique_lock lk(mu_);
  while (!op.done) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(op.deadline - Clock::now()).count();
    if (left <= 0) {
      inflight_.erase(op.uid);
      op.error = Error(Error::Kind::timeout,
                       fmt::format("edge engine at {}: collective #{} not completed within INC_TIMEOUT ({:.1f} s) "
                                   "and the engine's grace (is the engine stuck?)",
                                   cfg_.socket_path, op.uid, cfg_.timeout.count() / 1000.0));
      op.done = true;  // its staging stays in use: the engine may still write it
      break;
    }
    progress(op, static_cast<int>(std::min<long long>(left, 1000)));
  }
  if (op.error) throw *op.error;
}

bool EdgeClient::test(EdgeOp& op) {
  {
    std::unique_lock lk(mu_);
    if (!op.done) progress(op, 0);
    if (!op.done && Clock::now() < op.deadline) return false;
  }
  wait(op);  // done, or reports the time-out
  return true;
}

}  // namespace inc::edge
