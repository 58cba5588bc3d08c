// inc::Communicator: joins the job (bootstrap + rendezvous store + TCP mesh), validates every
// call, resolves the algorithm and hands the collective to the executor engine.
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <unistd.h>

#include "api/bootstrap.hpp"
#include "api/call_checks.hpp"
#include "api/comm_state.hpp"
#include "api/controller_tree.hpp"
#include "api/edge_path.hpp"
#include "api/env_number.hpp"
#include "api/inc_path.hpp"
#include "api/rollcall.hpp"
#include "api/tuning.hpp"
#include "coll/executor.hpp"
#include "inc/inc.hpp"
#include "transport/socket.hpp"
#include "transport/store.hpp"

namespace inc {

namespace {

using coll::Algorithm;
using coll::CollectiveParams;

std::chrono::milliseconds parse_timeout(const transport::EnvLookup& env) {
  auto v = env("INC_TIMEOUT");
  if (!v) return std::chrono::seconds(60);
  char* end = nullptr;
  double s = std::strtod(v->c_str(), &end);
  if (v->empty() || *end != '\0' || !(s > 0) || s > 86400)
    throw Error(Error::Kind::config,
                fmt::format("INC_TIMEOUT='{}' is not a time-out in seconds (0 < t <= 86400)", *v));
  return std::chrono::milliseconds(static_cast<long long>(s * 1000));
}

std::chrono::microseconds parse_spin(const transport::EnvLookup& env) {
  auto us = api::env_uint(env, "INC_SPIN_US", 0, 1000000, "is not a whole number of microseconds (0 <= t <= 1000000)");
  return std::chrono::microseconds(us.value_or(500));
}

// Largest point-to-point message that leaves before its receiver posted the receive
// (coll::Engine::set_eager_bytes); must be the same on every rank.
std::uint64_t parse_eager(const transport::EnvLookup& env) {
  return api::env_uint(env, "INC_EAGER_BYTES", 0, 1ull << 62, "must be an integer in [0, 2^62]")
      .value_or(coll::Engine::kEagerBytes);
}

// INC_TRACE=DIR: the engine records its events (coll/trace.hpp) and writes DIR/rank-N.csv and
// .json when the world's last communicator goes (also at MPI_Finalize, which frees it);
// INC_TRACE_EVENTS caps the records kept (the rest are counted as dropped). A directory that
// cannot be made or written is a warning, not an error: the job runs untraced.
struct TraceSetting {
  std::string dir;  // empty: off
  std::size_t cap = coll::Trace::kDefaultCap;
};

TraceSetting parse_trace(const transport::EnvLookup& env, int rank) {
  TraceSetting t;
  if (auto n = api::env_uint(env, "INC_TRACE_EVENTS", 1, 1ull << 28, "must be an integer in [1, 2^28]"))
    t.cap = static_cast<std::size_t>(*n);
  auto v = env("INC_TRACE");
  if (!v || v->empty()) return t;
  if (std::string why = coll::Trace::check_dir(*v); !why.empty()) {
    std::fprintf(stderr, "inc: rank %d: warning: INC_TRACE=%s: %s; this rank is not traced\n", rank, v->c_str(),
                 why.c_str());
    return t;
  }
  t.dir = *v;
  return t;
}

// Bytes per message or switch operation (coll::CollectiveParams::segment_bytes); 0: the
// algorithm's default.
std::uint64_t parse_segment(const transport::EnvLookup& env) {
  return api::env_uint(env, "INC_SEGMENT_BYTES", 64, 1ull << 30, "must be an integer in [64, 2^30]").value_or(0);
}

}  // namespace

Algorithm detail::parse_algo_or_throw(const std::string& s, const char* where) {
  Algorithm a;
  if (!coll::parse_algorithm(s, a))
    throw Error(where[0] == 'I' ? Error::Kind::config : Error::Kind::invalid_argument,
                fmt::format("{}='{}' is not an algorithm (known: auto, ring, recursive_doubling, "
                            "rabenseifner, binomial_tree, pipelined_chain, pairwise, "
                            "dissemination, inc)",
                            where, s));
  return a;
}

namespace {

class StoreAddressBook : public transport::MeshAddressBook {
 public:
  StoreAddressBook(transport::StoreClient& s, std::string prefix, std::chrono::milliseconds t)
      : store_(s), prefix_(std::move(prefix)), timeout_(t) {}
  void publish(int rank, const std::string& addr) override {
    store_.set(fmt::format("{}/addr/{}", prefix_, rank), addr);
  }
  std::string lookup(int rank) override {
    return store_.get(fmt::format("{}/addr/{}", prefix_, rank), timeout_);
  }

