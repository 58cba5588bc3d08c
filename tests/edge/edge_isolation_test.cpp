// The edge engine's isolation (real sockets, an engine in a thread): a wrong token, another
// user, a hostile rank speaking the raw protocol (handles and bounds it does not own, unsealed
// memory, a corrupted ring), a descriptor with a bad accumulator policy, and one rank's refused
// or unplaceable call failing its peers at once, naming it.
#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cstring>
#include <future>
#include <optional>
#include <thread>

#include "edge/client.hpp"
#include "edge/engine.hpp"
#include "tests/edge/edge_util.hpp"

using namespace inc;
using namespace inc::edge;
using namespace inc::edge::test;
using namespace std::chrono_literals;

namespace {

// A rank that speaks the protocol by hand: what a hostile process can send.
struct RawRank {
  transport::Fd sock, doorbell, completion;
  SharedRegion rings;
  SpscRing sq, cq;
  std::string hello_reply;
  bool attached = false;

  RawRank(const std::string& path, const ClientConfig& c) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strcpy(a.sun_path, path.c_str());
    sock.reset(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    EXPECT_EQ(::connect(sock.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    const auto sqb = SpscRing::bytes_for(kRingEntries, kSqEntryBytes);
    rings = SharedRegion::create(sqb + SpscRing::bytes_for(kRingEntries, kCqEntryBytes), "raw");
    sq = SpscRing(rings.data(), kRingEntries, kSqEntryBytes);
    cq = SpscRing(rings.data() + sqb, kRingEntries, kCqEntryBytes);
    sq.init();
    cq.init();
    doorbell.reset(::eventfd(0, EFD_CLOEXEC));
    completion.reset(::eventfd(0, EFD_CLOEXEC));
    Hello h;
    h.job = c.job;
    std::memcpy(h.token, c.token, 32);
    h.rank = c.rank;
    h.world = c.world;
    h.timeout_ms = 5000;
    h.ring_entries = kRingEntries;
    h.mesh_tag = c.mesh_tag;
    std::strcpy(h.store, c.store.c_str());
    std::strcpy(h.prefix, c.prefix.c_str());
    std::strcpy(h.listen_host, "127.0.0.1");
    const int fds[3] = {rings.fd(), doorbell.get(), completion.get()};
    EXPECT_TRUE(send_msg(sock.get(), &h, sizeof h, fds));
    Reply r = reply();
    attached = r.ok;
    hello_reply = r.message;
  }
  Reply reply() {
    Reply r;
    std::vector<transport::Fd> fds;
    if (recv_msg(sock.get(), &r, sizeof r, fds) != static_cast<long>(sizeof r)) std::strcpy(r.message, "<closed>");
    return r;
  }
  Reply register_fd(std::uint32_t id, int fd, std::uint64_t bytes) {
    Register m;
    m.id = id;
    m.bytes = bytes;
    const int fds[1] = {fd};
    EXPECT_TRUE(send_msg(sock.get(), &m, sizeof m, fds));
    return reply();
  }
  Reply add_comm0() {
    auto m = std::make_unique<AddComm>();
    m->nmembers = 1;
    EXPECT_TRUE(send_msg(sock.get(), m.get(), sizeof *m));
    return reply();
  }
  Completion run(const Descriptor& d) {
    bool ok = true;
    EXPECT_TRUE(sq.push(&d, sizeof d, ok));
    signal_eventfd(doorbell.get());
    Completion c;
    for (int i = 0; i < 2000; ++i) {
      if (cq.pop(&c, sizeof c, ok)) return c;
      std::this_thread::sleep_for(5ms);
    }
    ADD_FAILURE() << "no completion";
    return c;
  }
};

Descriptor raw_allreduce(std::uint32_t in_reg, std::uint64_t in_off, std::uint32_t out_reg, std::uint64_t count) {
  Descriptor d;
  d.uid = 99;
  d.coll = static_cast<std::uint8_t>(Collective::allreduce);
  d.algo = static_cast<std::uint8_t>(coll::Algorithm::ring);
  d.dtype = static_cast<std::uint8_t>(DataType::i32);
  d.nranks = 1;
  d.count = count;
  d.input = {in_reg, 0, in_off};
  d.output = {out_reg, 0, 0};
  return d;
}

}  // namespace

TEST(EdgeIsolation, AWrongTokenOrATakenRankIsRefused) {
  const auto path = fresh_path();
  EngineThread eng(path);
  auto a = attach_job(path, 2001, 1);
  EdgeClient thief(config(path, 2001, 0, 1, /*token*/ 8));
  try {
    thief.attach();
    FAIL() << "a wrong token was admitted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::config);
    EXPECT_NE(std::string(e.what()).find("wrong token"), std::string::npos) << e.what();
  }
  EdgeClient twin(config(path, 2001, 0, 1));  // the right token, a rank already attached
  EXPECT_THROW(twin.attach(), Error);
  EXPECT_EQ(eng.engine->stats().refused, 2u);
}

TEST(EdgeIsolation, AnotherUserIsRefusedEvenWithTheToken) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to run the attacker as another user";
  const auto path = fresh_path();
  EngineThread eng(path);
  auto a = attach_job(path, 3001, 2);  // job of root; the attacker knows its token
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::setuid(65534) != 0) ::_exit(3);
    try {
      EdgeClient c(config(path, 3001, 1, 2));  // rank 1 is taken, but uid is checked first
      c.attach();
      ::_exit(1);
    } catch (const Error& e) {
      ::_exit(std::strstr(e.what(), "wrong token or user") ? 0 : 2);
    }
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
}

