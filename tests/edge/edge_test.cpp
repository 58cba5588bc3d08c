// The edge engine with real processes and sockets: two jobs side by side, isolation attacks (a
// wrong token, another user, a hostile rank speaking the raw protocol: handles and bounds it does
// not own, unsealed memory, a corrupted ring), a rank that dies (its memory reclaimed, its peer
// told) and an engine that dies (every attached rank told, not timed out).
#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include <csignal>
#include <cstring>
#include <future>
#include <map>
#include <optional>
#include <random>
#include <thread>

#include "../coll/wide_reference.hpp"
#include "coll/local_executor.hpp"
#include "edge/client.hpp"
#include "edge/engine.hpp"
#include "sim/analytical.hpp"
#include "transport/store.hpp"

using namespace inc;
using namespace inc::edge;
using namespace std::chrono_literals;

namespace {

transport::StoreServer& store();

std::string fresh_path() {
  store();  // started in the parent, before any fork
  static int n = 0;
  return "/tmp/inc-edge-test-" + std::to_string(::getpid()) + "-" + std::to_string(n++) + ".sock";
}

struct EngineThread {
  std::unique_ptr<EdgeEngine> engine;
  std::atomic<bool> stop{false};
  std::thread thread;
  explicit EngineThread(const std::string& path) {
    EngineConfig c;
    c.socket_path = path;
    engine = std::make_unique<EdgeEngine>(c);
    thread = std::thread([this] { engine->run(stop); });
  }
  ~EngineThread() {
    stop = true;
    thread.join();
  }
};

// A store for the engines' meshes, shared by the tests of this process: every test's job needs
// its own store prefix, or its ranks read an earlier test's mesh addresses. The prefix holds the
// engine's socket path (fresh_path(): one per engine, so one per test) and the job id.
transport::StoreServer& store() {
  static transport::StoreServer s("127.0.0.1", 0);
  return s;
}

ClientConfig config(const std::string& path, std::uint64_t job, int rank, int world, std::uint8_t token_byte = 7) {
  ClientConfig c;
  c.socket_path = path;
  c.job = job;
  std::memset(c.token, token_byte, sizeof c.token);
  c.rank = rank;
  c.world = world;
  c.timeout = 20s;
  c.mesh_tag = job ^ 0x55;
  c.store = "127.0.0.1:" + std::to_string(store().port());
  c.prefix = "edge-test" + path + "/" + std::to_string(job);
  c.listen_host = "127.0.0.1";
  return c;
}

// All ranks of a job attach at once (the engine meshes their proxies).
std::vector<std::unique_ptr<EdgeClient>> attach_job(const std::string& path, std::uint64_t job, int world) {
  std::vector<std::unique_ptr<EdgeClient>> cs;
  for (int r = 0; r < world; ++r) cs.push_back(std::make_unique<EdgeClient>(config(path, job, r, world)));
  std::vector<std::future<void>> f;
  for (auto& c : cs) f.push_back(std::async(std::launch::async, [&c] { c->attach(); }));
  for (auto& x : f) x.get();
  for (int r = 0; r < world; ++r) {
    std::vector<int> members;
    for (int m = 0; m < world; ++m) members.push_back(m);
    cs[r]->add_comm(0, members);
  }
  return cs;
}

coll::CollectiveParams allreduce_params(int rank, int world, std::uint64_t count) {
  coll::CollectiveParams p;
  p.coll = Collective::allreduce;
  p.algo = coll::Algorithm::ring;
  p.nranks = world;
  p.rank = rank;
  p.count = count;
  p.dtype = DataType::i32;
  p.op = ReduceOp::sum;
  return p;
}

template <class F>
void wait_until(F&& f) {
  for (int i = 0; i < 1000 && !f(); ++i) std::this_thread::sleep_for(10ms);
}

// Every rank of a job posts `p` (its own rank filled in) with its input and waits: the outputs.
std::vector<std::vector<std::byte>> run_job(std::vector<std::unique_ptr<EdgeClient>>& job, coll::CollectiveParams p,
                                            const std::vector<std::vector<std::byte>>& in,
                                            std::vector<Completion>* results = nullptr) {
  std::vector<std::vector<std::byte>> out(job.size(), std::vector<std::byte>(coll::output_bytes(p), std::byte{0xA5}));
  std::vector<std::shared_ptr<EdgeOp>> ops;
  for (std::size_t r = 0; r < job.size(); ++r) {
    p.rank = static_cast<int>(r);
    ops.push_back(job[r]->start(0, p, in[r].data(), out[r].data()));
  }
  for (std::size_t r = 0; r < job.size(); ++r) {
    job[r]->wait(*ops[r]);
    if (results) results->push_back(ops[r]->result);
  }
  return out;
}

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

TEST(EdgeEngine, RunsTheCollectivesOfTwoJobsApart) {
  const auto path = fresh_path();
  EngineThread eng(path);
  auto a = attach_job(path, 1001, 3);
  auto b = attach_job(path, 1002, 2);
  // Job a stages ordinary buffers; job b uses registered memory (zero copy).
  std::vector<std::vector<std::int32_t>> in(3, std::vector<std::int32_t>(5000)), out = in;
  std::vector<std::shared_ptr<EdgeOp>> ops;
  for (int r = 0; r < 3; ++r) {
    for (int i = 0; i < 5000; ++i) in[r][i] = r * 1000 + i;
    ops.push_back(a[r]->start(0, allreduce_params(r, 3, 5000), in[r].data(), out[r].data()));
  }
  std::int32_t* bb[2];
  for (int r = 0; r < 2; ++r) {
    bb[r] = static_cast<std::int32_t*>(b[r]->alloc(64 * sizeof(std::int32_t)));
    for (int i = 0; i < 64; ++i) bb[r][i] = -r - i;
    auto p = allreduce_params(r, 2, 64);
    p.in_place = true;
    ops.push_back(b[r]->start(0, p, bb[r], bb[r]));
  }
  for (int r = 0; r < 3; ++r) a[r]->wait(*ops[r]);
  for (int r = 0; r < 2; ++r) b[r]->wait(*ops[3 + r]);
  for (int r = 0; r < 3; ++r)
    for (int i = 0; i < 5000; ++i) ASSERT_EQ(out[r][i], 3000 + 3 * i) << r << " " << i;
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < 64; ++i) ASSERT_EQ(bb[r][i], -1 - 2 * i);
  EXPECT_EQ(eng.engine->stats().attached, 5u);
}