 private:
  transport::StoreClient& store_;
  std::string prefix_;
  std::chrono::milliseconds timeout_;
};


}  // namespace

namespace detail {

// Worlds of this process attached to a switch job. A second init() must not join the same job
// while the first is alive: the switch would take the new session for a restart of the job and
// fail the first communicator's in-network path.
std::atomic<int>& worlds_on_switch() {
  static std::atomic<int> n{0};
  return n;
}

World::~World() {
  if (on_switch) --worlds_on_switch();
  if (engine && !trace_dir.empty()) {
    try {
      engine->write_trace(trace_dir, trace_stem);
    } catch (const std::exception& e) {  // a destructor: say it, lose nothing else
      std::fprintf(stderr, "inc: rank %d: warning: %s\n", engine->world_rank(), e.what());
    }
  }
}

// Process-wide: one store connection per store address, kept until the process exits,
// because the rank that hosts the store must keep serving it while any rank may still use
// it (another rank's next init() after an error, say); re-hosting it on the same port
// would race with clients of the old one.
std::shared_ptr<StoreHandle> shared_store(const api::BootstrapInfo& boot,
                                          std::chrono::milliseconds timeout) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<StoreHandle>> stores;
  std::lock_guard lk(mu);
  std::string key = fmt::format("{}:{}", boot.store_host, boot.store_port);
  if (auto h = stores[key]) return h;
  auto conn = api::connect_store(boot, timeout);
  auto h = std::make_shared<StoreHandle>();
  h->server = std::move(conn.server);
  h->client = std::move(conn.client);
  stores[key] = h;
  return h;
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Communicator

namespace {

// The minimum of `v` over the communicator's ranks (a tiny host allreduce).
std::int32_t agree_min(detail::CommState& st, std::int32_t v, const char* what) {
  coll::Engine& engine = *st.world->engine;
  CollectiveParams min;
  min.coll = Collective::allreduce;
  min.algo = Algorithm::recursive_doubling;
  min.nranks = static_cast<int>(st.members.size());
  min.rank = st.rank;
  min.count = 1;
  min.dtype = DataType::i32;
  min.op = ReduceOp::min;
  std::int32_t all = 0;
  engine.wait(*engine.start(st.comm_id, min, &v, &all, what));
  return all;
}

// Does the switch tree answer? A barrier through it (the engine's in-network path), then the
// ranks agree over TCP: one failure anywhere puts the whole communicator on the host path,
// with the reason in every report (a job restarted after a switch failure either finds the
// restarted switch or runs on the hosts).
void probe_switch(detail::CommState& st) {
  coll::Engine& engine = *st.world->engine;
  engine.attach_switch(st.comm_id, st.inc->attachment());
  const int p = static_cast<int>(st.members.size());
  CollectiveParams barrier;
  barrier.coll = Collective::barrier;
  barrier.algo = Algorithm::inc;
  barrier.nranks = p;
  barrier.rank = st.rank;
  coll::StartOptions tentative;
  tentative.tentative = true;  // a failure here is an answer, not the end of the job
  std::string why;
  std::int32_t ok = 1;
  try {
    auto op = engine.start(st.comm_id, barrier, nullptr, nullptr, "start-up probe of the switch tree",
                           tentative);
    engine.wait(*op);
  } catch (const Error& e) {
    ok = 0;
    why = e.what();
  }
  // A rank whose probe failed at once (a refusal) agrees while the others may wait for the
  // switch up to INC_TIMEOUT: give the agreement twice that.
  coll::StartOptions agree;
  agree.timeout = 2 * engine.timeout();
  CollectiveParams min;
  min.coll = Collective::allreduce;
  min.algo = Algorithm::recursive_doubling;
  min.nranks = p;
  min.rank = st.rank;
  min.count = 2;
  min.dtype = DataType::i32;
  min.op = ReduceOp::min;
  // {all answered, first rank whose probe failed}
  std::int32_t mine[2] = {ok, ok ? p : st.rank}, all[2] = {0, 0};
  engine.wait(*engine.start(st.comm_id, min, mine, all, "agreement on the switch probe", agree));
  if (!all[0]) {
    st.no_inc_reason = fmt::format("the switch tree did not answer at start-up (rank {}{}{})", all[1],
                                   why.empty() ? "" : ": ", why);
    // Said once, by the rank that knows why, not only in the reports: a job that silently
    // runs on the hosts is slower without a reason the user can read.
    if (all[1] == st.rank)
      std::fprintf(stderr, "inc: rank %d: the in-network path is unavailable, collectives run on the hosts: %s\n",
                   st.rank, st.no_inc_reason.c_str());
    engine.detach_switch(st.comm_id);
    st.inc.reset();
  }
}

// A tree from the controller for this communicator (every member calls it), probed like the
// world's; none: the reason goes into every report.
void attach_controller_tree(detail::CommState& st, const transport::EnvLookup& env) {
  const int p = static_cast<int>(st.members.size());
  st.switch_configured = true;
  if (p == 1) {
    st.no_inc_reason = "a communicator of one rank has nothing to aggregate";
    return;
  }
  coll::Engine& engine = *st.world->engine;
  auto t = api::request_controller_tree(engine, st.comm_id, st.rank, p, st.members[static_cast<std::size_t>(st.rank)],
                                        env, engine.timeout(),
                                        fmt::format("communicator {} of {} ranks (pid {})", st.comm_id, p, getpid()));
  if (!t.inc) {
    st.no_inc_reason = t.why_not;
    return;
  }
  st.inc = t.inc;
  st.lease = t.lease;
  st.controller_tree = true;
  probe_switch(st);
  if (!st.inc) st.lease.reset();
}

}  // namespace

Communicator Communicator::init(const Options& opts) {
  auto env = transport::process_env();
  api::BootstrapInfo boot;
  bool need_env = opts.rank < 0 || opts.world_size < 0 || opts.store.empty();
  if (need_env) boot = api::detect_bootstrap(env);
  if (opts.rank >= 0) boot.rank = opts.rank;
  if (opts.world_size >= 0) boot.world_size = opts.world_size;
  if (!opts.store.empty()) {
    auto hp = transport::parse_host_port(opts.store, "Options::store");
    boot.store_host = hp.host;
    boot.store_port = hp.port;
  }
  if (opts.host_store >= 0) boot.host_store = opts.host_store == 1;
  if (boot.world_size < 1 || boot.rank < 0 || boot.rank >= boot.world_size)
    throw Error(Error::Kind::config, fmt::format("invalid rank {} for world size {}", boot.rank,
                                                 boot.world_size));
  auto timeout = opts.timeout.count() > 0 ? opts.timeout : parse_timeout(env);
  auto spin = parse_spin(env);  // before anything connects: a bad value fails every rank alike
  const std::uint64_t eager = parse_eager(env);
  const TraceSetting trace = parse_trace(env, boot.rank);

  auto world = std::make_shared<detail::World>();
  world->store_handle = detail::shared_store(boot, timeout);
  world->store = world->store_handle->client.get();

  // A job tag keeps connections of another job (or a stale store) out of the mesh.
  // The n-th init() of each rank against this store belongs to the same job generation and
  // uses its own keys. Counted in the store, not in the process: a launcher's store outlives
  // the programs it runs one after the other (`srun sh -c 'prog1; prog2'`, inc launch/testbed
  // running a script), and a second program must not read the first one's addresses.
  const std::int64_t generation = world->store->add(fmt::format("inc/inits/{}", boot.rank), 1) - 1;
  const std::string prefix = fmt::format("inc/{}", generation);
  // Name ranks that disagree on the world size or share a rank now, not at the time-out.
  api::roll_call(*world->store, generation, boot.rank, boot.world_size, timeout);
  // Random high bits; the low 32 bits are the wall clock in ms, the session of the switch
  // path (inc_path.cpp): a later run's session is newer (serial-number order).
  std::random_device rd;
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::system_clock::now().time_since_epoch());
  std::uint64_t mine = (static_cast<std::uint64_t>(rd()) << 32) | static_cast<std::uint32_t>(ms.count());
  world->store->set_if_absent(prefix + "/job_tag", std::to_string(mine));
  std::uint64_t job_tag = std::stoull(world->store->get(prefix + "/job_tag", timeout));

