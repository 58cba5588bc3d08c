#include "tools/bench_core.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <optional>

#include <time.h>

#include <fmt/format.h>

#include "coll/schedule.hpp"
#include "numerics/reduce.hpp"

#include "tools/bench_check.hpp"
#include "tools/bench_quant.hpp"

namespace inc::tools {

namespace {

// A collective that an Edge-INC engine ran with a lossy wire handler: its expectation is the
// reference run of the same schedules with the handler's rounding on every message
// (bench_quant.hpp), not the exact reduction. The number of wrong elements of `result`, or
// nothing (and why) when that reference cannot be computed here.
std::optional<std::uint64_t> wrong_through_handler(const BenchCase& c, const Report& rep, int n, int rank,
                                                   std::uint64_t elements, std::uint64_t in_elems,
                                                   const BenchPattern& pat, const std::byte* result, std::string& why) {
  coll::CollectiveParams p;
  p.coll = c.coll;
  p.nranks = n;
  p.rank = rank;
  p.count = elements;
  p.dtype = c.dtype;
  p.op = c.op;
  p.root = c.root;
  p.in_place = c.in_place;
  if (!coll::parse_algorithm(rep.algorithm, p.algo) || p.algo == coll::Algorithm::inc) {
    why = "the engine ran '" + rep.algorithm + "'";
    return std::nullopt;
  }
  if (c.in_place && (c.coll == Collective::allgather || c.coll == Collective::alltoall)) {
    why = "in-place allgather/alltoall layouts";
    return std::nullopt;
  }
  std::uint64_t sends = 0;
  for (const coll::Op& o : coll::build_schedule(p).ops) sends += o.kind == coll::OpKind::send;
  if (sends != rep.messages_sent) {  // the engine segmented otherwise (INC_SEGMENT_BYTES)
    why = fmt::format("the engine sent {} messages, the default segmentation {}", rep.messages_sent, sends);
    return std::nullopt;
  }
  const std::size_t esz = size_of(c.dtype);
  std::vector<std::vector<std::byte>> inputs(static_cast<std::size_t>(n), std::vector<std::byte>(in_elems * esz));
  for (int r = 0; r < n; ++r) pat.fill(r, inputs[static_cast<std::size_t>(r)].data(), 0, in_elems);
  std::vector<std::byte> want;
  why = quantised_reference(p, rep.wire_handler, inputs, rank, want);
  if (!why.empty()) return std::nullopt;
  std::uint64_t wrong = 0;
  for (std::size_t i = 0; i < want.size() / esz; ++i) {
    const bool nan = std::isnan(numerics::load_as_double(c.dtype, want.data(), i)) &&
                     std::isnan(numerics::load_as_double(c.dtype, result, i));
    wrong += !nan && std::memcmp(want.data() + i * esz, result + i * esz, esz) != 0;
  }
  return wrong;
}

// This process's CPU time (all threads, user + system), microseconds.
double process_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) * 1e-3;
}

}  // namespace

double bus_factor(Collective c, int n) {
  if (n <= 1) return c == Collective::broadcast ? 1.0 : 0.0;
  switch (c) {
    case Collective::allreduce:
      return 2.0 * (n - 1) / n;
    case Collective::reduce_scatter:
    case Collective::allgather:
    case Collective::alltoall:
      return static_cast<double>(n - 1) / n;
    case Collective::broadcast:
      return 1.0;
    case Collective::barrier:
      return 0.0;
  }
  return 0.0;
}

std::uint64_t count_for_bytes(Collective c, std::uint64_t bytes, DataType t, int n) {
  std::uint64_t elems = bytes / size_of(t);
  switch (c) {
    case Collective::reduce_scatter:
    case Collective::allgather:
    case Collective::alltoall:
      return elems / static_cast<std::uint64_t>(n);
    default:
      return elems;
  }
}