TEST(EdgeIsolation, AHostileRankReachesNoMemoryButItsOwn) {
  const auto path = fresh_path();
  EngineThread eng(path);
  // Job A: registered memory holding a secret.
  auto a = attach_job(path, 4001, 1);
  auto* secret = static_cast<std::int32_t*>(a[0]->alloc(4096));
  for (int i = 0; i < 1024; ++i) secret[i] = 0x5ec12e7;
  // Job B: a hostile rank speaking the raw protocol, with one small registration of its own.
  RawRank b(path, config(path, 4002, 0, 1));
  ASSERT_TRUE(b.attached) << b.hello_reply;
  ASSERT_TRUE(b.add_comm0().ok);
  auto own = SharedRegion::create(256, "own");
  EXPECT_TRUE(b.register_fd(1, ::dup(own.fd()), 256).ok);
  // Registration ids are per connection: A's is not B's, whatever number B guesses.
  for (std::uint32_t guess : {0u, 2u, 3u, 17u, 0xffffffffu}) {
    Completion c = b.run(raw_allreduce(guess, 0, 1, 16));
    EXPECT_EQ(c.ok, 0u) << guess;
    EXPECT_NE(std::string(c.message).find("not one of this rank's"), std::string::npos) << c.message;
  }
  // Its own registration, out of bounds (and an offset that would wrap around).
  for (std::uint64_t off : {200ull, 257ull, ~0ull - 8}) {
    Completion c = b.run(raw_allreduce(1, off, 1, 16));
    EXPECT_EQ(c.ok, 0u);
    EXPECT_NE(std::string(c.message).find("outside registration"), std::string::npos) << c.message;
  }
  // A rank and size that are not its own on the communicator, an unknown communicator.
  Descriptor d = raw_allreduce(1, 0, 1, 16);
  d.nranks = 2;
  EXPECT_EQ(b.run(d).ok, 0u);
  d = raw_allreduce(1, 0, 1, 16);
  d.comm_id = 7;
  EXPECT_EQ(b.run(d).ok, 0u);
  // Memory that is not a sealed memfd (it could shrink under the engine) is refused.
  auto unsealed = transport::Fd(::memfd_create("unsealed", MFD_CLOEXEC));
  ASSERT_EQ(::ftruncate(unsealed.get(), 4096), 0);
  Reply r = b.register_fd(2, unsealed.get(), 4096);
  EXPECT_EQ(r.ok, 0u);
  EXPECT_NE(std::string(r.message).find("sealed"), std::string::npos) << r.message;
  // A lawful call on its own memory works.
  EXPECT_EQ(b.run(raw_allreduce(1, 0, 1, 16)).ok, 1u);
  // A corrupted ring: the engine closes that connection, and only that one.
  auto* hdr = reinterpret_cast<RingHeader*>(b.rings.data());
  hdr->tail.store(1ull << 40);
  signal_eventfd(b.doorbell.get());
  EXPECT_EQ(b.reply().ok, 0u);
  wait_until([&] { return eng.engine->stats().protocol_errors == 1; });
  EXPECT_EQ(eng.engine->stats().protocol_errors, 1u);
  // Job A untouched and still served.
  for (int i = 0; i < 1024; ++i) ASSERT_EQ(secret[i], 0x5ec12e7);
  auto p = allreduce_params(0, 1, 1024);
  p.in_place = true;
  auto op = a[0]->start(0, p, secret, secret);
  a[0]->wait(*op);
  EXPECT_EQ(secret[5], 0x5ec12e7);
}