// The engine's memory traffic (docs/EDGE.md, "Memory traffic"): its proxies receive every
// message into host memory and send every message from it, so their counters equal the model's
// host-driven figure (`inc model`'s mem_host per rank, times the ranks) for a ring allreduce,
// with staged and with registered buffers; not its Edge-INC one (a NIC that forwards).
TEST(EdgeEngine, CountsTheModelsHostMemoryBytes) {
  const auto path = fresh_path();
  EngineThread eng(path);
  constexpr int kRanks = 4;
  constexpr std::uint64_t kCount = 1 << 14;  // divisible by the ranks: equal shards
  auto a = attach_job(path, 1003, kRanks);
  for (bool registered : {false, true}) {
    const auto before = eng.engine->stats();
    std::vector<std::vector<std::int32_t>> in(kRanks, std::vector<std::int32_t>(kCount)), out = in;
    std::vector<std::shared_ptr<EdgeOp>> ops;
    for (int r = 0; r < kRanks; ++r) {
      std::int32_t* buf = in[r].data();
      auto p = allreduce_params(r, kRanks, kCount);
      if (registered) {
        buf = static_cast<std::int32_t*>(a[r]->alloc(kCount * sizeof(std::int32_t)));
        p.in_place = true;
      }
      for (std::uint64_t i = 0; i < kCount; ++i) buf[i] = r + static_cast<std::int32_t>(i);
      ops.push_back(a[r]->start(0, p, buf, registered ? buf : out[r].data()));
    }
    for (int r = 0; r < kRanks; ++r) a[r]->wait(*ops[r]);
    const auto after = eng.engine->stats();
    const double n = kCount * sizeof(std::int32_t);
    const sim::StepCounts model = sim::closed_form_counts(Collective::allreduce, coll::Algorithm::ring, kRanks, n);
    EXPECT_EQ(static_cast<double>(after.bytes_received - before.bytes_received), kRanks * model.bytes_recv);
    EXPECT_EQ(static_cast<double>(after.bytes_sent - before.bytes_sent), kRanks * model.bytes_sent);
    EXPECT_EQ(static_cast<double>(after.bytes_received - before.bytes_received + after.bytes_sent - before.bytes_sent),
              kRanks * sim::host_memory_bytes(model, sim::Offload::host))
        << (registered ? "registered" : "staged");
    EXPECT_EQ(sim::host_memory_bytes(model, sim::Offload::host) / n, 3.0);
  }
}

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

