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
#include "api/controller_tree.hpp"
#include "api/edge_path.hpp"
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

std::uint64_t parse_segment(const transport::EnvLookup& env) {
  auto v = env("INC_SEGMENT_BYTES");
  if (!v) return 0;
  char* end = nullptr;
  unsigned long long b = std::strtoull(v->c_str(), &end, 10);
  if (v->empty() || *end != '\0' || b < 64 || b > (1ull << 30))
    throw Error(Error::Kind::config,
                fmt::format("INC_SEGMENT_BYTES='{}' must be an integer in [64, 2^30]", *v));
  return b;
}

Algorithm parse_algo_or_throw(const std::string& s, const char* where) {
  Algorithm a;
  if (!coll::parse_algorithm(s, a))
    throw Error(where[0] == 'I' ? Error::Kind::config : Error::Kind::invalid_argument,
                fmt::format("{}='{}' is not an algorithm (known: auto, ring, recursive_doubling, "
                            "rabenseifner, binomial_tree, pipelined_chain, pairwise, "
                            "dissemination, inc)",
                            where, s));
  return a;
}

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

// The rendezvous store as this process sees it (hosted here or not).
struct StoreHandle {
  std::unique_ptr<transport::StoreServer> server;
  std::unique_ptr<transport::StoreClient> client;
};

// What all communicators of one job generation share: the store and the engine.
struct World {
  std::shared_ptr<StoreHandle> store_handle;
  transport::StoreClient* store = nullptr;
  std::unique_ptr<coll::Engine> engine;
  // Measured costs of every path (INC_TUNING), shared by all communicators; null if none.
  std::shared_ptr<const api::CostTable> tuning;
  std::string tuning_path;
  // INC_OFFLOAD=edge: this host's Edge-INC engine runs the collectives (client null: the hosts).
  api::EdgePath edge;
  // The smallest communicator id this process has not used (0 is the world). A new
  // communicator's id is the largest of its members' values, agreed in the split's allgather,
  // so it is unused in every member process: unique by construction, no hashing.
  std::mutex ids_mu;
  std::uint32_t next_comm_id = 1;
  bool on_switch = false;  // counted in worlds_on_switch()
  ~World();
};

// Worlds of this process attached to a switch job. A second init() must not join the same job
// while the first is alive: the switch would take the new session for a restart of the job and
// fail the first communicator's in-network path.
std::atomic<int>& worlds_on_switch() {
  static std::atomic<int> n{0};
  return n;
}

