#include "tools/bench_core.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "numerics/reduce.hpp"

namespace inc::tools {

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

namespace {

// Input pattern: small integers (1..4; for prod 1 or 2 on at most 6 ranks), so that every
// reduction order gives the same, exact result in every data type: sums stay below 256 (the
// largest run of exact integers in bf16) up to 64 ranks, and products below 64.
double pattern(ReduceOp op, int rank, std::uint64_t i) {
  if (op == ReduceOp::prod) return (rank < 6 && (rank + i) % 3 == 0) ? 2.0 : 1.0;
  return 1.0 + static_cast<double>((static_cast<std::uint64_t>(rank) * 7 + i * 3) % 4);
}

// Expected element: combine the ranks' pattern values in rank order with the library's own
// kernels on a one-element vector (exact for these small integers in every type).
struct Expect {
  DataType t;
  ReduceOp op;
  int n;
  std::vector<std::byte> acc, tmp;
  Expect(DataType t_, ReduceOp op_, int n_) : t(t_), op(op_), n(n_), acc(8), tmp(8) {}
  void reduced(std::uint64_t i, std::byte* out) {
    numerics::store_from_double(t, acc.data(), 0, pattern(op, 0, i));
    for (int r = 1; r < n; ++r) {
      numerics::store_from_double(t, tmp.data(), 0, pattern(op, r, i));
      numerics::reduce(t, op, acc.data(), acc.data(), tmp.data(), 1);
    }
    if (op == ReduceOp::avg) numerics::divide(t, acc.data(), 1, static_cast<std::uint64_t>(n));
    std::memcpy(out, acc.data(), size_of(t));
  }
};

void fill(DataType t, ReduceOp op, int rank, std::byte* buf, std::uint64_t base, std::uint64_t n) {
  // The pattern depends on i only through i mod 12 (a multiple of 3 and 4): build one period and replicate it.
  std::byte period[12 * 8];
  for (int k = 0; k < 12; ++k) numerics::store_from_double(t, period, k, pattern(op, rank, base + k));
  const std::size_t esz = size_of(t);
  for (std::uint64_t i = 0; i < n; i += 12) {
    std::uint64_t m = std::min<std::uint64_t>(12, n - i);
    std::memcpy(buf + i * esz, period, m * esz);
  }
}

}  // namespace

BenchResult run_case(Communicator& comm, const BenchCase& c) {
  using clock = std::chrono::steady_clock;
  const int n = comm.size();
  const int rank = comm.rank();
  const std::size_t esz = size_of(c.dtype);
  BenchResult res;
  res.c = c;
  const std::uint64_t count = count_for_bytes(c.coll, c.bytes, c.dtype, n);
  res.count = count;

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
  auto prepare_input = [&] {
    std::byte* in = c.in_place ? recvbuf.data() : sendbuf.data();
    if (c.in_place && c.coll == Collective::allgather)
      in = recvbuf.data() + static_cast<std::size_t>(rank) * count * esz;
    if (c.coll == Collective::broadcast && rank != c.root) return;
    fill(c.dtype, c.op, rank, in, 0, in_elems);
  };
  auto run_once = [&] {
    const void* s;
    void* r;
    pointers(s, r);
    switch (c.coll) {
      case Collective::allreduce:
        comm.iallreduce(s, r, count, c.dtype, c.op, o).wait();
        break;
      case Collective::reduce_scatter:
        comm.ireduce_scatter(s, r, count, c.dtype, c.op, o).wait();
        break;
      case Collective::allgather:
        comm.iallgather(s, r, count, c.dtype, o).wait();
        break;
      case Collective::broadcast:
        comm.ibroadcast(s, r, count, c.dtype, c.root, o).wait();
        break;
      case Collective::alltoall:
        comm.ialltoall(s, r, count, c.dtype, o).wait();
        break;
      case Collective::barrier:
        comm.barrier();
        break;
    }
  };

  // Correctness run.
  if (c.check) {
    prepare_input();
    run_once();
    Expect ex(c.dtype, c.op, n);
    std::byte want[8];
    std::uint64_t wrong = 0;
    auto check_elem = [&](const std::byte* got) {
      if (std::memcmp(got, want, esz) != 0) ++wrong;
    };
    const std::byte* out = recvbuf.data();
    switch (c.coll) {
      case Collective::allreduce: {
        std::byte table[12 * 8];
        for (int k = 0; k < 12; ++k) ex.reduced(static_cast<std::uint64_t>(k), table + k * esz);
        for (std::uint64_t i = 0; i < count; ++i)
          if (std::memcmp(out + i * esz, table + (i % 12) * esz, esz) != 0) ++wrong;
        break;
      }
      case Collective::reduce_scatter: {
        const std::byte* mine = c.in_place ? out + static_cast<std::size_t>(rank) * count * esz : out;
        for (std::uint64_t i = 0; i < count; ++i) {
          ex.reduced(static_cast<std::uint64_t>(rank) * count + i, want);
          check_elem(mine + i * esz);
        }
        break;
      }
      case Collective::allgather:
        for (int r = 0; r < n; ++r)
          for (std::uint64_t i = 0; i < count; ++i) {
            numerics::store_from_double(c.dtype, want, 0, pattern(c.op, r, i));
            check_elem(out + (static_cast<std::uint64_t>(r) * count + i) * esz);
          }
        break;
      case Collective::broadcast:
        for (std::uint64_t i = 0; i < count; ++i) {
          numerics::store_from_double(c.dtype, want, 0, pattern(c.op, c.root, i));
          check_elem(out + i * esz);
        }
        break;
      case Collective::alltoall:
        for (int r = 0; r < n; ++r)
          for (std::uint64_t i = 0; i < count; ++i) {
            numerics::store_from_double(c.dtype, want, 0,
                                        pattern(c.op, r, static_cast<std::uint64_t>(rank) * count + i));
            check_elem(out + (static_cast<std::uint64_t>(r) * count + i) * esz);
          }
        break;
      case Collective::barrier:
        break;
    }
    // Every rank's verdict counts.
    std::uint64_t total_wrong = 0;
    comm.allreduce(&wrong, &total_wrong, 1, DataType::u64, ReduceOp::sum);
    res.wrong_elements = total_wrong;
    res.correct = total_wrong == 0 ? 1 : 0;
  }

  for (int i = 0; i < c.warmup; ++i) run_once();
  comm.barrier();
  auto t0 = clock::now();
  for (int i = 0; i < c.iters; ++i) run_once();
  double local_us =
      std::chrono::duration<double, std::micro>(clock::now() - t0).count() / std::max(1, c.iters);
  auto rep = comm.last_report();  // the case's own last run, before the timing allreduce
  double slowest = 0;
  comm.allreduce(&local_us, &slowest, 1, DataType::f64, ReduceOp::max);
  res.algorithm = rep.algorithm;
  res.bytes_sent = rep.bytes_sent;
  res.in_network = rep.in_network;
  res.time_us = slowest;
  double seconds = slowest * 1e-6;
  // nccl-tests' size: the larger buffer, as actually used (count rounded down).
  std::uint64_t bytes = std::max(in_elems, out_elems) * esz;
  res.algbw = seconds > 0 ? static_cast<double>(bytes) / seconds / 1e9 : 0;
  res.busbw = res.algbw * bus_factor(c.coll, n);
  return res;
}

}  // namespace inc::tools