  std::string listen_host =
      !opts.listen_host.empty() ? opts.listen_host
                                : transport::local_address_for_peers(env, boot.store_host, boot.store_port);
  StoreAddressBook book(*world->store, prefix, timeout);
  auto fds = transport::connect_mesh(boot.rank, boot.world_size, listen_host, book, job_tag,
                                     static_cast<int>(timeout.count()));
  auto mesh = std::make_unique<transport::TcpMesh>(boot.rank, std::move(fds));
  world->engine = std::make_unique<coll::Engine>(std::move(mesh), timeout);
  world->engine->set_spin(spin);
  world->engine->set_eager_bytes(eager);
  if (!trace.dir.empty()) {
    world->engine->enable_trace(trace.cap);
    world->trace_dir = trace.dir;  // a later init() of this process (generation g) adds ".g"
    world->trace_stem = generation == 0 ? fmt::format("rank-{}", boot.rank) : fmt::format("rank-{}.{}", boot.rank, generation);
  }
  if (auto t = env("INC_TUNING"); t && !t->empty()) {  // empty = unset
    try {
      world->tuning = std::make_shared<const api::CostTable>(api::CostTable::load(*t));
    } catch (const Error& e) {
      throw Error(Error::Kind::config, fmt::format("INC_TUNING={}", e.what()));
    }
    world->tuning_path = *t;
  }

