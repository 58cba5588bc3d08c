// One rank's proxy inside the edge engine: admission, the engines' mesh of its job, and the loop
// that turns posted descriptors into collectives of coll::Engine over registered memory.
#include "edge/proxy.hpp"

#include <fmt/format.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>

#include <cerrno>
#include <set>

#include "coll/executor.hpp"
#include "transport/store.hpp"

namespace inc::edge {

namespace {

using coll::CollectiveParams;

class ProxyAddressBook : public transport::MeshAddressBook {
 public:
  ProxyAddressBook(transport::StoreClient& s, std::string prefix, std::chrono::milliseconds t)
      : store_(s), prefix_(std::move(prefix)), timeout_(t) {}
  void publish(int rank, const std::string& addr) override {
    store_.set(fmt::format("{}/addr/{}", prefix_, rank), addr);
  }
  std::string lookup(int rank) override { return store_.get(fmt::format("{}/addr/{}", prefix_, rank), timeout_); }

 private:
  transport::StoreClient& store_;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
};

template <std::size_t N>
bool terminated(const char (&s)[N]) {
  for (char c : s)
    if (c == '\0') return true;
  return false;
}

void copy_message(char* dst, std::size_t cap, const std::string& s) {
  const std::size_t n = std::min(cap - 1, s.size());
  std::memcpy(dst, s.data(), n);
  dst[n] = '\0';
}

}  // namespace

RankProxy::RankProxy(EdgeEngine& owner, transport::Fd sock, std::uint32_t uid)
    : owner_(owner), sock_(std::move(sock)), peer_uid_(uid) {}

RankProxy::~RankProxy() {
  engine_.reset();  // before the memory it may point into
  std::uint64_t mapped = rings_.size();
  for (const auto& [id, r] : regs_) mapped += r.size();
  regs_.clear();
  rings_ = SharedRegion();
  {
    std::lock_guard lk(owner_.mu_);
    owner_.stats_.mapped_bytes -= mapped;
  }
  if (admitted_) owner_.leave(job_, rank_);
}

void RankProxy::count_mapped(std::uint64_t bytes) {
  std::lock_guard lk(owner_.mu_);
  owner_.stats_.mapped_bytes += bytes;
}

bool RankProxy::reply(bool ok, Error::Kind kind, const std::string& msg) {
  Reply r;
  r.ok = ok ? 1 : 0;
  r.error_kind = static_cast<std::uint32_t>(kind);
  copy_message(r.message, sizeof r.message, msg);
  return send_msg(sock_.get(), &r, sizeof r);
}

void RankProxy::refuse(const std::string& why) {
  owner_.log(fmt::format("refused a connection (uid {}): {}", peer_uid_, why));
  {
    std::lock_guard lk(owner_.mu_);
    ++owner_.stats_.refused;
  }
  reply(false, Error::Kind::config, "edge engine: " + why);
}

// Hello: checked field by field, then admitted to its job's session, then the mesh is built.
bool RankProxy::handshake() {
  pollfd pfd{sock_.get(), POLLIN, 0};
  const int ms = static_cast<int>(owner_.cfg_.hello_timeout.count());
  if (::poll(&pfd, 1, ms) <= 0) {
    owner_.log("a connection sent no hello within the deadline");
    return false;
  }
  Hello h;
  std::vector<transport::Fd> fds;
  const long n = recv_msg(sock_.get(), &h, sizeof h, fds);
  if (n != static_cast<long>(sizeof h) || h.h.magic != kMagic || h.h.kind != static_cast<std::uint16_t>(MsgKind::hello)) {
    refuse("the first message is not a hello of this protocol");
    return false;
  }
  if (h.h.version != kVersion) {
    refuse(fmt::format("protocol version {} (this engine speaks {})", h.h.version, kVersion));
    return false;
  }
  if (fds.size() != 3) {
    refuse(fmt::format("a hello carries 3 file descriptors, this one {}", fds.size()));
    return false;
  }
  if (h.world < 1 || h.world > static_cast<int>(kMaxMembers) || h.rank < 0 || h.rank >= h.world ||
      h.ring_entries != kRingEntries || h.timeout_ms == 0 || !terminated(h.store) || !terminated(h.prefix) ||
      !terminated(h.listen_host) || !terminated(h.handler)) {
    refuse(fmt::format("malformed hello (rank {} of {}, {} ring entries)", h.rank, h.world, h.ring_entries));
    return false;
  }
  std::shared_ptr<HandlerChain> chain;
  try {
    chain = std::make_shared<HandlerChain>(*owner_.cfg_.handlers, h.handler, &owner_.handler_counts_);
  } catch (const Error& e) {
    refuse(e.what());
    return false;
  }
  if (auto why = owner_.admit(h.job, h.rank, h.token, peer_uid_, h.handler); !why.empty()) {
    refuse(why);
    return false;
  }
  admitted_ = true;
  job_ = h.job;
  rank_ = h.rank;
  world_ = h.world;
  timeout_ = std::chrono::milliseconds(h.timeout_ms);
  try {
    rings_ = SharedRegion::map(fds[0].release(), rings_bytes());
  } catch (const Error& e) {
    refuse(fmt::format("the rings: {}", e.what()));
    return false;
  }
  count_mapped(rings_.size());
  sq_ = SpscRing(rings_.data(), kRingEntries, kSqEntryBytes);
  cq_ = SpscRing(rings_.data() + SpscRing::bytes_for(kRingEntries, kSqEntryBytes), kRingEntries, kCqEntryBytes);
  doorbell_ = std::move(fds[1]);
  completion_ = std::move(fds[2]);
  transport::set_nonblocking(doorbell_.get());
  try {
    auto hp = transport::parse_host_port(h.store, "the hello's store");
    transport::StoreClient::Options so;
    so.connect_timeout = so.request_timeout = timeout_;
    transport::StoreClient store(hp.host, hp.port, so);
    ProxyAddressBook book(store, h.prefix, timeout_);
    auto peers = transport::connect_mesh(rank_, world_, h.listen_host, book, h.mesh_tag,
                                         static_cast<int>(timeout_.count()));
    engine_ = std::make_unique<coll::Engine>(std::make_unique<transport::TcpMesh>(rank_, std::move(peers)), timeout_);
    chain_ = chain;
    engine_->set_recv_hook(std::move(chain));  // every receive op runs through the handlers
  } catch (const Error& e) {
    owner_.log(fmt::format("job {:x} rank {}: the engines' mesh: {}", job_, rank_, e.what()));
    reply(false, e.kind(), fmt::format("edge engine: connecting the job's engines: {}", e.what()));
    return false;
  }
  owner_.log(fmt::format("job {:x}: rank {} of {} attached (uid {})", job_, rank_, world_, peer_uid_));
  return reply(true, Error::Kind::internal, "");
}

void RankProxy::run() {
  if (!handshake()) return;
  const int sock = sock_.get();
  engine_->watch_fd(sock, [this] { control_ready_ = true; });
  engine_->watch_fd(doorbell_.get(), [this] { drain_eventfd(doorbell_.get()); });
  transport::set_nonblocking(sock);
  auto poll_until = std::chrono::steady_clock::time_point{};  // busy-poll the submissions until then
  while (!closed_ && !owner_.stopping_) {
    if (take_descriptors()) poll_until = std::max(poll_until, std::chrono::steady_clock::now() + kProgressPoll);
    const bool spin = std::chrono::steady_clock::now() < poll_until;
    if (spin) ::sched_yield();
    engine_->progress(spin ? 0 : active_.empty() ? 200 : 20);
    if (control_ready_) {
      control_ready_ = false;
      serve_control();
    }
    if (finish_done()) poll_until = std::max(poll_until, std::chrono::steady_clock::now() + kBusyPoll);
  }
  engine_->unwatch_fd(doorbell_.get());
  engine_->unwatch_fd(sock);
  owner_.log(fmt::format("job {:x}: rank {} detached{}; {} collectives in flight dropped, {} registrations "
                         "unmapped",
                         job_, rank_, closed_why_.empty() ? "" : " (" + closed_why_ + ")", active_.size(),
                         regs_.size()));
  // Members go in reverse order: the engine (and with it the mesh and the peers' connections)
  // first, then the registrations and rings it may have pointed into.
}

void RankProxy::serve_control() {
  for (;;) {
    std::vector<transport::Fd> fds;
    auto msg = std::make_unique<AddComm>();  // the largest message
    const long n = recv_msg(sock_.get(), msg.get(), sizeof *msg, fds);
    if (n < 0 && n != -2 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    if (n == 0 || n == -1) {
      closed_ = true;
      closed_why_ = n == 0 ? "the rank closed its connection" : std::strerror(errno);
      return;
    }
    MsgHeader hd;
    if (n < static_cast<long>(sizeof hd)) return protocol_error("a control message shorter than its header");
    std::memcpy(static_cast<void*>(&hd), static_cast<const void*>(msg.get()), sizeof hd);
    if (n == -2 || hd.magic != kMagic || hd.version != kVersion)
      return protocol_error("a control message of another protocol or version");
    if (hd.kind == static_cast<std::uint16_t>(MsgKind::reg) && n == static_cast<long>(sizeof(Register))) {
      Register r;
      std::memcpy(static_cast<void*>(&r), static_cast<const void*>(msg.get()), sizeof r);
      if (fds.size() != 1) return protocol_error("a registration without its memfd");
      try {
        if (r.id == 0 || regs_.count(r.id)) throw Error(Error::Kind::invalid_argument, fmt::format("registration id {} is taken", r.id));
        if (regs_.size() >= kMaxRegistrations)
          throw Error(Error::Kind::invalid_argument, fmt::format("more than {} registrations", kMaxRegistrations));
        regs_.emplace(r.id, SharedRegion::map(fds[0].release(), r.bytes));
        count_mapped(r.bytes);
        reply(true, Error::Kind::internal, "");
      } catch (const Error& e) {
        reply(false, e.kind(), fmt::format("edge engine: registration {}: {}", r.id, e.what()));
      }
    } else if (hd.kind == static_cast<std::uint16_t>(MsgKind::add_comm) && n == static_cast<long>(sizeof(AddComm))) {
      add_comm(*msg);
    } else {
      return protocol_error(fmt::format("unexpected control message (kind {}, {} B)", hd.kind, n));
    }
  }
}

void RankProxy::add_comm(const AddComm& m) {
  std::vector<int> members;
  std::set<int> seen;
  int me = -1;
  std::string bad;
  if (m.nmembers < 1 || m.nmembers > static_cast<std::uint32_t>(world_)) bad = fmt::format("{} members", m.nmembers);
  for (std::uint32_t i = 0; bad.empty() && i < m.nmembers; ++i) {
    const int w = m.members[i];
    if (w < 0 || w >= world_ || !seen.insert(w).second) bad = fmt::format("member {} is world rank {}", i, w);
    if (w == rank_) me = static_cast<int>(i);
    members.push_back(w);
  }
  if (bad.empty() && me < 0) bad = fmt::format("world rank {} is not a member", rank_);
  if (bad.empty() && comms_.count(m.comm_id)) bad = fmt::format("communicator id {} is in use", m.comm_id);
  if (!bad.empty()) {
    reply(false, Error::Kind::invalid_argument, fmt::format("edge engine: communicator {}: {}", m.comm_id, bad));
    return;
  }
  engine_->add_comm(m.comm_id, members);
  comms_[m.comm_id] = CommInfo{static_cast<int>(members.size()), me};
  reply(true, Error::Kind::internal, "");
}

void RankProxy::protocol_error(const std::string& why) {
  {
    std::lock_guard lk(owner_.mu_);
    ++owner_.stats_.protocol_errors;
  }
  closed_ = true;
  closed_why_ = "protocol error: " + why;
  reply(false, Error::Kind::invalid_argument, "edge engine: " + closed_why_ + "; connection closed");
}

// A buffer of `bytes` bytes at `ref` in this rank's registrations, or an error.
std::byte* RankProxy::resolve(const BufRef& ref, std::uint64_t bytes, const char* what) {
  if (bytes == 0) return nullptr;
  auto it = regs_.find(ref.reg);
  if (it == regs_.end())
    throw Error(Error::Kind::invalid_argument, fmt::format("{}: registration {} is not one of this rank's", what, ref.reg));
  const std::uint64_t size = it->second.size();
  if (ref.offset > size || bytes > size - ref.offset)
    throw Error(Error::Kind::invalid_argument,
                fmt::format("{}: [{}, +{}) is outside registration {} of {} B", what, ref.offset, bytes, ref.reg, size));
  return it->second.data() + ref.offset;
}

void RankProxy::start(const Descriptor& d) {
  std::byte *in = nullptr, *out = nullptr;
  CollectiveParams p;
  try {
    p = check(d, in, out);
  } catch (const Error& e) {
    // Its peers' calls of this collective fail at once with this reason, naming this rank
    // (coll::Engine::refuse; not for an unknown communicator: that names no collective).
    engine_->refuse(d.comm_id, fmt::format("edge engine: {}", e.what()));
    throw;
  }
  coll::StartOptions so;
  so.timeout = std::chrono::milliseconds(d.timeout_ms ? d.timeout_ms : timeout_.count());
  auto op = engine_->start(d.comm_id, p, in, out, "edge", so);
  active_.push_back(Active{d.uid, std::move(op), p, out});
}

// The collective a descriptor asks, with its buffers, or the refusal (Error) saying why not.
CollectiveParams RankProxy::check(const Descriptor& d, std::byte*& in, std::byte*& out) {
  CollectiveParams p;
  auto cit = comms_.find(d.comm_id);
  if (cit == comms_.end()) throw Error(Error::Kind::invalid_argument, fmt::format("unknown communicator {}", d.comm_id));
  if (d.unplaced)
    throw Error(Error::Kind::invalid_argument,
                fmt::format("rank {} could not place the call's buffers in memory registered with its engine (its "
                            "own error says why)",
                            cit->second.rank));
  if (d.coll >= kNumCollectives || d.dtype >= kNumDataTypes || d.op >= kNumReduceOps || d.algo == 0 ||
      d.algo >= coll::kNumAlgorithms || static_cast<coll::Algorithm>(d.algo) == coll::Algorithm::inc)
    throw Error(Error::Kind::invalid_argument, "a descriptor with an invalid collective, type, op or algorithm");
  p.coll = static_cast<Collective>(d.coll);
  p.algo = static_cast<coll::Algorithm>(d.algo);
  p.dtype = static_cast<DataType>(d.dtype);
  p.op = static_cast<ReduceOp>(d.op);
  p.nranks = d.nranks;
  p.rank = d.rank;
  p.root = d.root;
  p.count = d.count;
  p.in_place = d.in_place != 0;
  p.segment_bytes = d.segment_bytes;
  if (d.accumulate >= kNumAccumulate)
    throw Error(Error::Kind::invalid_argument,
                fmt::format("a descriptor with accumulator policy {} (this engine knows 0..{}: automatic, narrow, "
                            "widen, wide, reproducible, fixed)",
                            d.accumulate, kNumAccumulate - 1));
  p.accumulate = static_cast<Accumulate>(d.accumulate);
  if (p.nranks != cit->second.size || p.rank != cit->second.rank)
    throw Error(Error::Kind::invalid_argument,
                fmt::format("rank {} of {} on communicator {}, where this rank is {} of {}", p.rank, p.nranks,
                            d.comm_id, cit->second.rank, cit->second.size));
  if (p.root < 0 || p.root >= p.nranks || p.count > (std::uint64_t{1} << 48) / static_cast<std::uint64_t>(p.nranks) ||
      (p.segment_bytes != 0 && (p.segment_bytes < 64 || p.segment_bytes > (1ull << 30))) ||
      !coll::supports(p.coll, p.algo))
    throw Error(Error::Kind::invalid_argument, "a descriptor with an invalid root, count, segment or algorithm");
  // A wide accumulator (or a reproducible sum) moves f32 partial sums (or i32 limbs) where the
  // narrow schedule moves the call's type: a conversion handler that re-encodes this call's
  // messages would take them for values of the type. Refused, rather than run narrow.
  if (const Accumulate acc = coll::host_accumulate(p); acc != Accumulate::narrow && chain_ && chain_->converts(p))
    throw Error(Error::Kind::invalid_argument,
                fmt::format("{} of {} x {}: the accumulator policy '{}' does not run with the job's wire handler, which "
                            "converts {} messages (its partial sums are not values of the type); ask "
                            "INC_ACCUMULATE=narrow, or no INC_EDGE_HANDLER",
                            name(p.coll), p.count, name(p.dtype), name(acc), name(p.dtype)));
  in = p.in_place ? nullptr : resolve(d.input, coll::input_bytes(p), "input");
  out = resolve(d.output, coll::output_bytes(p), "output");
  if (p.in_place) in = out;
  return p;
}

bool RankProxy::take_descriptors() {
  Descriptor d;
  bool ok = true, any = false;
  while (sq_.pop(&d, sizeof d, ok)) {
    any = true;
    {
      std::lock_guard lk(owner_.mu_);
      ++owner_.stats_.collectives;
    }
    try {
      start(d);
    } catch (const Error& e) {
      complete(d.uid, nullptr, &e);
    }
  }
  if (!ok) protocol_error("the submission ring's tail is impossible");
  return any;
}

bool RankProxy::finish_done() {
  bool any = false;
  for (auto it = active_.begin(); it != active_.end();) {
    bool done = false;
    std::optional<Error> err;
    try {
      done = engine_->test(*it->op);
    } catch (const Error& e) {
      done = true;
      err = e;
    }
    if (!done) {
      ++it;
      continue;
    }
    complete(it->uid, it->op.get(), err ? &*err : nullptr, &it->params);
    it = active_.erase(it);
    any = true;
  }
  flush_completions();
  return any;
}

void RankProxy::complete(std::uint64_t uid, const coll::CollOp* op, const Error* err,
                         const coll::CollectiveParams* p) {
  Completion c;
  c.uid = uid;
  c.ok = err ? 0 : 1;
  if (err) {
    c.error_kind = static_cast<std::uint32_t>(err->kind());
    copy_message(c.message, sizeof c.message, err->what());
    std::lock_guard lk(owner_.mu_);
    ++owner_.stats_.failed;
  }
  if (op) {
    const auto& info = op->info();
    c.algo = static_cast<std::uint8_t>(info.algo);
    c.coll = static_cast<std::uint8_t>(info.coll);
    c.seq = info.seq;
    c.bytes_sent = info.bytes_sent;
    c.bytes_received = info.bytes_received;
    c.messages_sent = info.messages_sent;
    c.seconds = info.seconds;
    c.accumulate = static_cast<std::uint8_t>(info.accumulate);
    c.events_counted = info.events_counted ? 1 : 0;
    c.converted = p && chain_ && chain_->converts(*p) ? 1 : 0;
    c.overflow_events = info.overflow_events;
    c.nonfinite_inputs = info.nonfinite_inputs;
    c.inexact_blocks = info.inexact_blocks;
    c.nonfinite_blocks = info.nonfinite_blocks;
    if (!err) {
      std::lock_guard lk(owner_.mu_);
      owner_.stats_.bytes_received += info.bytes_received;
      owner_.stats_.bytes_sent += info.bytes_sent;
    }
  }
  pending_.push_back(c);
}

void RankProxy::flush_completions() {
  bool pushed = false, ok = true;
  while (!pending_.empty() && cq_.push(&pending_.front(), sizeof(Completion), ok)) {
    pending_.pop_front();
    pushed = true;
  }
  if (!ok) protocol_error("the completion ring's head is impossible");
  if (pushed) signal_eventfd(completion_.get());
}

std::uint64_t RankProxy::rings_bytes() {
  return SpscRing::bytes_for(kRingEntries, kSqEntryBytes) + SpscRing::bytes_for(kRingEntries, kCqEntryBytes);
}

}  // namespace inc::edge