// A descriptor naming no accumulator policy is refused with a clear error, the connection kept.
TEST(EdgeIsolation, ADescriptorWithABadAccumulatorPolicyIsRefused) {
  const auto path = fresh_path();
  EngineThread eng(path);
  RawRank b(path, config(path, 5004, 0, 1));
  ASSERT_TRUE(b.attached) << b.hello_reply;
  ASSERT_TRUE(b.add_comm0().ok);
  auto own = SharedRegion::create(256, "own");
  EXPECT_TRUE(b.register_fd(1, ::dup(own.fd()), 256).ok);
  for (std::uint8_t bad : {std::uint8_t{kNumAccumulate}, std::uint8_t{200}, std::uint8_t{255}}) {
    Descriptor d = raw_allreduce(1, 0, 1, 16);
    d.accumulate = bad;
    Completion c = b.run(d);
    EXPECT_EQ(c.ok, 0u);
    EXPECT_EQ(c.error_kind, static_cast<std::uint32_t>(Error::Kind::invalid_argument));
    EXPECT_NE(std::string(c.message).find(fmt::format("accumulator policy {}", bad)), std::string::npos) << c.message;
  }
  Descriptor d = raw_allreduce(1, 0, 1, 16);
  d.accumulate = static_cast<std::uint8_t>(Accumulate::wide);  // (an i32 sum: narrow runs)
  EXPECT_EQ(b.run(d).ok, 1u);
}

namespace {

// The ranks of a job with a short deadline (a test that waits for it has failed) and, if given,
// a conversion handler (int8: converts f32, f16 and bf16 messages).
std::vector<std::unique_ptr<EdgeClient>> attach_impatient_job(const std::string& path, std::uint64_t job, int world,
                                                              const std::string& handler = "") {
  std::vector<std::unique_ptr<EdgeClient>> cs;
  for (int r = 0; r < world; ++r) {
    auto c = config(path, job, r, world);
    c.handler = handler;
    c.timeout = 8s;
    cs.push_back(std::make_unique<EdgeClient>(c));
  }
  std::vector<std::future<void>> f;
  for (auto& c : cs) f.push_back(std::async(std::launch::async, [&c] { c->attach(); }));
  for (auto& x : f) x.get();
  std::vector<int> members;
  for (int m = 0; m < world; ++m) members.push_back(m);
  for (auto& c : cs) c->add_comm(0, members);
  return cs;
}

// The error of a posted collective, or nothing if it completed.
std::optional<Error> outcome(EdgeClient& c, EdgeOp& op) {
  try {
    c.wait(op);
    return std::nullopt;
  } catch (const Error& e) {
    return e;
  }
}

bool has(const Error& e, const std::string& what) { return std::string(e.what()).find(what) != std::string::npos; }

}  // namespace

