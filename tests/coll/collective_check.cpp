#include "collective_check.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include <fmt/format.h>

#include "numerics/reduce.hpp"

namespace inc::coll::testing {

namespace {

std::uint64_t mix(std::uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Input value of element i of rank r, chosen so the reference is meaningful for the op:
// sums of moderate values, products of values near 1, min/max over a wide range.
double value(const Case& c, int r, std::uint64_t i) {
  const std::uint64_t h = mix(c.run.seed * 1000003u + static_cast<std::uint64_t>(r) * 0x100000001b3ull + i);
  const double u = static_cast<double>(h >> 11) * 0x1.0p-53;  // [0, 1)
  if (!is_floating(c.dtype)) {
    const auto k = static_cast<std::int64_t>(h % 2001) - 1000;  // [-1000, 1000]
    switch (c.op) {
      case ReduceOp::prod:
        return static_cast<double>(h % 7) - 3.0;  // small factors; products wrap around
      case ReduceOp::min:
      case ReduceOp::max:
        return static_cast<double>(static_cast<std::int32_t>(static_cast<std::uint32_t>(h >> 16)));
      default:
        if (c.dtype == DataType::u8 || c.dtype == DataType::i8) return static_cast<double>(h % 100);
        return static_cast<double>(k);
    }
  }
  switch (c.op) {
    case ReduceOp::prod:
      return 0.5 + 1.5 * u;  // [0.5, 2)
    case ReduceOp::min:
    case ReduceOp::max:
      return (u - 0.5) * 1e6;
    default:
      return 2.0 * u - 1.0;  // [-1, 1)
  }
}

void fill(const Case& c, int r, std::vector<std::byte>& buf, std::uint64_t elems) {
  buf.resize(elems * size_of(c.dtype));
  for (std::uint64_t i = 0; i < elems; ++i) numerics::store_from_double(c.dtype, buf.data(), i, value(c, r, i));
}

double load(const Case& c, const std::vector<std::byte>& buf, std::uint64_t i) {
  return numerics::load_as_double(c.dtype, buf.data(), i);
}

// Exact integer combine in 32 bits (i32 only is used for reductions with integers here;
// other integer widths go through the same wrap-around rule at their width).
std::int64_t wrap(DataType t, std::int64_t v) {
  switch (t) {
    case DataType::i32:
      return static_cast<std::int32_t>(static_cast<std::uint32_t>(v));
    case DataType::u32:
      return static_cast<std::uint32_t>(v);
    case DataType::i8:
      return static_cast<std::int8_t>(static_cast<std::uint8_t>(v));
    case DataType::u8:
      return static_cast<std::uint8_t>(v);
    default:
      return v;
  }
}

// Compares element `i` of a reduced result with the reduction of vals (in rank order).
std::string check_reduced(const Case& c, const std::vector<double>& vals, double got) {
  const int p = c.nranks;
  if (!is_floating(c.dtype)) {
    std::int64_t acc = static_cast<std::int64_t>(vals[0]);
    for (int r = 1; r < p; ++r) {
      const auto v = static_cast<std::int64_t>(vals[static_cast<std::size_t>(r)]);
      switch (c.op) {
        case ReduceOp::sum:
        case ReduceOp::avg:
          acc = wrap(c.dtype, static_cast<std::int64_t>(static_cast<std::uint64_t>(acc) + static_cast<std::uint64_t>(v)));
          break;
        case ReduceOp::prod:
          acc = wrap(c.dtype, static_cast<std::int64_t>(static_cast<std::uint64_t>(acc) * static_cast<std::uint64_t>(v)));
          break;
        case ReduceOp::min:
          acc = std::min(acc, v);
          break;
        case ReduceOp::max:
          acc = std::max(acc, v);
          break;
      }
    }
    if (c.op == ReduceOp::avg) acc = acc / p;  // integers truncate toward zero
    if (static_cast<double>(acc) != got) return fmt::format("expected {}, got {}", acc, got);
    return "";
  }
  // Floating point: reference in long double. Any order of p-1 roundings of sums of x_i is
  // within gamma_{p-1} * sum|x_i| of the exact sum (gamma_k = k u / (1 - k u), u the unit
  // roundoff); products within gamma_{p-1} * |prod| relatively; avg adds one division.
  const long double u = c.dtype == DataType::f32 ? 0x1.0p-24L : 0x1.0p-53L;
  long double acc = vals[0], abs_sum = std::fabs(vals[0]);
  for (int r = 1; r < p; ++r) {
    const long double v = vals[static_cast<std::size_t>(r)];
    abs_sum += std::fabs(v);
    switch (c.op) {
      case ReduceOp::sum:
      case ReduceOp::avg:
        acc += v;
        break;
      case ReduceOp::prod:
        acc *= v;
        break;
      case ReduceOp::min:
        acc = std::min(acc, v);
        break;
      case ReduceOp::max:
        acc = std::max(acc, v);
        break;
    }
  }
  const long double gamma = (p - 1) * u / (1 - (p - 1) * u);
  long double tol = 0;
  switch (c.op) {
    case ReduceOp::sum:
      tol = gamma * abs_sum;
      break;
    case ReduceOp::avg:
      acc /= p;
      tol = gamma * abs_sum / p + u * std::fabs(acc);
      break;
    case ReduceOp::prod:
      tol = gamma * std::fabs(acc) * 1.0001L;
      break;
    default:
      break;  // min/max are exact
  }
  if (std::fabs(static_cast<long double>(got) - acc) > tol)
    return fmt::format("expected {} (+- {}), got {}", static_cast<double>(acc), static_cast<double>(tol), got);
  return "";
}

// Barrier semantics from the schedules alone, whatever the interleaving: no rank may complete
// before every rank has entered. Happens-before: an op follows its dependencies, a receive
// follows its matching send (the k-th send from a to b, the k-th receive at b from a), and the
// k-th inc op of every rank follows what every rank did before its own k-th inc op (the switch
// completes it once all contributed). Rank r leaves when all its ops are done, so the ranks in
// the causal past of r's ops must be all of them. Returns "" or what is missing.
std::string barrier_causality(const std::vector<RankSchedule>& s, int P) {
  using Mask = std::vector<bool>;
  auto join = [](Mask& into, const Mask& from) {
    bool changed = false;
    for (std::size_t i = 0; i < into.size(); ++i)
      if (from[i] && !into[i]) into[i] = changed = true;
    return changed;
  };
  const auto Pu = static_cast<std::size_t>(P);
  std::vector<std::vector<Mask>> past(Pu);  // ranks in the causal past of (rank, op), itself included
  // Matching send of each receive, and the k-th inc op of each rank.
  std::vector<std::vector<std::pair<int, std::uint32_t>>> from(Pu);
  std::vector<std::vector<std::uint32_t>> incs(Pu);
  for (std::size_t r = 0; r < Pu; ++r) {
    past[r].assign(s[r].ops.size(), Mask(Pu, false));
    from[r].assign(s[r].ops.size(), {-1, 0});
    for (std::uint32_t i = 0; i < s[r].ops.size(); ++i) {
      past[r][i][r] = true;
      const OpKind k = s[r].ops[i].kind;
      if (is_inc(k)) incs[r].push_back(i);
    }
  }
  for (std::size_t a = 0; a < Pu; ++a) {
    std::vector<std::uint32_t> nsend(Pu, 0);
    for (std::uint32_t i = 0; i < s[a].ops.size(); ++i) {
      const Op& o = s[a].ops[i];
      if (o.kind != OpKind::send) continue;
      const auto b = static_cast<std::size_t>(o.peer);
      std::uint32_t k = nsend[b]++, seen = 0;
      for (std::uint32_t j = 0; j < s[b].ops.size(); ++j) {
        const Op& q = s[b].ops[j];
        if (is_recv(q.kind) && q.peer == static_cast<int>(a) && seen++ == k) {
          from[b][j] = {static_cast<int>(a), i};
          break;
        }
      }
    }
  }
  for (bool changed = true; changed;) {
    changed = false;
    for (std::size_t r = 0; r < Pu; ++r)
      for (std::uint32_t i = 0; i < s[r].ops.size(); ++i) {
        for (std::uint32_t d = s[r].dep_begin[i]; d < s[r].dep_begin[i + 1]; ++d)
          changed |= join(past[r][i], past[r][s[r].deps[d]]);
        if (from[r][i].first >= 0)
          changed |= join(past[r][i], past[static_cast<std::size_t>(from[r][i].first)][from[r][i].second]);
      }
    // The k-th switch operation: everybody's k-th inc op sees the union of theirs.
    for (std::size_t k = 0; !incs.empty() && k < incs[0].size(); ++k) {
      Mask all(Pu, false);
      for (std::size_t r = 0; r < Pu; ++r)
        if (k < incs[r].size()) join(all, past[r][incs[r][k]]);
      for (std::size_t r = 0; r < Pu; ++r)
        if (k < incs[r].size()) changed |= join(past[r][incs[r][k]], all);
    }
  }
  for (std::size_t r = 0; r < Pu; ++r) {
    Mask seen(Pu, false);
    seen[r] = true;
    for (const Mask& m : past[r]) join(seen, m);
    for (std::size_t d = 0; d < Pu; ++d)
      if (!seen[d]) return fmt::format("rank {} can leave the barrier before rank {} entered it", r, d);
  }
  return "";
}

}  // namespace

std::string describe(const Case& c) {
  return fmt::format(
      "{} algo={} p={} count={} {} {} root={} {} seg={} seed={}{}{}", name(c.coll), name(c.algo),
      c.nranks, c.count, name(c.dtype), name(c.op), c.root, c.in_place ? "in-place" : "out-of-place",
      c.segment_bytes, c.run.seed, c.run.rendezvous ? " rendezvous" : "",
      c.run.ordered_channels ? " ordered" : "");
}

LocalRunOptions mode(std::uint64_t seed, int v) {
  LocalRunOptions o;
  o.seed = seed;
  o.rendezvous = (v & 1) != 0;
  o.ordered_channels = (v & 2) != 0;
  return o;
}

std::string run_and_check(const Case& c) {
  const auto fail = [&](const std::string& what) { return describe(c) + ": " + what; };
  CollectiveParams p;
  p.coll = c.coll;
  p.algo = c.algo;
  p.nranks = c.nranks;
  p.count = c.count;
  p.dtype = c.dtype;
  p.op = c.op;
  p.root = c.root;
  p.in_place = c.in_place;
  p.segment_bytes = c.segment_bytes;

  const int P = c.nranks;
  const std::uint64_t n = c.count, esz = size_of(c.dtype);
  const auto Pu = static_cast<std::uint64_t>(P);
  // Logical (out-of-place layout) input of every rank.
  std::uint64_t in_elems = n;
  if (c.coll == Collective::reduce_scatter || c.coll == Collective::alltoall) in_elems = n * Pu;
  if (c.coll == Collective::barrier) in_elems = 0;
  std::vector<std::vector<std::byte>> inputs(static_cast<std::size_t>(P));
  for (int r = 0; r < P; ++r) fill(c, r, inputs[static_cast<std::size_t>(r)], in_elems);

  std::vector<LocalBuffers> bufs(static_cast<std::size_t>(P));
  for (int r = 0; r < P; ++r) {
    p.rank = r;
    auto& b = bufs[static_cast<std::size_t>(r)];
    const auto& in = inputs[static_cast<std::size_t>(r)];
    b.output.assign(output_bytes(p), std::byte{0xCD});  // garbage: every result byte must be written
    if (!c.in_place) {
      b.input = in;
      if (b.input.size() != input_bytes(p)) return fail("input_bytes disagrees with the layout");
    } else if (c.coll == Collective::allgather) {
      if (n) std::memcpy(b.output.data() + static_cast<std::uint64_t>(r) * n * esz, in.data(), n * esz);
    } else if (c.coll == Collective::broadcast) {
      if (r == c.root && n) std::memcpy(b.output.data(), in.data(), n * esz);
    } else {
      if (b.output.size() != in.size()) return fail("in-place buffer size disagrees with the layout");
      b.output = in;
    }
  }

  std::vector<RankSchedule> scheds;
  try {
    scheds = build_schedules(p);
    run_local(p, scheds, bufs, c.run);
  } catch (const std::exception& e) {
    return fail(e.what());
  }
  for (int r = 0; r < P; ++r)
    if (!c.in_place && bufs[static_cast<std::size_t>(r)].input != inputs[static_cast<std::size_t>(r)])
      return fail(fmt::format("rank {}: input modified", r));

  // Finish avg as the runtime does: divide the result region.
  if (c.op == ReduceOp::avg && (c.coll == Collective::allreduce || c.coll == Collective::reduce_scatter)) {
    for (int r = 0; r < P; ++r) {
      p.rank = r;
      const Region res = result_region(p);
      numerics::divide(c.dtype, bufs[static_cast<std::size_t>(r)].output.data() + res.offset, res.bytes / esz,
                       Pu);
    }
  }

  std::vector<double> vals(static_cast<std::size_t>(P));
  for (int r = 0; r < P; ++r) {
    p.rank = r;
    const auto& out = bufs[static_cast<std::size_t>(r)].output;
    const std::uint64_t res_off = result_region(p).offset / esz;
    switch (c.coll) {
      case Collective::allreduce:
      case Collective::reduce_scatter:
        for (std::uint64_t i = 0; i < n; ++i) {
          const std::uint64_t src_i = c.coll == Collective::allreduce ? i : static_cast<std::uint64_t>(r) * n + i;
          for (int j = 0; j < P; ++j) vals[static_cast<std::size_t>(j)] = load(c, inputs[static_cast<std::size_t>(j)], src_i);
          const std::string e = check_reduced(c, vals, load(c, out, res_off + i));
          if (!e.empty()) return fail(fmt::format("rank {} element {}: {}", r, i, e));
        }
        break;
      case Collective::allgather:
        for (int j = 0; j < P; ++j)
          if (n && std::memcmp(out.data() + static_cast<std::uint64_t>(j) * n * esz,
                               inputs[static_cast<std::size_t>(j)].data(), n * esz) != 0)
            return fail(fmt::format("rank {}: block {} differs from rank {}'s input", r, j, j));
        break;
      case Collective::broadcast:
        if (n && std::memcmp(out.data(), inputs[static_cast<std::size_t>(c.root)].data(), n * esz) != 0)
          return fail(fmt::format("rank {}: differs from the root's input", r));
        break;
      case Collective::alltoall:
        for (int j = 0; j < P; ++j)
          if (n && std::memcmp(out.data() + static_cast<std::uint64_t>(j) * n * esz,
                               inputs[static_cast<std::size_t>(j)].data() + static_cast<std::uint64_t>(r) * n * esz,
                               n * esz) != 0)
            return fail(fmt::format("rank {}: block {} is not rank {}'s block {}", r, j, j, r));
        break;
      case Collective::barrier:
        break;
    }
  }
  if (c.coll == Collective::barrier)
    if (std::string e = barrier_causality(scheds, P); !e.empty()) return fail(e);
  // Allreduce results are bitwise identical on every rank (each element is combined once,
  // or symmetrically with commutative operations).
  if (c.coll == Collective::allreduce)
    for (int r = 1; r < P; ++r)
      if (bufs[static_cast<std::size_t>(r)].output != bufs[0].output)
        return fail(fmt::format("rank {}'s result differs bitwise from rank 0's", r));
  return "";
}

}  // namespace inc::coll::testing
