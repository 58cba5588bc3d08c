#include "api/inc_path.hpp"

#include <fmt/format.h>

#include <cstring>
#include <vector>

#include "numerics/reduce.hpp"
#include "src/proto/packet.hpp"
#include "src/switch/topology.hpp"
#include "src/switch/udp.hpp"
#include "src/switch/worker.hpp"

namespace inc::api {

struct IncPath::Impl {
  sw::WorkerConfig cfg;
  std::unique_ptr<sw::UdpWorker> worker;
  int rank = 0, nranks = 1;
  bool fixed_point = false;
  std::uint64_t ops = 0;
};

IncPath::IncPath(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
IncPath::~IncPath() {
  if (impl_ && impl_->worker) impl_->worker->leave();
}

std::unique_ptr<IncPath> IncPath::from_env(const transport::EnvLookup& env, int rank, int nranks,
                                           std::uint64_t session) {
  auto sw_addr = env("INC_SWITCH");
  auto topo_path = env("INC_TOPOLOGY");
  if (!sw_addr && !topo_path) return nullptr;
  auto impl = std::make_unique<Impl>();
  impl->rank = rank;
  impl->nranks = nranks;
  std::uint32_t job = 1;
  if (auto j = env("INC_SWITCH_JOB")) {
    char* end = nullptr;
    unsigned long v = std::strtoul(j->c_str(), &end, 10);
    if (j->empty() || *end != '\0' || v == 0 || v > 0xffffffffu)
      throw Error(Error::Kind::config, fmt::format("INC_SWITCH_JOB='{}' is not a job id (1..2^32-1)", *j));
    job = static_cast<std::uint32_t>(v);
  }
  if (auto n = env("INC_SWITCH_NUMERICS")) {
    if (*n == "fixed") impl->fixed_point = true;
    else if (*n != "float")
      throw Error(Error::Kind::config,
                  fmt::format("INC_SWITCH_NUMERICS='{}' must be 'float' or 'fixed'", *n));
  }
  std::string where;
  if (topo_path) {
    std::string err;
    auto topo = sw::load_topology(*topo_path, err);
    if (!topo) throw Error(Error::Kind::config, fmt::format("INC_TOPOLOGY={}: {}", *topo_path, err));
    const sw::TopoJob* tj = topo->find_job(job);
    if (!tj)
      throw Error(Error::Kind::config,
                  fmt::format("INC_TOPOLOGY={}: no 'job {}' line (INC_SWITCH_JOB)", *topo_path, job));
    if (static_cast<int>(tj->nranks) != nranks)
      throw Error(Error::Kind::config,
                  fmt::format("INC_TOPOLOGY={}: job {} attaches {} ranks but the job has {}",
                              *topo_path, job, tj->nranks, nranks));
    auto plan = sw::plan_job(*topo, *tj, err);
    if (!plan) throw Error(Error::Kind::config, fmt::format("INC_TOPOLOGY={}: {}", *topo_path, err));
    const auto& a = plan->ranks.at(static_cast<std::size_t>(rank));
    impl->cfg.switch_ep = a.addr;
    impl->cfg.member = a.member;
    where = fmt::format("switch {} ({}), job {}, member {}, tree root {}", a.sw, a.addr.str(), job,
                        a.member, plan->root);
  } else {
    auto ep = sw::parse_endpoint(*sw_addr);
    if (!ep || ep->port() == 0)
      throw Error(Error::Kind::config, fmt::format("INC_SWITCH='{}' is not an IPv4 host:port", *sw_addr));
    if (nranks > static_cast<int>(proto::kMaxMembers))
      throw Error(Error::Kind::config,
                  fmt::format("INC_SWITCH: one switch aggregates at most {} members and this job "
                              "has {} ranks; describe a tree of switches with INC_TOPOLOGY",
                              proto::kMaxMembers, nranks));
    impl->cfg.switch_ep = *ep;
    impl->cfg.member = static_cast<std::uint16_t>(rank);
    where = fmt::format("switch {}, job {}, member {}", ep->str(), job, rank);
  }
  impl->cfg.job = job;
  // Hosts here are often oversubscribed (ranks, switch and other work on few cores): a
  // descheduled switch looks like loss to a 5 ms timer. Start at 20 ms (doubling to 500 ms).
  impl->cfg.rto_initial = 20 * sw::kMillisecond;
  impl->cfg.rto_max = 500 * sw::kMillisecond;
  impl->cfg.session = static_cast<std::uint32_t>(session ^ (session >> 32)) | 1u;
  // Fault injection into this worker's outgoing datagrams, for tests on real sockets:
  // INC_FAULT_LOSS / _DUP / _REORDER (probabilities) and INC_FAULT_SEED (the seed is mixed
  // with the rank so that ranks lose different packets).
  sw::FaultConfig faults;
  auto prob = [&](const char* var, double& out) {
    if (auto v = env(var)) {
      char* end = nullptr;
      double x = std::strtod(v->c_str(), &end);
      if (v->empty() || *end != '\0' || !(x >= 0 && x < 1))
        throw Error(Error::Kind::config, fmt::format("{}='{}' must be a probability in [0, 1)", var, *v));
      out = x;
    }
  };
  prob("INC_FAULT_LOSS", faults.loss);
  prob("INC_FAULT_DUP", faults.dup);
  prob("INC_FAULT_REORDER", faults.reorder);
  if (auto v = env("INC_FAULT_SEED")) faults.seed = std::strtoull(v->c_str(), nullptr, 10);
  faults.seed = faults.seed * 1000003 + static_cast<std::uint64_t>(rank);
  if (faults.enabled())
    where += fmt::format(", injected faults: loss {} dup {} reorder {} seed {}", faults.loss,
                         faults.dup, faults.reorder, faults.seed);
  // Bind all interfaces: the switch may sit in another network namespace or host.
  impl->worker = std::make_unique<sw::UdpWorker>(impl->cfg, sw::Endpoint::ipv4(0, 0), faults);
  auto path = std::unique_ptr<IncPath>(new IncPath(std::move(impl)));
  path->where_ = where;
  return path;
}

IncPlan IncPath::plan(Collective coll, DataType t, ReduceOp op) const {
  const std::string arith = impl_->fixed_point ? "f32 as fixed point (reproducible)" : "f32 adds";
  switch (coll) {
    case Collective::alltoall:
      return {false, "alltoall has nothing to aggregate or replicate: the hosts exchange directly"};
    case Collective::allgather:
    case Collective::broadcast:
    case Collective::barrier:
      return {true, fmt::format("in-network replication via {}", where_)};
    case Collective::allreduce:
    case Collective::reduce_scatter:
      break;
  }
  if (op == ReduceOp::prod)
    return {false, "the switch ALU has no multiply (sum, min, max only)"};
  if (t == DataType::f32) {
    if (impl_->fixed_point && op != ReduceOp::sum && op != ReduceOp::avg)
      return {false, "fixed-point f32 carries sums only (INC_SWITCH_NUMERICS=fixed)"};
    return {true, fmt::format("in-network aggregation, {}, via {}", arith, where_)};
  }
  if (t == DataType::i32)
    return {true, fmt::format("in-network aggregation, i32 wrap-around adds, via {}", where_)};
  if (t == DataType::u32 && (op == ReduceOp::sum || op == ReduceOp::avg))
    return {true, fmt::format("in-network aggregation, u32 as i32 wrap-around adds, via {}", where_)};
  return {false, fmt::format("the switch adds only i32 and f32, not {} {} ({})", name(t), name(op),
                             where_)};
}

bool IncPath::probe(std::string& why) {
  auto& proto = impl_->worker->protocol();
  if (impl_->worker->run(sw::WorkerOp::barrier())) return true;
  why = fmt::format("{} ({})", proto.error().message, sw::name(proto.error().kind));
  return false;
}

IncResult IncPath::run(Collective coll, const void* send, void* recv, std::uint64_t count,
                       DataType t, ReduceOp op, int root) {
  using sw::WorkerOp;
  Impl& im = *impl_;
  const std::size_t esz = size_of(t);
  const auto p = static_cast<std::uint32_t>(im.nranks);
  const auto r = static_cast<std::uint32_t>(im.rank);
  auto kind = t == DataType::f32 ? (im.fixed_point ? sw::NumKind::fx32 : sw::NumKind::f32)
                                 : sw::NumKind::i32;
  auto rk = op == ReduceOp::min ? sw::ReduceKind::min
            : op == ReduceOp::max ? sw::ReduceKind::max
                                  : sw::ReduceKind::sum;
  std::uint64_t in_bytes = 0, out_bytes = 0;
  switch (coll) {
    case Collective::allreduce: in_bytes = out_bytes = count * esz; break;
    case Collective::reduce_scatter: in_bytes = count * esz * p; out_bytes = count * esz; break;
    case Collective::allgather: in_bytes = count * esz; out_bytes = count * esz * p; break;
    case Collective::broadcast: in_bytes = out_bytes = count * esz; break;
    default: break;
  }
  // The worker reads the input while results land in the output: give it a private copy of
  // an input that overlaps the output.
  std::vector<std::byte> staged;
  auto* in = static_cast<const std::byte*>(send);
  auto* out = static_cast<std::byte*>(recv);
  if (in && out && in_bytes && in < out + out_bytes && out < in + in_bytes &&
      coll != Collective::broadcast) {
    staged.assign(in, in + in_bytes);
    in = staged.data();
  }
  WorkerOp wop;
  switch (coll) {
    case Collective::allreduce:
      wop = WorkerOp::allreduce(kind, rk, {in, in_bytes}, {out, out_bytes}, count, p);
      break;
    case Collective::reduce_scatter:
      wop = WorkerOp::reduce_scatter(kind, rk, {in, in_bytes}, {out, out_bytes}, count, p, r);
      break;
    case Collective::allgather:
      wop = WorkerOp::allgather({in, in_bytes}, {out, out_bytes}, in_bytes, p, r);
      break;
    case Collective::broadcast:
      if (static_cast<int>(r) == root && in != out && in_bytes) std::memcpy(out, in, in_bytes);
      wop = WorkerOp::broadcast({out, out_bytes}, static_cast<int>(r) == root);
      break;
    case Collective::barrier:
      wop = WorkerOp::barrier();
      break;
    case Collective::alltoall:
      throw Error(Error::Kind::internal, "alltoall has no switch path");
  }
  wop.label = fmt::format("{} #{}", name(coll), im.ops++);
  auto& proto = im.worker->protocol();
  if (!im.worker->run(std::move(wop))) {
    const auto& e = proto.error();
    throw Error(Error::Kind::network,
                fmt::format("{} through the switch failed ({}): {}; the job cannot tell which ranks "
                            "got a result, so it stops here rather than risk a wrong one",
                            name(coll), sw::name(e.kind), e.message));
  }
  const auto& rep = proto.report();  // per operation
  IncResult res;
  res.bytes_sent = rep.bytes_sent;
  res.bytes_received = rep.bytes_received;
  res.retransmissions = rep.retransmissions;
  res.overflow = rep.overflow;
  if (op == ReduceOp::avg && (coll == Collective::allreduce || coll == Collective::reduce_scatter))
    numerics::divide(t, out, count, p);
  return res;
}

}  // namespace inc::api
