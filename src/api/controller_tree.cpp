#include "api/controller_tree.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

#include "api/env_number.hpp"
#include "src/control/conn.hpp"
#include "src/switch/udp.hpp"

namespace inc::api {

namespace ctl = proto::ctl;
using namespace std::chrono_literals;

namespace {

struct ControllerEnv {
  std::string addr;
  proto::auth::Key secret{};
  std::string host;
  std::uint32_t slots = 0;
};

ControllerEnv read_env(const transport::EnvLookup& env, int world_rank) {
  ControllerEnv c;
  c.addr = *env("INC_CONTROLLER");
  auto ep = sw::parse_endpoint(c.addr);
  if (!ep || ep->port() == 0)
    throw Error(Error::Kind::config, fmt::format("INC_CONTROLLER='{}' is not an IPv4 host:port", c.addr));
  auto kf = env("INC_CONTROL_KEY_FILE");
  if (!kf || kf->empty())
    throw Error(Error::Kind::config, "INC_CONTROLLER needs INC_CONTROL_KEY_FILE (the cluster's control secret)");
  try {
    c.secret = control::load_control_key(*kf);
  } catch (const std::exception& e) {
    throw Error(Error::Kind::config, fmt::format("INC_CONTROL_KEY_FILE: {}", e.what()));
  }
  if (auto h = env("INC_CONTROL_HOST"); h && !h->empty()) {
    c.host = *h;
    if (auto p = c.host.find("{rank}"); p != std::string::npos) c.host.replace(p, 6, std::to_string(world_rank));
  } else {
    char name[256] = {};
    ::gethostname(name, sizeof name - 1);
    c.host = name;
  }
  if (c.host.size() > 255) throw Error(Error::Kind::config, "INC_CONTROL_HOST is longer than 255 bytes");
  if (auto s = env_uint(env, "INC_CONTROL_SLOTS", 1, 0xFFFF, "must be 1..65535")) c.slots = std::uint32_t(*s);
  return c;
}

void engine_broadcast(coll::Engine& engine, std::uint32_t comm_id, int rank, int nranks, void* buf,
                      std::size_t bytes, const char* what) {
  coll::CollectiveParams b;
  b.coll = Collective::broadcast;
  b.algo = coll::Algorithm::binomial_tree;
  b.nranks = nranks;
  b.rank = rank;
  b.count = bytes;
  b.dtype = DataType::u8;
  b.root = 0;
  b.in_place = true;
  engine.wait(*engine.start(comm_id, b, buf, buf, what));
}

}  // namespace

class TreeLease {
 public:
  TreeLease(ControllerEnv env, ctl::TreeReply reply, std::unique_ptr<control::Client> c, std::chrono::milliseconds timeout)
      : env_(std::move(env)), reply_(std::move(reply)), client_(std::move(c)), timeout_(timeout) {
    thread_ = std::thread([this] { run(); });
  }
  ~TreeLease() {
    {
      std::lock_guard<std::mutex> g(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    // Best effort, bounded: a controller that does not answer lets the lease run out.
    try {
      const auto t = std::min<std::chrono::milliseconds>(timeout_, 2s);
      if (!client_) client_ = std::make_unique<control::Client>(env_.addr, env_.secret, ctl::Role::job, t);
      client_->call(ctl::TreeRelease{reply_.job, reply_.lease}, t);
    } catch (const std::exception&) {
    }
  }

 private:
  void run() {
    const auto every = std::chrono::milliseconds(std::max<std::uint32_t>(reply_.lease_ms / 3, 50));
    bool said = false;
    std::unique_lock<std::mutex> lk(mu_);
    while (!cv_.wait_for(lk, every, [&] { return stop_; })) {
      lk.unlock();
      try {
        const auto t = std::min<std::chrono::milliseconds>(timeout_, every);
        bool fresh = false;
        if (!client_) {  // the controller restarted or the connection broke: re-claim
          client_ = std::make_unique<control::Client>(env_.addr, env_.secret, ctl::Role::job, t);
          fresh = true;
        }
        ctl::LeaseRenew r{reply_.job, reply_.lease, {}};
        if (fresh) r.claim = reply_.tree;
        auto m = client_->call(r, t);
        auto* rep = std::get_if<ctl::LeaseReply>(&m);
        if (!rep) throw std::runtime_error("unexpected answer to a lease renewal");
        if (!rep->known && !said) {
          std::fprintf(stderr, "inc: the controller no longer knows the tree of job %u (its lease ended); "
                               "its collectives will fail over to errors or the hosts\n", reply_.job);
          said = true;
        }
      } catch (const std::exception&) {
        client_.reset();  // retried at the next renewal; the data plane does not need the controller
      }
      lk.lock();
    }
  }

  ControllerEnv env_;
  ctl::TreeReply reply_;
  std::unique_ptr<control::Client> client_;
  std::chrono::milliseconds timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

std::uint32_t tree_wait_ms(std::chrono::milliseconds timeout) {
  const auto margin = std::min<std::chrono::milliseconds>(timeout / 10, 1s);
  const auto ms = std::max<std::int64_t>(1, (timeout - margin).count());
  return std::uint32_t(std::min<std::int64_t>(ms, ctl::kMaxWaitMs));
}

bool controller_configured(const transport::EnvLookup& env) {
  auto c = env("INC_CONTROLLER");
  return c && !c->empty();
}

ControllerTree request_controller_tree(coll::Engine& engine, std::uint32_t comm_id, int rank, int nranks,
                                       int world_rank, const transport::EnvLookup& env,
                                       std::chrono::milliseconds timeout, const std::string& label) {
  ControllerTree out;
  const ControllerEnv cenv = read_env(env, world_rank);
  // Every rank's host, gathered at rank 0 (fixed 256-byte records).
  std::vector<char> mine(256, 0), all(static_cast<std::size_t>(256 * nranks), 0);
  std::memcpy(mine.data(), cenv.host.data(), cenv.host.size());
  {
    coll::CollectiveParams g;
    g.coll = Collective::allgather;
    g.algo = coll::Algorithm::ring;
    g.nranks = nranks;
    g.rank = rank;
    g.count = 256;
    g.dtype = DataType::u8;
    engine.wait(*engine.start(comm_id, g, mine.data(), all.data(), "hosts for the controller"));
  }
  std::vector<std::byte> answer;  // rank 0: the encoded TreeReply
  std::unique_ptr<control::Client> client;
  if (rank == 0) {
    ctl::TreeReply rep;
    try {
      client = std::make_unique<control::Client>(cenv.addr, cenv.secret, ctl::Role::job, timeout);
      ctl::TreeRequest req;
      req.slots_wanted = cenv.slots;
      req.label = label;
      req.wait_ms = tree_wait_ms(timeout);
      for (int r = 0; r < nranks; ++r) req.hosts.emplace_back(all.data() + 256 * r);
      auto m = client->call(req, timeout);
      if (auto* r = std::get_if<ctl::TreeReply>(&m)) rep = *r;
      else rep.why = "the controller answered with something else than a tree";
      if (rep.ok && rep.ranks.size() != static_cast<std::size_t>(nranks)) {
        rep.ok = false;
        rep.why = "the controller's tree has the wrong number of ranks";
      }
      if (!rep.ok) rep.why = "the controller gave no tree: " + rep.why;
    } catch (const std::exception& e) {
      rep = ctl::TreeReply{};
      rep.why = fmt::format("controller unreachable: {}", e.what());
    }
    answer = ctl::encode(rep);
  }
  std::uint64_t n = answer.size();
  engine_broadcast(engine, comm_id, rank, nranks, &n, sizeof n, "size of the controller's answer");
  if (n > ctl::kMaxFrameBytes) throw Error(Error::Kind::network, "the controller's answer is too large");
  answer.resize(n);
  engine_broadcast(engine, comm_id, rank, nranks, answer.data(), n, "the controller's answer");
  std::string why;
  auto m = ctl::decode(answer, why);
  auto* rep = m ? std::get_if<ctl::TreeReply>(&*m) : nullptr;
  if (!rep) throw Error(Error::Kind::network, "the controller's answer did not arrive intact: " + why);
  if (!rep->ok) {
    out.why_not = rep->why;
    if (rank == 0)
      std::fprintf(stderr, "inc: %s: collectives run on the hosts: %s\n", label.c_str(), rep->why.c_str());
    return out;
  }
  const auto& a = rep->ranks.at(static_cast<std::size_t>(rank));
  TreeAttachment t;
  t.job = rep->job;
  t.switch_ep = sw::Endpoint::ipv4(a.ip, a.port);
  t.member = a.member;
  t.key = rep->key;
  t.where = fmt::format("switch {} ({}), job {}, member {}, tree from the controller ({})", a.sw,
                        t.switch_ep.str(), rep->job, a.member, rep->why);
  // The session: the same on every rank, fresh per tree.
  out.inc = IncPath::from_grant(env, rank, rep->lease, timeout, t);
  if (rank == 0) out.lease = std::make_shared<TreeLease>(cenv, *rep, std::move(client), timeout);
  return out;
}

}  // namespace inc::api