World::~World() {
  if (on_switch) --worlds_on_switch();
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

struct CommState {
  std::shared_ptr<World> world;
  std::uint32_t comm_id = 0;
  std::vector<int> members;  // comm rank -> world rank
  int rank = 0;
  Algorithm algo = Algorithm::automatic;
  std::string algo_source;  // "INC_ALGO=ring" when set from the environment/options
  std::uint64_t segment_bytes = 0;
  // The switch tree of this communicator: the world's from INC_SWITCH/INC_TOPOLOGY, or any
  // communicator's from the controller (INC_CONTROLLER). `switch_configured` is the
  // process-wide fact.
  std::shared_ptr<api::IncPath> inc;
  bool switch_configured = false;
  std::string no_inc_reason;  // why `inc` is null although a switch is configured
  bool controller_tree = false;
  std::shared_ptr<api::TreeLease> lease;  // rank 0 of a controller tree: released with the communicator
  std::mutex mu;
  Report last;
  ~CommState() {
    if (controller_tree && inc && world && world->engine) world->engine->detach_switch(comm_id);
  }
};

struct RequestState {
  std::shared_ptr<CommState> comm;
  std::shared_ptr<coll::CollOp> op;
  std::vector<std::byte> temp;  // staging for in-place alltoall
  void* copy_out = nullptr;      // where temp's result goes, if used
  std::size_t copy_bytes = 0;
  bool finished = false;
  Report report;
  std::string selection;
  bool in_network = false;
  std::vector<std::pair<std::string, double>> predicted_us;  // automatic selection's weighing
  std::shared_ptr<edge::EdgeOp> edge_op;  // posted to the edge engine instead of `op`

  void complete() {
    if (finished) return;
    finished = true;
    if (copy_out && copy_bytes) std::memcpy(copy_out, temp.data(), copy_bytes);
    if (edge_op) {
      const auto& r = edge_op->result;
      report.coll = static_cast<Collective>(r.coll);
      report.seq = r.seq;
      report.algorithm = std::string(coll::name(static_cast<Algorithm>(r.algo)));
      report.offload = "edge";
      report.reason = selection;
      report.bytes_sent = r.bytes_sent;
      report.bytes_received = r.bytes_received;
      report.messages_sent = r.messages_sent;
      report.seconds = r.seconds;
      report.predicted_us = predicted_us;
      std::lock_guard lk(comm->mu);
      comm->last = report;
      return;
    }
    const auto& info = op->info();
    report.coll = info.coll;
    report.seq = info.seq;
    report.algorithm = std::string(coll::name(info.algo));
    report.in_network = info.in_network;
    report.reason = info.selection;
    report.bytes_sent = info.bytes_sent;
    report.bytes_received = info.bytes_received;
    report.retransmissions = info.retransmissions;
    report.messages_sent = info.messages_sent;
    report.switch_operations = info.switch_operations;
    report.overflow = info.overflow;
    report.accumulate = info.accumulate;
    report.link_bytes_per_element = info.link_bytes_per_element;
    report.seconds = info.seconds;
    report.predicted_us = predicted_us;
    std::lock_guard lk(comm->mu);
    comm->last = report;
  }
};

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Request

void Request::wait() {
  if (!state_) throw Error(Error::Kind::invalid_argument, "wait() on an empty inc::Request");
  if (!state_->finished) {
    if (state_->edge_op) state_->comm->world->edge.client->wait(*state_->edge_op);
    else state_->comm->world->engine->wait(*state_->op);
    state_->complete();
  }
}

bool Request::test() {
  if (!state_) throw Error(Error::Kind::invalid_argument, "test() on an empty inc::Request");
  if (state_->finished) return true;
  if (state_->edge_op ? !state_->comm->world->edge.client->test(*state_->edge_op)
                      : !state_->comm->world->engine->test(*state_->op))
    return false;
  state_->complete();
  return true;
}

Report Request::report() const {
  if (!state_) throw Error(Error::Kind::invalid_argument, "report() on an empty inc::Request");
  return state_->report;
}

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
    st->algo = parse_algo_or_throw(algo, source.c_str());
    st->algo_source = fmt::format("{}={}", source, algo);
  }
  st->segment_bytes = opts.segment_bytes ? opts.segment_bytes : parse_segment(env);
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
    world->edge = api::open_edge_path(env, {opts.offload, opts.edge_socket}, ec, *world->store,
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

namespace detail {
struct Call {
  Collective coll;
  const void* send;
  void* recv;
  std::size_t count;
  DataType dtype;
  ReduceOp op = ReduceOp::sum;
  int root = 0;
};
}  // namespace detail

namespace {
using detail::Call;

void validate(const detail::CommState& st, const Call& c) {
  auto what = name(c.coll);
  if (static_cast<unsigned>(c.dtype) >= kNumDataTypes)
    throw Error(Error::Kind::invalid_argument,
                fmt::format("{}: invalid data type {}", what, static_cast<unsigned>(c.dtype)));
  if (static_cast<unsigned>(c.op) >= kNumReduceOps)
    throw Error(Error::Kind::invalid_argument,
                fmt::format("{}: invalid reduction op {}", what, static_cast<unsigned>(c.op)));
  const int p = static_cast<int>(st.members.size());
  if (c.count > (std::uint64_t{1} << 48) / static_cast<std::uint64_t>(p))
    throw Error(Error::Kind::invalid_argument, fmt::format("{}: count {} is too large", what, c.count));
  if (c.count > 0 && c.coll != Collective::barrier) {
    bool send_needed = c.coll != Collective::broadcast || st.rank == c.root;
    if (send_needed && c.send == nullptr)
      throw Error(Error::Kind::invalid_argument,
                  fmt::format("{}: send buffer is null with count {}", what, c.count));
    if (c.recv == nullptr)
      throw Error(Error::Kind::invalid_argument,
                  fmt::format("{}: recv buffer is null with count {}", what, c.count));
  }
  if (c.coll == Collective::broadcast && (c.root < 0 || c.root >= p))
    throw Error(Error::Kind::invalid_argument,
                fmt::format("broadcast: root {} is not a rank of this {}-rank communicator", c.root, p));
  api::check_buffer_overlap(c.coll, c.send, c.recv, c.count, c.dtype, c.root, st.rank, p);
}

}  // namespace

Request Communicator::start(const std::shared_ptr<detail::CommState>& st, const Call& c,
                           const CallOptions& o) {
  if (!st) throw Error(Error::Kind::invalid_argument, fmt::format("{} on an empty communicator", name(c.coll)));
  validate(*st, c);
  const int p = static_cast<int>(st->members.size());
  const std::size_t esz = size_of(c.dtype);

  CollectiveParams params;
  params.coll = c.coll;
  params.nranks = p;
  params.rank = st->rank;
  params.count = c.count;
  params.dtype = c.dtype;
  params.op = c.op;
  params.root = c.root;
  params.segment_bytes = st->segment_bytes;

  // Algorithm: per call, else the communicator's, else automatic.
  std::string selection;
  std::vector<api::PathCost> weighed;  // automatic selection from a tuning file
  Algorithm algo = st->algo;
  if (!o.algo.empty()) {
    algo = parse_algo_or_throw(o.algo, "CallOptions::algo");
    // 'inc' falls back to the hosts with a reason where the switch cannot help (alltoall).
    if (algo != Algorithm::automatic && algo != Algorithm::inc && !coll::supports(c.coll, algo))
      throw Error(Error::Kind::invalid_argument,
                  fmt::format("{}: algorithm '{}' does not implement this collective", name(c.coll), o.algo));
    selection = fmt::format("CallOptions::algo={}", o.algo);
  } else if (algo != Algorithm::automatic) {
    if (algo == Algorithm::inc || coll::supports(c.coll, algo)) {
      selection = st->algo_source;
    } else {
      selection = fmt::format("{} does not implement {}; ", st->algo_source, name(c.coll));
      algo = Algorithm::automatic;
    }
  }
  // Can the switch take this call? (Same answer on every rank for the same call.)
  std::string no_switch;  // why not, when a switch is configured
  std::string switch_how;
  if (st->switch_configured) {
    if (!st->inc) {
      no_switch = st->no_inc_reason.empty() ? "sub-communicators have no switch tree yet" : st->no_inc_reason;
    } else if (c.count == 0 && c.coll != Collective::barrier) {
      no_switch = "nothing to send";
    } else {
      params.accumulate =
          o.accumulate != Accumulate::automatic ? o.accumulate : st->inc->accumulate_default();
      api::IncPlan plan = st->inc->plan(c.coll, c.dtype, c.op, params.accumulate);
      if (plan.ok) switch_how = plan.why;
      else no_switch = plan.why;
    }
  }
  const bool switch_ok = st->switch_configured && no_switch.empty();
  if (algo == Algorithm::inc) {
    if (!st->switch_configured)
      throw Error(Error::Kind::invalid_argument,
                  fmt::format("{}: algorithm 'inc' needs a Core-INC switch (INC_SWITCH, INC_TOPOLOGY "
                              "or `inc launch --switch`)",
                              name(c.coll)));
    if (switch_ok) {
      selection = fmt::format("{}: {}", selection.empty() ? std::string("automatic") : selection, switch_how);
    } else {
      selection = fmt::format("host fallback from 'inc': {}; ", no_switch);
      algo = Algorithm::automatic;
    }
  } else if (algo == Algorithm::automatic) {
    // Automatic: the cheapest path by the measured costs of a tuning file (INC_TUNING) when
    // one applies to this communicator, else the switch whenever it can take the call, else
    // the hosts' measured crossovers (select_algorithm).
    params.algo = Algorithm::automatic;
    const std::uint64_t bytes = std::max(coll::input_bytes(params), coll::output_bytes(params));
    const api::CostTable* table = st->world->tuning.get();
    std::string untuned;
    if (!table) {
      untuned = "untuned (no INC_TUNING; `inc tune` measures every path)";
    } else if (table->nranks != p) {
      untuned = fmt::format("untuned (INC_TUNING={} was measured on {} ranks, this communicator has {})",
                            st->world->tuning_path, table->nranks, p);
    } else {
      std::vector<Algorithm> candidates;
      if (switch_ok) candidates.push_back(Algorithm::inc);
      for (int a = 1; a < coll::kNumAlgorithms; ++a) {
        auto h = static_cast<Algorithm>(a);
        if (h != Algorithm::inc && coll::supports(c.coll, h)) candidates.push_back(h);
      }
      if (auto best = api::choose(*table, c.coll, bytes, candidates, weighed)) {
        algo = *best;
        selection += fmt::format("automatic from INC_TUNING={} for {} B on {} ranks: {}{}",
                                 st->world->tuning_path, bytes, p, api::describe(weighed),
                                 algo == Algorithm::inc ? "; " + switch_how
                                 : no_switch.empty()    ? std::string()
                                                        : "; not the switch: " + no_switch);
      } else {
        untuned = fmt::format("untuned (INC_TUNING={} has no {} measurements)", st->world->tuning_path,
                              name(c.coll));
      }
    }
    if (algo == Algorithm::automatic) {
      if (switch_ok) {
        algo = Algorithm::inc;
        selection += fmt::format("automatic, {}: the switch when it can; {}", untuned, switch_how);
      } else {
        if (!no_switch.empty()) selection += fmt::format("host fallback: {}; ", no_switch);
        params.algo = coll::select_algorithm(params);
        algo = params.algo;
        selection += fmt::format("automatic for {} B on {} ranks, {}", coll::input_bytes(params), p, untuned);
      }
    }
  }
  params.algo = algo;

  auto rs = std::make_shared<detail::RequestState>();
  rs->comm = st;
  for (const auto& w : weighed) rs->predicted_us.emplace_back(std::string(coll::name(w.algo)), w.us);
  const void* in = c.send;
  void* out = c.recv;
  switch (c.coll) {
    case Collective::allreduce:
      params.in_place = c.send == c.recv;
      break;
    case Collective::reduce_scatter:
      // NCCL's in-place layout: the result lands in this rank's shard of the send buffer;
      // the schedule then works on the whole buffer (see schedule.hpp).
      params.in_place = c.count > 0 && static_cast<const std::byte*>(c.send) +
                                               static_cast<std::size_t>(st->rank) * c.count * esz ==
                                           c.recv;
      if (params.in_place) out = const_cast<void*>(c.send);
      break;
    case Collective::allgather:
      params.in_place = c.count > 0 && static_cast<const std::byte*>(c.recv) +
                                               static_cast<std::size_t>(st->rank) * c.count * esz ==
                                           c.send;
      break;
    case Collective::broadcast:
      params.in_place = c.send == c.recv || st->rank != c.root;
      if (st->rank != c.root) in = c.recv;
      break;
    case Collective::alltoall:
      if (c.send == c.recv && c.count > 0) {
        // In-place alltoall: stage the result, then copy it over the caller's buffer.
        rs->temp.resize(c.count * esz * static_cast<std::size_t>(p));
        out = rs->temp.data();
        rs->copy_out = c.recv;
        rs->copy_bytes = rs->temp.size();
      }
      break;
    case Collective::barrier:
      break;
  }
  const api::EdgePath& edge = st->world->edge;
  if (edge.client && algo != Algorithm::inc) {
    rs->selection = fmt::format("offloaded to the edge engine at {} ({}): {}", edge.client->path(),
                                edge.requested_by, selection);
    rs->edge_op = edge.client->start(st->comm_id, params, in, out);
    return Request(rs);
  }
  if (!edge.requested_by.empty())
    selection = fmt::format("{}; not offloaded ({}): {}", selection, edge.requested_by,
                            edge.client ? std::string("the switch runs in-network calls from the rank")
                                        : edge.reason);
  rs->op = st->world->engine->start(st->comm_id, params, in, out, std::move(selection));
  if (rs->op->done() && !rs->op->failed()) rs->complete();
  return Request(rs);
}

Request Communicator::iallreduce(const void* send, void* recv, std::size_t count, DataType t,
                                 ReduceOp op, const CallOptions& o) {
  return start(state_, {Collective::allreduce, send, recv, count, t, op, 0}, o);
}
Request Communicator::ireduce_scatter(const void* send, void* recv, std::size_t recv_count,
                                      DataType t, ReduceOp op, const CallOptions& o) {
  return start(state_, {Collective::reduce_scatter, send, recv, recv_count, t, op, 0}, o);
}
Request Communicator::iallgather(const void* send, void* recv, std::size_t send_count, DataType t,
                                 const CallOptions& o) {
  return start(state_, {Collective::allgather, send, recv, send_count, t, ReduceOp::sum, 0}, o);
}
Request Communicator::ibroadcast(const void* send, void* recv, std::size_t count, DataType t,
                                 int root, const CallOptions& o) {
  return start(state_, {Collective::broadcast, send, recv, count, t, ReduceOp::sum, root}, o);
}
Request Communicator::ialltoall(const void* send, void* recv, std::size_t count, DataType t,
                                const CallOptions& o) {
  return start(state_, {Collective::alltoall, send, recv, count, t, ReduceOp::sum, 0}, o);
}
Request Communicator::ibarrier(const CallOptions& o) {
  return start(state_, {Collective::barrier, nullptr, nullptr, 0, DataType::u8, ReduceOp::sum, 0}, o);
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
