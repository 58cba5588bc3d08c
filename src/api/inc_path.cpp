#include "api/inc_path.hpp"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <optional>

#include "api/env_number.hpp"
#include "src/proto/auth.hpp"
#include "src/proto/packet.hpp"
#include "src/switch/topology.hpp"
#include "src/switch/udp.hpp"

namespace inc::api {

Accumulate accumulate_setting(const transport::EnvLookup& env) {
  // INC_SWITCH_NUMERICS=float|fixed is the deprecated spelling of INC_ACCUMULATE=fixed (float:
  // the default); it may only agree with INC_ACCUMULATE.
  std::optional<Accumulate> old;
  if (auto n = env("INC_SWITCH_NUMERICS")) {
    if (*n == "fixed") old = Accumulate::fixed;
    else if (*n != "float")
      throw Error(Error::Kind::config,
                  fmt::format("INC_SWITCH_NUMERICS='{}' must be 'float' or 'fixed' (deprecated: use "
                              "INC_ACCUMULATE=fixed)",
                              *n));
  }
  // Unset: automatic, i.e. widen in the switch and narrow on the hosts (coll::host_accumulate).
  auto a = env("INC_ACCUMULATE");
  if (!a) return old.value_or(Accumulate::automatic);
  auto v = parse_accumulate(*a);
  if (!v || *v == Accumulate::automatic)
    throw Error(Error::Kind::config,
                fmt::format("INC_ACCUMULATE='{}' must be 'narrow', 'widen', 'wide', 'reproducible' or 'fixed'", *a));
  if (old && *v != *old)
    throw Error(Error::Kind::config,
                fmt::format("INC_ACCUMULATE='{}' contradicts INC_SWITCH_NUMERICS=fixed (deprecated; "
                            "unset it)",
                            *a));
  return *v;
}

namespace {

// The switch's reading of `automatic`: widen.
Accumulate switch_default(Accumulate a) { return a == Accumulate::automatic ? Accumulate::widen : a; }

// What every attachment takes from the environment whoever chose the tree: numerics, window,
// timers and deadlines (INC_TIMEOUT), the session and injected faults. Returns what to add to
// the description.
std::string common_settings(const transport::EnvLookup& env, int rank, std::uint64_t session,
                            std::chrono::milliseconds timeout, coll::SwitchAttachment& att) {
  sw::WorkerConfig& cfg = att.worker;
  if (auto w = env_uint(env, "INC_SWITCH_WINDOW", 0, 0xffff,
                        "must be 0 (congestion-controlled) or a number of chunks up to 65535"))
    cfg.window = static_cast<std::uint32_t>(*w);
  // Hosts here are often oversubscribed (ranks, switch and other work on few cores): a
  // descheduled switch looks like loss to a 5 ms timer. Start at 20 ms (doubling to 500 ms).
  cfg.rto_initial = 20 * sw::kMillisecond;
  cfg.rto_max = 500 * sw::kMillisecond;
  if (auto v = env("INC_SWITCH_RTO_MIN_US")) {
    char* end = nullptr;
    double us = std::strtod(v->c_str(), &end);
    if (v->empty() || *end != '\0' || !(us >= 1) || us > 1e6)
      throw Error(Error::Kind::config, fmt::format("INC_SWITCH_RTO_MIN_US='{}' must be 1 .. 1000000", *v));
    cfg.rto_min = static_cast<sw::Nanos>(us * 1000);
  }
  // INC_TIMEOUT is the only deadline: a rank may arrive late by anything less, and a switch
  // or member that stays silent that long is reported.
  const sw::Nanos deadline = static_cast<sw::Nanos>(timeout.count()) * sw::kMillisecond;
  // Joining is the start-up probe's first step: a switch that does not answer a join within
  // INC_SWITCH_JOIN_TIMEOUT (default 10 s, at most INC_TIMEOUT) puts the job on the hosts, with
  // the reason in every report, rather than holding every rank for the whole INC_TIMEOUT.
  cfg.join_timeout = std::min<sw::Nanos>(deadline, 10 * sw::kSecond);
  if (auto v = env("INC_SWITCH_JOIN_TIMEOUT")) {
    char* end = nullptr;
    double s = std::strtod(v->c_str(), &end);
    if (v->empty() || *end != '\0' || !(s > 0) || s > 86400)
      throw Error(Error::Kind::config,
                  fmt::format("INC_SWITCH_JOIN_TIMEOUT='{}' is not a time-out in seconds (0 < t <= 86400)", *v));
    cfg.join_timeout = std::min<sw::Nanos>(deadline, static_cast<sw::Nanos>(s * 1e9));
  }
  cfg.progress_timeout = deadline;
  // The low 32 bits are rank 0's wall clock in ms (communicator.cpp): a new run's session
  // compares as newer than a crashed earlier run's at the switch (serial numbers, 24 days).
  cfg.session = static_cast<std::uint32_t>(session) | 1u;
  std::string where;
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
  if (auto v = env_uint(env, "INC_FAULT_SEED", 0, ~std::uint64_t{0}, "must be an integer in [0, 2^64-1]")) faults.seed = *v;
  faults.seed = faults.seed * 1000003 + static_cast<std::uint64_t>(rank);
  if (faults.enabled())
    where += fmt::format(", injected faults: loss {} dup {} reorder {} seed {}", faults.loss,
                         faults.dup, faults.reorder, faults.seed);
  att.faults = faults;
  return where;
}

}  // namespace

std::unique_ptr<IncPath> IncPath::from_env(const transport::EnvLookup& env, int rank, int nranks,
                                           std::uint64_t session, std::chrono::milliseconds timeout) {
  auto sw_addr = env("INC_SWITCH");
  auto topo_path = env("INC_TOPOLOGY");
  if (!sw_addr && !topo_path) return nullptr;
  auto path = std::unique_ptr<IncPath>(new IncPath());
  coll::SwitchAttachment& att = path->att_;
  sw::WorkerConfig& cfg = att.worker;
  std::uint32_t job = 1;
  if (auto j = env_uint(env, "INC_SWITCH_JOB", 1, 0xffffffffu, "is not a job id (1..2^32-1)"))
    job = static_cast<std::uint32_t>(*j);
  path->accumulate_ = switch_default(accumulate_setting(env));
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
    cfg.switch_ep = a.addr;
    cfg.member = a.member;
    // The members of each switch on the way to the root, for the report's hops.
    for (const sw::TopoSwitch* s = topo->find(a.sw); s != nullptr && att.path_members.size() <= topo->switches.size();
         s = s->parent.empty() ? nullptr : topo->find(s->parent)) {
      auto it = plan->specs.find(s->name);
      if (it == plan->specs.end()) break;
      att.path_members.push_back(it->second.members);
    }
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
    cfg.switch_ep = *ep;
    cfg.member = static_cast<std::uint16_t>(rank);
    att.path_members = {static_cast<std::uint32_t>(nranks)};  // (one switch, as far as we know)
    where = fmt::format("switch {}, job {}, member {}", ep->str(), job, rank);
  }
  cfg.job = job;
  std::string more = common_settings(env, rank, session, timeout, att);
  // Authentication: the job's key from INC_KEY_FILE ("JOB HEX64" lines, mode 600; inc launch
  // and inc testbed write one per run). Every packet is then sealed and checked.
  if (auto kf = env("INC_KEY_FILE"); kf && !kf->empty()) {
    std::string err;
    auto keys = proto::auth::load_key_file(*kf, err);
    if (!keys) throw Error(Error::Kind::config, fmt::format("INC_KEY_FILE={}", err));
    for (const auto& k : *keys)
      if (k.job == job) cfg.key = k.key;
    if (!cfg.key)
      throw Error(Error::Kind::config,
                  fmt::format("INC_KEY_FILE={} has no key for job {} (INC_SWITCH_JOB)", *kf, job));
    cfg.instance = proto::auth::random_instance();
    cfg.seq_base = proto::auth::clock_seq_base();
    where += ", authenticated";
  }
  att.where = where + more;
  return path;
}

