// inc::Request and the collective calls of inc::Communicator: each call is validated, its
// algorithm resolved (per-call option, communicator setting, tuning table, the switch's plan)
// and handed to the executor engine, the Edge-INC engine or the switch path.
#include <fmt/format.h>

#include <cstring>

#include "api/call_checks.hpp"
#include "api/comm_state.hpp"

namespace inc {

using coll::Algorithm;
using coll::CollectiveParams;

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

Request Communicator::start(const std::shared_ptr<detail::CommState>& st, const Call& call,
                           const CallOptions& o) {
  if (!st) throw Error(Error::Kind::invalid_argument, fmt::format("{} on an empty communicator", name(call.coll)));
  // Below the API every count is in storage units of size_of(dtype) bytes: i4 packs two
  // elements per byte, so an i4 count (elements) must be even and becomes count / 2 bytes; an
  // MX count must be a multiple of 32 and becomes count / 32 blocks.
  Call c = call;
  if (static_cast<unsigned>(c.dtype) < kNumDataTypes && elements_per_unit(c.dtype) > 1) {
    if (c.count % elements_per_unit(c.dtype) != 0)
      throw Error(Error::Kind::invalid_argument,
                  fmt::format("{}: {} packs {} elements per {}; count {} (elements) is not a multiple of {}",
                              name(c.coll), name(c.dtype), elements_per_unit(c.dtype),
                              is_mx(c.dtype) ? fmt::format("block of {} bytes (one E8M0 scale and the element codes)",
                                                           size_of(c.dtype))
                                             : std::string("byte"),
                              c.count, elements_per_unit(c.dtype)));
    c.count /= elements_per_unit(c.dtype);
  }
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

  if (static_cast<unsigned>(o.accumulate) >= kNumAccumulate)
    throw Error(Error::Kind::invalid_argument,
                fmt::format("{}: invalid CallOptions::accumulate {}", name(c.coll), static_cast<unsigned>(o.accumulate)));
  params.accumulate = o.accumulate != Accumulate::automatic ? o.accumulate : st->accumulate;
  if (params.accumulate == Accumulate::reproducible &&
      (c.coll == Collective::allreduce || c.coll == Collective::reduce_scatter) && is_floating(c.dtype) &&
      c.op != ReduceOp::min && c.op != ReduceOp::max && !coll::reproducible(params))
    throw Error(Error::Kind::invalid_argument,
                fmt::format("{}: reproducible sums take f32, f16 or bf16 sum/avg (and min/max, exact "
                            "anyway), not {} {}",
                            name(c.coll), name(c.dtype), name(c.op)));

  // Algorithm: per call, else the communicator's, else automatic.
  std::string selection;
  std::vector<api::PathCost> weighed;  // automatic selection from a tuning file
  Algorithm algo = st->algo;
  if (!o.algo.empty()) {
    algo = detail::parse_algo_or_throw(o.algo, "CallOptions::algo");
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
      if (auto best = api::choose(*table, c.coll, bytes, api::candidates(c.coll, switch_ok), weighed)) {
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
  // `automatic` (no CallOptions::accumulate, no INC_ACCUMULATE): widen in the switch, where it
  // costs no host-link bytes; narrow on the hosts, the bits they always gave (widen there sends
  // f32 partial sums: coll::host_accumulate, docs/NUMERICS.md "Wide accumulators on the hosts").
  if (params.accumulate == Accumulate::automatic && algo == Algorithm::inc) params.accumulate = Accumulate::widen;

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
    rs->selection = fmt::format("offloaded to the edge engine at {} ({}{}): {}", edge.client->path(),
                                edge.requested_by, edge.client->handler().empty() ? "" : ", wire handler " + edge.client->handler(),
                                selection);
    rs->wire_handler = edge.client->handler();
    rs->edge_params = params;
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

}  // namespace inc