// The engine refuses one rank's call (a wide accumulator that the job's converting handler cannot
// carry, asked on rank 0 only): rank 0 gets the refusal, and its peers, whose own calls were
// fine, fail at once with a mismatch naming rank 0 and the reason, not at their deadline (8 s:
// the kind says which). Then the job is unusable, as after any failed collective; another job on
// the same engine is not touched.
TEST(EdgeIsolation, ARefusalOnOneRankFailsEveryRankNamingIt) {
  const auto path = fresh_path();
  EngineThread eng(path);
  constexpr int kRanks = 3;
  auto job = attach_impatient_job(path, 7101, kRanks, "int8");
  auto other = attach_job(path, 7102, 2);
  coll::CollectiveParams p;
  p.algo = coll::Algorithm::ring;
  p.dtype = DataType::bf16;
  p.nranks = kRanks;
  p.count = 4096;
  std::vector<std::vector<std::byte>> in(kRanks, std::vector<std::byte>(8192, std::byte{0})), out = in;
  std::vector<std::shared_ptr<EdgeOp>> ops;
  for (int r = kRanks - 1; r >= 0; --r) {  // the peers post first: they are waiting when rank 0 is refused
    p.rank = r;
    p.accumulate = r == 0 ? Accumulate::widen : Accumulate::narrow;
    ops.insert(ops.begin(), job[r]->start(0, p, in[r].data(), out[r].data()));
  }
  for (int r = 0; r < kRanks; ++r) {
    auto e = outcome(*job[r], *ops[r]);
    ASSERT_TRUE(e) << "rank " << r << " completed a collective that rank 0's engine refused";
    EXPECT_EQ(e->kind(), r == 0 ? Error::Kind::invalid_argument : Error::Kind::mismatch) << r << ": " << e->what();
    EXPECT_TRUE(has(*e, "accumulator policy 'widen'")) << r << ": " << e->what();
    if (r > 0) {
      EXPECT_TRUE(has(*e, "allreduce #0: rank 0's call was refused")) << r << ": " << e->what();
    }
  }
  // Later calls fail on every rank (the communicator is unusable after a failed collective).
  p.accumulate = Accumulate::narrow;
  for (int r = 0; r < kRanks; ++r) {
    p.rank = r;
    std::optional<Error> e;
    try {
      e = outcome(*job[r], *job[r]->start(0, p, in[r].data(), out[r].data()));
    } catch (const Error& x) {
      e = x;
    }
    ASSERT_TRUE(e) << "rank " << r << " ran a collective after the failed one";
    EXPECT_NE(e->kind(), Error::Kind::timeout) << r << ": " << e->what();
    EXPECT_TRUE(has(*e, "rank 0's call was refused")) << r << ": " << e->what();
  }
  // The other job on the engine runs.
  std::vector<std::vector<std::byte>> oin(2, std::vector<std::byte>(64 * 4, std::byte{1}));
  auto res = run_job(other, allreduce_params(0, 2, 64), oin);
  EXPECT_EQ(res[1][0], std::byte{2});
}

// A rank whose library cannot place a call's buffers (here: the engine refuses its 1025th
// registration) fails that call itself, and its peer, already waiting in the collective, fails
// at once naming it (the descriptor posted without buffers is refused and the refusal told).
TEST(EdgeIsolation, ARankThatCannotPlaceItsBuffersFailsItsPeerNamingIt) {
  const auto path = fresh_path();
  EngineThread eng(path);
  auto job = attach_impatient_job(path, 7103, 2);
  for (std::uint32_t i = 0; i < kMaxRegistrations; ++i) job[0]->alloc(64);  // every registration rank 0 may hold
  std::vector<std::int32_t> in(1000, 1), out(1000);
  auto op1 = job[1]->start(0, allreduce_params(1, 2, 1000), in.data(), out.data());
  try {
    job[0]->start(0, allreduce_params(0, 2, 1000), in.data(), out.data());  // must stage: a new registration
    FAIL() << "rank 0 posted without a place for its buffers";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e, "registrations")) << e.what();
  }
  auto e = outcome(*job[1], *op1);
  ASSERT_TRUE(e) << "rank 1 completed without rank 0";
  EXPECT_EQ(e->kind(), Error::Kind::mismatch) << e->what();
  EXPECT_TRUE(has(*e, "allreduce #0: rank 0's call was refused before it started: edge engine: rank 0 could not place"))
      << e->what();
}