std::unique_ptr<IncPath> IncPath::from_grant(const transport::EnvLookup& env, int rank, std::uint64_t session,
                                             std::chrono::milliseconds timeout, const TreeAttachment& t) {
  auto path = std::unique_ptr<IncPath>(new IncPath());
  coll::SwitchAttachment& att = path->att_;
  sw::WorkerConfig& cfg = att.worker;
  cfg.switch_ep = t.switch_ep;
  cfg.member = t.member;
  cfg.job = t.job;
  std::string more = common_settings(env, rank, session, timeout, att);
  path->accumulate_ = switch_default(accumulate_setting(env));
  cfg.key = t.key;
  cfg.instance = proto::auth::random_instance();
  cfg.seq_base = proto::auth::clock_seq_base();
  att.where = t.where + ", authenticated" + more;
  return path;
}

namespace {
// Where a 16-bit or fp8 sum rounds on this path, for the report (fp8: the report's overflow
// flag says when a finite sum did not fit, as the hosts' kernel gives e4m3 NaN, e5m2 infinity).
std::string float_sum_how(DataType t, Accumulate acc) {
  const bool fp8 = size_of(t) == 1;
  switch (acc) {
    case Accumulate::narrow:
      return fmt::format("{0} sums narrow end to end ({1} B/element on every link; each add in a "
                         "switch rounds to {0}{2})",
                         name(t), size_of(t), fp8 ? "; the report's overflow flags a finite sum that overflowed" : "");
    case Accumulate::wide:
      return fmt::format("{} sums wide (the hosts send f32, 4 B/element; the switches add f32; "
                         "each host rounds the f32 result once)",
                         name(t));
    case Accumulate::widen:
    case Accumulate::automatic:
    case Accumulate::reproducible:  // (plan() answers for reproducible sums first)
    case Accumulate::fixed:         // (f32 only; 16- and 8-bit sums as widen)
      break;
  }
  return fmt::format("{0} sums widened at the first aggregating hop ({1} B/element from the hosts, "
                     "f32 partial sums between switches, rounded once at the root; {1} B/element "
                     "back{2})",
                     name(t), size_of(t), fp8 ? "; the report's overflow flags a total that does not fit" : "");
}
}  // namespace