TEST(EdgeFaults, ADeadRankHasItsMemoryReclaimedAndItsPeerTold) {
  const auto path = fresh_path();
  EngineThread eng(path);
  const auto before = eng.engine->stats();
  int go[2];
  ASSERT_EQ(::pipe(go), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {  // rank 1: attaches, registers 1 MiB, waits, dies without a word
    std::unique_ptr<EdgeClient> c;
    try {
      c = std::make_unique<EdgeClient>(config(path, 5001, 1, 2));
      c->attach();
      c->add_comm(0, {0, 1});
      c->alloc(1 << 20);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "rank 1: %s\n", e.what());
      ::_exit(4);
    }
    char x;
    if (::read(go[0], &x, 1) != 1) ::_exit(3);
    ::kill(::getpid(), SIGKILL);
  }
  EdgeClient r0(config(path, 5001, 0, 2));
  r0.attach();
  r0.add_comm(0, {0, 1});
  wait_until([&] { return eng.engine->stats().mapped_bytes >= before.mapped_bytes + (1u << 20); });
  EXPECT_GE(eng.engine->stats().mapped_bytes, before.mapped_bytes + (1u << 20));
  std::vector<std::int32_t> v(1000, 1), w(1000);
  auto op = r0.start(0, allreduce_params(0, 2, 1000), v.data(), w.data());  // rank 1 never joins
  ASSERT_EQ(::write(go[1], "x", 1), 1);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  try {
    r0.wait(*op);
    FAIL() << "the collective completed without its peer";
  } catch (const Error& e) {
    EXPECT_NE(e.kind(), Error::Kind::timeout) << e.what();  // told, not timed out
    EXPECT_NE(std::string(e.what()).find("edge engine"), std::string::npos) << e.what();
  }
  // Rank 1's proxy is gone with its rings and registrations; only rank 0's remain.
  wait_until([&] { return eng.engine->stats().attached == 1; });
  EXPECT_EQ(eng.engine->stats().attached, 1u);
  EXPECT_LT(eng.engine->stats().mapped_bytes, before.mapped_bytes + (1u << 20));
  ::close(go[0]);
  ::close(go[1]);
}

TEST(EdgeFaults, ADeadEngineIsAnErrorForEveryAttachedRank) {
  const auto path = fresh_path();
  const pid_t pid = ::fork();
  if (pid == 0) {
    try {
      EngineConfig c;
      c.socket_path = path;
      EdgeEngine e(c);
      std::atomic<bool> stop{false};
      e.run(stop);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "engine: %s\n", e.what());
    }
    ::_exit(0);
  }
  wait_until([&] { return ::access(path.c_str(), F_OK) == 0; });
  auto ranks = attach_job(path, 6001, 2);
  std::vector<std::int32_t> v(1000, 1), w(1000);
  auto op = ranks[0]->start(0, allreduce_params(0, 2, 1000), v.data(), w.data());  // waits for rank 1
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  try {
    ranks[0]->wait(*op);
    FAIL() << "completed without the engine";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::peer_failure) << e.what();
    EXPECT_NE(std::string(e.what()).find("edge engine at " + path), std::string::npos) << e.what();
  }
  // The other rank, idle when the engine died, is told at its next call.
  try {
    ranks[1]->start(0, allreduce_params(1, 2, 1000), v.data(), w.data());
    FAIL() << "posted to a dead engine";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::peer_failure) << e.what();
  }
  ::unlink(path.c_str());
}

// The host accumulator policies on the engine (docs/EDGE.md "Accumulator policies"): the proxy
// builds the host runtime's schedule for the policy the descriptor carries (reproducible too:
// its i32 limbs through the reduce handler), so every rank gets the bits of the same schedules
// run by the local executor (the hosts' oracle; mp_host_wide
// checks the host runtime against the same reference), wide/widen differ from narrow on inputs
// where rounding every step loses, and the completion says which policy ran and its bytes.
TEST(EdgeNumerics, EveryHostPolicyGivesTheHostScheduleBitsOnTheEngine) {
  const auto path = fresh_path();
  EngineThread eng(path);
  const int P = 3;
  auto job = attach_job(path, 7001, P);
  struct Case {
    Collective coll;
    coll::Algorithm algo;
  };
  const Case cases[] = {{Collective::allreduce, coll::Algorithm::ring},
                        {Collective::allreduce, coll::Algorithm::recursive_doubling},
                        {Collective::allreduce, coll::Algorithm::rabenseifner},
                        {Collective::reduce_scatter, coll::Algorithm::ring}};
  for (DataType t : {DataType::bf16, DataType::f16, DataType::e4m3})
    for (const Case& c : cases) {
      coll::CollectiveParams p;
      p.coll = c.coll;
      p.algo = c.algo;
      p.dtype = t;
      p.nranks = P;
      p.count = 3001;
      const std::uint64_t in_units = c.coll == Collective::reduce_scatter ? p.count * P : p.count;
      std::mt19937_64 rng(static_cast<std::uint64_t>(t) * 7 + static_cast<std::uint64_t>(c.algo));
      std::vector<std::vector<std::byte>> in;
      for (int r = 0; r < P; ++r) in.push_back(inc::testing::wide::random_input(t, in_units, rng));
      std::map<Accumulate, std::vector<std::vector<std::byte>>> got;
      for (Accumulate a : {Accumulate::narrow, Accumulate::widen, Accumulate::wide, Accumulate::reproducible}) {
        const std::string what = fmt::format("{} {} {} {}", name(t), name(c.coll), coll::name(c.algo), name(a));
        p.accumulate = a;
        auto bufs = inc::testing::wide::make_buffers(p, in);
        coll::run_local(p, coll::build_schedules(p), bufs);
        std::vector<Completion> done;
        got[a] = run_job(job, p, in, &done);
        for (int r = 0; r < P; ++r) {
          ASSERT_EQ(got[a][r], inc::testing::wide::result_of(p, bufs[r], r)) << what << " rank " << r;
          // (reproducible: the i32 limbs through the reduce handler; e4m3 has none: narrow)
          EXPECT_EQ(done[r].accumulate, static_cast<std::uint8_t>(coll::host_accumulate(p))) << what;
          EXPECT_EQ(done[r].events_counted, 1u) << what;
          coll::CollectiveParams mine = p;
          mine.rank = r;
          EXPECT_EQ(done[r].bytes_sent, coll::summarize(coll::build_schedule(mine)).send_bytes) << what;
        }
      }
      // widen and wide: one rounding, the same bits; narrow rounds every step: other bits.
      EXPECT_EQ(got[Accumulate::widen], got[Accumulate::wide]) << name(t) << " " << coll::name(c.algo);
      EXPECT_NE(got[Accumulate::narrow], got[Accumulate::wide]) << name(t) << " " << coll::name(c.algo);
    }
}