  auto st = std::make_shared<detail::CommState>();
  st->world = world;
  st->comm_id = 0;
  st->rank = boot.rank;
  for (int r = 0; r < boot.world_size; ++r) st->members.push_back(r);
  std::string algo = opts.algo;
  std::string source = "Options::algo";
  if (algo.empty()) {
    if (auto v = env("INC_ALGO")) algo = *v, source = "INC_ALGO";
  }
  if (!algo.empty()) {
    st->algo = detail::parse_algo_or_throw(algo, source.c_str());
    st->algo_source = fmt::format("{}={}", source, algo);
  }
  st->segment_bytes = opts.segment_bytes ? opts.segment_bytes : parse_segment(env);
  st->accumulate = api::accumulate_setting(env);
  st->inc = api::IncPath::from_env(env, boot.rank, boot.world_size, job_tag, timeout);
  st->switch_configured = static_cast<bool>(st->inc);
  world->engine->add_comm(0, st->members);
  if (!st->inc && api::controller_configured(env)) {
    attach_controller_tree(*st, env);
  } else if (st->inc) {
    // Every rank must be free to join the switch job (no earlier init() of its process still
    // holds it), or none joins: agreed over TCP before anyone talks to the switch.
    std::int32_t free_here = detail::worlds_on_switch().load() == 0 ? 1 : 0;
    if (agree_min(*st, free_here, "agreement on joining the switch job") == 0) {
      st->no_inc_reason =
          "an earlier init() of this process (on some rank) still uses the switch job; one "
          "in-network world per job and process (the switch would take a second one for a "
          "restart of the job)";
      st->inc.reset();
    } else {
      world->on_switch = true;
      ++detail::worlds_on_switch();
      probe_switch(*st);
      if (!st->inc) {  // the switch did not answer: this world holds no job after all
        world->on_switch = false;
        --detail::worlds_on_switch();
      }
    }
  }
  {
    edge::ClientConfig ec;
    ec.rank = boot.rank;
    ec.world = boot.world_size;
    ec.job = job_tag;
    ec.mesh_tag = job_tag ^ 0x4547444500000000ull;  // "EDGE": never the ranks' own mesh
    ec.timeout = timeout;
    ec.store = transport::format_host_port(boot.store_host == "0.0.0.0" ? "127.0.0.1" : boot.store_host,
                                           world->store_handle->server ? world->store_handle->server->port()
                                                                       : boot.store_port);
    ec.prefix = prefix + "/edge";
    ec.listen_host = listen_host;
    world->edge = api::open_edge_path(env, {opts.offload, opts.edge_socket, opts.edge_handler}, ec, *world->store,
                                      [&](int v, const char* what) { return agree_min(*st, v, what); });
    if (world->edge.client) world->edge.client->add_comm(0, st->members);
  }
  if (st->algo == Algorithm::inc && !st->inc)
    throw Error(Error::Kind::config,
                st->switch_configured
                    ? fmt::format("{} needs the in-network path, which is unavailable: {}", st->algo_source,
                                  st->no_inc_reason)
                    : fmt::format("{} needs a Core-INC switch: set INC_SWITCH=host:port or INC_TOPOLOGY, "
                                  "or run under `inc launch --switch`",
                                  st->algo_source));
  return Communicator(std::move(st));
}

int Communicator::rank() const {
  if (!state_) throw Error(Error::Kind::invalid_argument, "rank() on an empty communicator");
  return state_->rank;
}

int Communicator::size() const {
  if (!state_) throw Error(Error::Kind::invalid_argument, "size() on an empty communicator");
  return static_cast<int>(state_->members.size());
}

void Communicator::check_spans(std::size_t send, std::size_t recv) {
  if (send != recv)
    throw Error(Error::Kind::invalid_argument,
                fmt::format("allreduce: send has {} elements but recv has {}", send, recv));
}

Communicator Communicator::split(int color, int key) const {
  if (!state_) throw Error(Error::Kind::invalid_argument, "split() on an empty communicator");
  const int p = size();
  detail::World& w = *state_->world;
  std::uint32_t next;
  {
    std::lock_guard lk(w.ids_mu);
    next = w.next_comm_id;
  }
  // {color, key, this process's next free communicator id}; the id as i32 bits.
  std::int32_t mine[3] = {color < 0 ? -1 : color, key, static_cast<std::int32_t>(next)};
  std::vector<std::int32_t> all(static_cast<std::size_t>(3 * p));
  CallOptions o;
  // Recursive doubling/ring: whatever the communicator would use; the call is tiny.
  start(state_, {Collective::allgather, mine, all.data(), 3, DataType::i32, ReduceOp::sum, 0}, o).wait();
  if (color < 0) return Communicator();
  std::vector<std::pair<std::int32_t, int>> group;  // (key, parent rank)
  std::uint32_t id = 0;
  for (int r = 0; r < p; ++r)
    if (all[3 * r] == color) {
      group.emplace_back(all[3 * r + 1], r);
      id = std::max(id, static_cast<std::uint32_t>(all[3 * r + 2]));
    }
  std::sort(group.begin(), group.end());
  {
    std::lock_guard lk(w.ids_mu);
    // Another thread of this process split at the same time and took `id`: the members
    // cannot agree on a new one without another round, so say so rather than mix the two.
    if (w.next_comm_id > id)
      throw Error(Error::Kind::invalid_argument,
                  fmt::format("split: communicator id {} was taken by a concurrent split or dup in this "
                              "process; call split/dup from one thread at a time",
                              id));
    if (id == UINT32_MAX)
      throw Error(Error::Kind::invalid_argument, "split: this process has used up 2^32 communicator ids");
    w.next_comm_id = id + 1;
  }
  auto st = std::make_shared<detail::CommState>();
  st->world = state_->world;
  st->comm_id = id;
  for (std::size_t i = 0; i < group.size(); ++i) {
    st->members.push_back(state_->members[group[i].second]);
    if (group[i].second == state_->rank) st->rank = static_cast<int>(i);
  }
  st->algo = state_->algo;
  st->algo_source = state_->algo_source;
  st->segment_bytes = state_->segment_bytes;
  st->accumulate = state_->accumulate;
  st->switch_configured = state_->switch_configured;
  st->world->engine->add_comm(st->comm_id, st->members);
  if (auto env = transport::process_env(); api::controller_configured(env)) attach_controller_tree(*st, env);
  if (st->world->edge.client) st->world->edge.client->add_comm(st->comm_id, st->members);
  return Communicator(std::move(st));
}

Communicator Communicator::dup() const {
  if (!state_) throw Error(Error::Kind::invalid_argument, "dup() on an empty communicator");
  return split(0, state_->rank);
}

Report Communicator::last_report() const {
  if (!state_) throw Error(Error::Kind::invalid_argument, "last_report() on an empty communicator");
  std::lock_guard lk(state_->mu);
  return state_->last;
}

TrafficStats Communicator::traffic() const {
  if (!state_) throw Error(Error::Kind::invalid_argument, "traffic() on an empty communicator");
  auto s = state_->world->engine->stats();
  return TrafficStats{s.bytes_sent, s.bytes_received, s.payload_sent, s.payload_received,
                      s.messages_sent, s.messages_received};
}

}  // namespace inc

namespace inc {

void* Communicator::alloc_registered(std::size_t bytes) const {
  if (!state_) throw Error(Error::Kind::invalid_argument, "alloc_registered() on an empty communicator");
  if (auto& c = state_->world->edge.client) return c->alloc(bytes);
  void* p = std::malloc(bytes ? bytes : 1);
  if (!p) throw Error(Error::Kind::invalid_argument, fmt::format("alloc_registered: cannot allocate {} B", bytes));
  return p;
}

void Communicator::free_registered(void* p) const {
  if (!state_) throw Error(Error::Kind::invalid_argument, "free_registered() on an empty communicator");
  if (!p) return;
  if (auto& c = state_->world->edge.client) c->free(p);
  else std::free(p);
}

bool Communicator::offloaded() const {
  return state_ && state_->world->edge.client != nullptr;
}

}  // namespace inc