IncPlan IncPath::plan(Collective coll, DataType t, ReduceOp op, Accumulate acc) const {
  const bool fixed = acc == Accumulate::fixed;
  const std::string arith = fixed ? "f32 as fixed point (order-independent in the switch)" : "f32 adds";
  switch (coll) {
    case Collective::alltoall:
      return {false, "alltoall has nothing to aggregate or replicate: the hosts exchange directly"};
    case Collective::allgather:
    case Collective::broadcast:
    case Collective::barrier:
      return {true, fmt::format("in-network replication via {}", att_.where)};
    case Collective::allreduce:
    case Collective::reduce_scatter:
      break;
  }
  if (op == ReduceOp::prod)
    return {false, "the switch ALU has no multiply (sum, min, max only)"};
  if (acc == Accumulate::reproducible && (op == ReduceOp::sum || op == ReduceOp::avg) &&
      (t == DataType::f32 || t == DataType::f16 || t == DataType::bf16))
    return {true, fmt::format("in-network aggregation, {} reproducible sums (block exponents agreed by "
                              "an i32 max, then 62-bit fixed point as two i32 limbs, 8 B/element, "
                              "rounded once on the hosts: the bits of every host algorithm){}, via {}",
                              name(t), op == ReduceOp::avg ? ", then divided on the hosts" : "", att_.where)};
  if (t == DataType::f32) {
    if (fixed && op != ReduceOp::sum && op != ReduceOp::avg)
      return {false, "fixed-point f32 carries sums only (accumulate fixed: INC_ACCUMULATE=fixed or the "
                     "deprecated INC_SWITCH_NUMERICS=fixed)"};
    return {true, fmt::format("in-network aggregation, {}, via {}", arith, att_.where)};
  }
  if (t == DataType::i32)
    return {true, fmt::format("in-network aggregation, i32 wrap-around adds, via {}", att_.where)};
  if (t == DataType::i8 || t == DataType::u8) {
    if (op == ReduceOp::min || op == ReduceOp::max)
      return {true, fmt::format("in-network aggregation, {} {} (exact, 1 B/element), via {}", name(t),
                                name(op), att_.where)};
    const bool narrow = acc == Accumulate::narrow;
    return {true, fmt::format("in-network aggregation, {} sums wrapping modulo 2^8 as on the hosts (1 "
                              "B/element on every host link; {}){}, via {}",
                              name(t),
                              narrow ? "narrow: 8-bit cells, the report's overflow flags any partial "
                                       "sum that wrapped"
                                     : "widen: i32 partial sums between switches, the report's "
                                       "overflow flags exactly a total outside the type's range",
                              op == ReduceOp::avg ? ", then divided on the hosts" : "", att_.where)};
  }
  if (t == DataType::f16 || t == DataType::bf16 || t == DataType::e4m3 || t == DataType::e5m2) {
    if (op == ReduceOp::min || op == ReduceOp::max)
      return {true, fmt::format("in-network aggregation, {} {} (exact, {} B/element), via {}", name(t),
                                name(op), size_of(t), att_.where)};
    return {true, fmt::format("in-network aggregation, {}{}, via {}", float_sum_how(t, acc),
                              op == ReduceOp::avg ? ", then divided on the hosts" : "", att_.where)};
  }
  if (t == DataType::i4) {
    if (op == ReduceOp::min || op == ReduceOp::max)
      return {true, fmt::format("in-network aggregation, i4 {} (exact, 0.5 B/element), via {}", name(op),
                                att_.where)};
    const bool narrow = acc == Accumulate::narrow;
    return {true, fmt::format("in-network aggregation, i4 sums wrapping modulo 16 as on the hosts (0.5 "
                              "B/element on every host link; {}){}, via {}",
                              narrow ? "narrow: 4-bit cells, the report's overflow flags any partial "
                                       "sum that wrapped"
                                     : "widen: i16 partial sums between switches, the report's "
                                       "overflow flags exactly a total outside -8..7",
                              op == ReduceOp::avg ? ", then divided on the hosts" : "", att_.where)};
  }
  if (is_mx(t)) {
    if (op != ReduceOp::sum && op != ReduceOp::avg)
      return {false, fmt::format("the switch adds MX blocks but has no {} for them ({})", name(op), att_.where)};
    const double bpe = static_cast<double>(size_of(t)) / static_cast<double>(elements_per_unit(t));
    const std::string how =
        acc == Accumulate::narrow
            ? fmt::format("{} sums narrow ({:.4g} B/element on every link; every aggregating switch decodes "
                          "the blocks into f32, adds and re-quantises)", name(t), bpe)
        : acc == Accumulate::wide
            ? fmt::format("{} sums wide (the hosts decode to f32, 4 B/element; the switches add f32; each "
                          "host re-quantises the f32 result once)", name(t))
            : fmt::format("{0} sums widened at the first aggregating hop ({1:.4g} B/element from the hosts, "
                          "f32 partial sums between switches, re-quantised once at the root; {1:.4g} "
                          "B/element back)", name(t), bpe);
    return {true, fmt::format("in-network aggregation, {}{}, via {}", how,
                              op == ReduceOp::avg ? ", then divided on the hosts" : "", att_.where)};
  }
  if (t == DataType::u32 && (op == ReduceOp::sum || op == ReduceOp::avg))
    return {true, fmt::format("in-network aggregation, u32 as i32 wrap-around adds, via {}", att_.where)};
  return {false, fmt::format("the switch adds only i32, f32, f16, bf16, i8, u8, e4m3, e5m2, i4 and MX blocks, not {} {} ({})",
                             name(t), name(op), att_.where)};
}

}  // namespace inc::api