// The proxy's adds and roundings count their overflow events, as the hosts' do: an f16 sum of
// 40000 on every rank overflows at its first add under narrow (on the rank that adds it), under
// widen where its owner rounds the f32 total (120000 > 65504) once, under wide where every rank
// does: 300, 300 and 3 x 300 events over the ranks.
TEST(EdgeNumerics, TheEnginesCompletionCountsOverflowEvents) {
  const auto path = fresh_path();
  EngineThread eng(path);
  auto job = attach_job(path, 5002, 3);
  coll::CollectiveParams p;
  p.algo = coll::Algorithm::ring;
  p.dtype = DataType::f16;
  p.nranks = 3;
  p.count = 300;
  std::vector<std::vector<std::byte>> in(3, inc::testing::wide::round_all(DataType::f16, std::vector<double>(300, 40000.0)));
  for (Accumulate a : {Accumulate::narrow, Accumulate::widen, Accumulate::wide}) {
    p.accumulate = a;
    std::vector<Completion> done;
    run_job(job, p, in, &done);
    std::uint64_t events = 0;
    for (const auto& c : done) events += c.overflow_events;
    EXPECT_EQ(events, a == Accumulate::wide ? 900u : 300u) << name(a);
  }
}

// A conversion handler that re-encodes this call's messages cannot carry f32 partial sums:
// refused on every rank with the policy named (not run narrow); narrow runs with it.
TEST(EdgeNumerics, AConvertingHandlerRefusesAWideAccumulator) {
  const auto path = fresh_path();
  EngineThread eng(path);
  std::vector<std::unique_ptr<EdgeClient>> cs;
  for (int r = 0; r < 2; ++r) {
    auto c = config(path, 5003, r, 2);
    c.handler = "int8";  // converts f32, f16 and bf16 messages
    cs.push_back(std::make_unique<EdgeClient>(c));
  }
  std::vector<std::future<void>> f;
  for (auto& c : cs) f.push_back(std::async(std::launch::async, [&c] { c->attach(); }));
  for (auto& x : f) x.get();
  for (auto& c : cs) c->add_comm(0, {0, 1});
  coll::CollectiveParams p;
  p.algo = coll::Algorithm::ring;
  p.dtype = DataType::bf16;
  p.nranks = 2;
  p.count = 256;
  std::mt19937_64 rng(3);
  std::vector<std::vector<std::byte>> in;
  for (int r = 0; r < 2; ++r) in.push_back(inc::testing::wide::random_input(DataType::bf16, 256, rng));
  for (Accumulate a : {Accumulate::widen, Accumulate::wide}) {
    p.accumulate = a;
    for (int r = 0; r < 2; ++r) {
      p.rank = r;
      std::vector<std::byte> out(512);
      auto op = cs[r]->start(0, p, in[r].data(), out.data());
      try {
        cs[r]->wait(*op);
        ADD_FAILURE() << name(a) << " ran with a converting handler";
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), Error::Kind::invalid_argument) << e.what();
        EXPECT_NE(std::string(e.what()).find(fmt::format("accumulator policy '{}'", name(a))), std::string::npos)
            << e.what();
      }
    }
  }
  p.accumulate = Accumulate::narrow;
  std::vector<Completion> done;
  run_job(cs, p, in, &done);
  EXPECT_EQ(done[0].converted, 1u);
  EXPECT_EQ(done[0].accumulate, static_cast<std::uint8_t>(Accumulate::narrow));
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