BenchResult run_case(Communicator& comm, const BenchCase& c) {
  using clock = std::chrono::steady_clock;
  const int n = comm.size();
  const int rank = comm.rank();
  const std::size_t esz = size_of(c.dtype);
  BenchResult res;
  res.c = c;
  const std::uint64_t count = count_for_bytes(c.coll, c.bytes, c.dtype, n);
  res.count = count * elements_per_unit(c.dtype);  // elements, as the API counts them

  std::uint64_t in_elems = count, out_elems = count;
  switch (c.coll) {
    case Collective::reduce_scatter:
      in_elems = count * n;
      break;
    case Collective::allgather:
      out_elems = count * n;
      break;
    case Collective::alltoall:
      in_elems = out_elems = count * n;
      break;
    default:
      break;
  }
  // One allocation serves in-place (input inside output) and out-of-place runs.
  std::vector<std::byte> sendbuf(std::max<std::uint64_t>(in_elems, 1) * esz);
  std::vector<std::byte> recvbuf(std::max<std::uint64_t>(std::max(out_elems, in_elems), 1) * esz);
  CallOptions o;
  o.algo = c.algo;

  auto pointers = [&](const void*& s, void*& r) {
    r = recvbuf.data();
    if (!c.in_place) {
      s = sendbuf.data();
      return;
    }
    switch (c.coll) {
      case Collective::allgather:
        s = recvbuf.data() + static_cast<std::size_t>(rank) * count * esz;
        break;
      case Collective::reduce_scatter:
        s = recvbuf.data();
        r = recvbuf.data() + static_cast<std::size_t>(rank) * count * esz;
        break;
      default:
        s = recvbuf.data();
    }
  };
  std::byte* const input = [&] {
    std::byte* in = c.in_place ? recvbuf.data() : sendbuf.data();
    if (c.in_place && c.coll == Collective::allgather)
      in = recvbuf.data() + static_cast<std::size_t>(rank) * count * esz;
    return in;
  }();
  const std::byte* const result = c.in_place && c.coll == Collective::reduce_scatter
                                      ? recvbuf.data() + static_cast<std::size_t>(rank) * count * esz
                                      : recvbuf.data();
  // Iteration k's inputs differ from iteration k-1's: a stale result fails the check.
  const std::uint64_t case_salt = (static_cast<std::uint64_t>(c.coll) << 56) ^ (c.bytes << 8) ^
                                  (static_cast<std::uint64_t>(c.dtype) * 131 + static_cast<std::uint64_t>(c.op));
  auto prepare_input = [&](int k) {
    if (c.coll == Collective::broadcast && rank != c.root) return;
    BenchPattern(c.coll, c.dtype, c.op, n, case_salt + static_cast<std::uint64_t>(k)).fill(rank, input, 0, in_elems);
  };
  // The API counts elements; the buffers above count storage units (i4: two elements a byte).
  const std::uint64_t elements = count * elements_per_unit(c.dtype);
  auto run_once = [&] {
    const void* s;
    void* r;
    pointers(s, r);
    switch (c.coll) {
      case Collective::allreduce:
        comm.iallreduce(s, r, elements, c.dtype, c.op, o).wait();
        break;
      case Collective::reduce_scatter:
        comm.ireduce_scatter(s, r, elements, c.dtype, c.op, o).wait();
        break;
      case Collective::allgather:
        comm.iallgather(s, r, elements, c.dtype, o).wait();
        break;
      case Collective::broadcast:
        comm.ibroadcast(s, r, elements, c.dtype, c.root, o).wait();
        break;
      case Collective::alltoall:
        comm.ialltoall(s, r, elements, c.dtype, o).wait();
        break;
      case Collective::barrier:
        comm.barrier();
        break;
    }
  };

  // With the check on, every iteration (warm-up included) gets fresh inputs and its result is
  // verified; only the collective call itself is timed, between barriers (on an oversubscribed
  // machine another rank's input or check work would otherwise steal the cores of the timed
  // call). With it off, the timed iterations run back to back as in nccl-tests.
  std::uint64_t wrong = 0;
  std::string unverified;  // why a lossy handler's result could not be checked
  double local_us = 0;
  double local_cpu_us = 0;  // this process's CPU over the timed calls, per call
  std::vector<double> per_iter;  // microseconds of each timed call (check mode)
  Report rep;
  if (c.check) {
    for (int k = 0; k < c.warmup + c.iters; ++k) {
      prepare_input(k);
      comm.barrier();
      const double cpu0 = process_cpu_us();
      auto t0 = clock::now();
      run_once();
      auto t1 = clock::now();
      if (k >= c.warmup) {
        per_iter.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
        local_cpu_us += process_cpu_us() - cpu0;
      }
      rep = comm.last_report();
      comm.barrier();  // nobody checks while another rank still runs the call
      const BenchPattern pat(c.coll, c.dtype, c.op, n, case_salt + static_cast<std::uint64_t>(k));
      if (rep.offload == "edge" && handler_converts(rep.wire_handler, c.dtype)) {
        std::string why;
        const auto w = wrong_through_handler(c, rep, n, rank, elements, in_elems, pat, result, why);
        if (w) wrong += *w;
        else unverified = "not checked: the lossy wire handler " + rep.wire_handler + "'s reference: " + why;
      } else {
        wrong += pat.count_wrong(rank, count, c.root, result);
      }
    }
    for (double x : per_iter) local_us += x;
    local_us /= std::max(1, c.iters);
    local_cpu_us /= std::max(1, c.iters);
  } else {
    prepare_input(0);
    for (int i = 0; i < c.warmup; ++i) run_once();
    comm.barrier();
    const double cpu0 = process_cpu_us();
    auto t0 = clock::now();
    for (int i = 0; i < c.iters; ++i) run_once();
    local_us = std::chrono::duration<double, std::micro>(clock::now() - t0).count() / std::max(1, c.iters);
    local_cpu_us = (process_cpu_us() - cpu0) / std::max(1, c.iters);
    rep = comm.last_report();  // the case's own last run, before the timing allreduce
  }
  if (c.check) {
    // Every rank's verdict counts.
    std::uint64_t total_wrong = 0;
    comm.allreduce(&wrong, &total_wrong, 1, DataType::u64, ReduceOp::sum);
    std::uint64_t any_unverified = unverified.empty() ? 0 : 1, unverified_ranks = 0;
    comm.allreduce(&any_unverified, &unverified_ranks, 1, DataType::u64, ReduceOp::sum);
    res.wrong_elements = total_wrong;
    res.correct = total_wrong > 0 ? 0 : unverified_ranks > 0 ? -1 : 1;
  }
  double local_median = local_us;
  if (!per_iter.empty()) {
    std::sort(per_iter.begin(), per_iter.end());
    const std::size_t m = per_iter.size();
    local_median = m % 2 ? per_iter[m / 2] : (per_iter[m / 2 - 1] + per_iter[m / 2]) / 2;
  }
  double mine[2] = {local_us, local_median}, slowest_pair[2] = {0, 0};
  comm.allreduce(mine, slowest_pair, 2, DataType::f64, ReduceOp::max);
  const double slowest = slowest_pair[0];
  res.median_us = slowest_pair[1];
  double cpu_sum = 0;
  comm.allreduce(&local_cpu_us, &cpu_sum, 1, DataType::f64, ReduceOp::sum);
  res.cpu_us = cpu_sum / std::max(1, n);
  // "edge:ring" when this host's Edge-INC engine ran it.
  res.algorithm = rep.offload.empty() ? rep.algorithm : rep.offload + ":" + rep.algorithm;
  res.reason = rep.reason;
  if (!unverified.empty()) res.reason += "; " + unverified;
  res.bytes_sent = rep.bytes_sent;
  res.messages_sent = rep.messages_sent;
  res.switch_operations = rep.switch_operations;
  res.in_network = rep.in_network;
  res.overflow_events = rep.overflow_events;
  res.events_counted = rep.events_counted;
  res.nonfinite_inputs = rep.nonfinite_inputs;
  res.hops = rep.hops;
  res.time_us = slowest;
  double seconds = slowest * 1e-6;
  // nccl-tests' size: the larger buffer, as actually used (count rounded down).
  std::uint64_t bytes = std::max(in_elems, out_elems) * esz;
  res.algbw = seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0;
  res.busbw = res.algbw * bus_factor(c.coll, n);
  return res;
}

}  // namespace inc::tools
