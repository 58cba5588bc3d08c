// Schedule contract: names, buffer sizes, the default algorithm choice, building one rank's
// schedule and inferring its dependencies. The algorithms themselves are in algorithms.cpp.
#include "coll/schedule.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <limits>
#include <map>

#include <fmt/format.h>

#include "coll/algorithms_internal.hpp"
#include "numerics/repro.hpp"

namespace inc::coll {

namespace {

constexpr std::array<std::string_view, kNumAlgorithms> kAlgorithmNames = {
    "automatic",       "ring",     "recursive_doubling", "rabenseifner", "binomial_tree",
    "pipelined_chain", "pairwise", "dissemination",      "inc"};

std::uint64_t elem_bytes(const CollectiveParams& p) noexcept { return size_of(p.dtype); }

int ceil_log2(std::uint64_t x) noexcept {
  return x <= 1 ? 0 : static_cast<int>(std::bit_width(x - 1));
}

}  // namespace

std::string_view name(Algorithm a) noexcept {
  auto i = static_cast<unsigned>(a);
  return i < kAlgorithmNames.size() ? kAlgorithmNames[i] : std::string_view("?");
}

bool parse_algorithm(std::string_view s, Algorithm& out) noexcept {
  std::string k;
  k.reserve(s.size());
  for (char c : s) k.push_back(c == '-' ? '_' : static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  struct Alias {
    std::string_view name;
    Algorithm algo;
  };
  static constexpr Alias kAliases[] = {
      {"auto", Algorithm::automatic},        {"default", Algorithm::automatic},
      {"rd", Algorithm::recursive_doubling}, {"rec_doubling", Algorithm::recursive_doubling},
      {"bruck", Algorithm::recursive_doubling},
      {"raben", Algorithm::rabenseifner},    {"rhd", Algorithm::rabenseifner},
      {"tree", Algorithm::binomial_tree},    {"binomial", Algorithm::binomial_tree},
      {"chain", Algorithm::pipelined_chain}, {"pipeline", Algorithm::pipelined_chain},
      {"core_inc", Algorithm::inc},          {"switch", Algorithm::inc},
  };
  for (std::size_t i = 0; i < kAlgorithmNames.size(); ++i) {
    if (k == kAlgorithmNames[i]) {
      out = static_cast<Algorithm>(i);
      return true;
    }
  }
  for (const Alias& a : kAliases) {
    if (k == a.name) {
      out = a.algo;
      return true;
    }
  }
  return false;
}

namespace {
// The bytes of a collective's input or output buffer: every rank's share where the buffer holds
// them all (reduce_scatter's input, allgather's output, alltoall, and the in-place buffer), else
// one share.
std::uint64_t buffer_bytes(const CollectiveParams& p, bool output) noexcept {
  const std::uint64_t n = p.count * elem_bytes(p);
  const auto ranks = static_cast<std::uint64_t>(std::max(p.nranks, 1));
  switch (p.coll) {
    case Collective::allreduce:
    case Collective::broadcast:
      return n;
    case Collective::reduce_scatter:
      return output && !p.in_place ? n : n * ranks;
    case Collective::allgather:
      return !output && !p.in_place ? n : n * ranks;
    case Collective::alltoall:
      return n * ranks;
    case Collective::barrier:
      return 0;
  }
  return 0;
}
}  // namespace

std::uint64_t input_bytes(const CollectiveParams& p) noexcept { return buffer_bytes(p, false); }
std::uint64_t output_bytes(const CollectiveParams& p) noexcept { return buffer_bytes(p, true); }

Region result_region(const CollectiveParams& p) noexcept {
  const std::uint64_t n = p.count * elem_bytes(p);
  if (p.coll == Collective::reduce_scatter)
    return {BufferId::output, p.in_place ? n * static_cast<std::uint64_t>(p.rank) : 0, n};
  return {BufferId::output, 0, output_bytes(p)};
}

bool supports(Collective coll, Algorithm algo) noexcept {
  if (algo == Algorithm::automatic) return true;
  switch (coll) {
    case Collective::allreduce:
      return algo == Algorithm::ring || algo == Algorithm::recursive_doubling ||
             algo == Algorithm::rabenseifner || algo == Algorithm::inc;
    case Collective::reduce_scatter:
      return algo == Algorithm::ring || algo == Algorithm::inc;
    case Collective::allgather:
      return algo == Algorithm::ring || algo == Algorithm::recursive_doubling ||
             algo == Algorithm::inc;
    case Collective::broadcast:
      return algo == Algorithm::binomial_tree || algo == Algorithm::pipelined_chain ||
             algo == Algorithm::inc;
    case Collective::alltoall:
      return algo == Algorithm::pairwise;
    case Collective::barrier:
      return algo == Algorithm::dissemination || algo == Algorithm::inc;
  }
  return false;
}

// Default algorithms. First-principles crossovers (latency alpha per message, bandwidth beta per
// byte, n = bytes per rank buffer), to be re-tuned from measurements (docs/ALGORITHMS.md):
//  * allreduce: n <= 16 KiB: recursive doubling (log2 p steps, latency-bound);
//    n <= 4 MiB (512 KiB when p is not a power of two, where the fold to a power of two costs a
//    full extra send on 2(p - 2^floor(log2 p)) ranks): Rabenseifner (2 log2 p steps, 2(p-1)/p n
//    bytes); larger: pipelined ring (2(p-1) steps, 2(p-1)/p n bytes, neighbour traffic only).
//  * reduce_scatter: ring.
//  * allgather: total output p x n <= 256 KiB: recursive doubling (Bruck when p is not a power
//    of two), otherwise ring.
//  * broadcast: pipelined chain when n > 256 KiB and its bandwidth term n + (p-2) s (s = chain
//    segment) beats the binomial tree's ceil(log2 p) n; otherwise binomial tree.
//  * alltoall: pairwise exchange; barrier: dissemination.
// `inc` is never chosen here: it needs a switch tree, which the caller knows about.
Algorithm select_algorithm(const CollectiveParams& p) noexcept {
  if (p.algo != Algorithm::automatic) return p.algo;
  const std::uint64_t n = p.count * elem_bytes(p);
  const auto ranks = static_cast<std::uint64_t>(std::max(p.nranks, 1));
  switch (p.coll) {
    case Collective::allreduce:
      // Crossovers measured on loopback with 5 and 8 ranks (docs/ALGORITHMS.md, "Measured
      // crossovers"): recursive doubling wins up to 32 KiB; ring from 64 KiB except around
      // 2 MiB, where Rabenseifner's halving beats it on both rank counts.
      if (n <= (32u << 10)) return Algorithm::recursive_doubling;
      if (n > (1u << 20) && n <= (4u << 20)) return Algorithm::rabenseifner;
      return Algorithm::ring;
    case Collective::reduce_scatter:
      return Algorithm::ring;
    case Collective::allgather:
      return n * ranks <= (256u << 10) ? Algorithm::recursive_doubling : Algorithm::ring;
    case Collective::broadcast: {
      const std::uint64_t s = p.segment_bytes ? p.segment_bytes : detail::kChainSegment;
      const auto steps = static_cast<std::uint64_t>(ceil_log2(ranks));
      const bool chain = ranks > 2 && n > (256u << 10) &&
                         n + (ranks - 2) * s < steps * n;
      return chain ? Algorithm::pipelined_chain : Algorithm::binomial_tree;
    }
    case Collective::alltoall:
      return Algorithm::pairwise;
    case Collective::barrier:
      return Algorithm::dissemination;
  }
  return Algorithm::ring;
}

bool reproducible(const CollectiveParams& p) noexcept {
  return p.accumulate == Accumulate::reproducible &&
         (p.coll == Collective::allreduce || p.coll == Collective::reduce_scatter) &&
         (p.op == ReduceOp::sum || p.op == ReduceOp::avg) && numerics::repro::supports(p.dtype);
}

RankSchedule build_schedule(const CollectiveParams& p_in) {
  CollectiveParams p = p_in;
  auto bad = [&](std::string what) {
    return Error(Error::Kind::invalid_argument,
                 fmt::format("{} ({} ranks, rank {}): {}", name(p.coll), p.nranks, p.rank, what));
  };
  if (static_cast<unsigned>(p.coll) >= kNumCollectives) throw bad("unknown collective");
  if (static_cast<unsigned>(p.dtype) >= kNumDataTypes) throw bad("unknown data type");
  if (static_cast<unsigned>(p.op) >= kNumReduceOps) throw bad("unknown reduce op");
  if (static_cast<unsigned>(p.algo) >= kNumAlgorithms) throw bad("unknown algorithm");
  if (p.nranks < 1) throw bad("nranks must be >= 1");
  if (p.rank < 0 || p.rank >= p.nranks) throw bad("rank out of range");
  if (p.coll == Collective::broadcast && (p.root < 0 || p.root >= p.nranks))
    throw bad(fmt::format("root {} out of range", p.root));
  // Every byte offset must fit in 64 bits: count x elem x nranks.
  const std::uint64_t max_count =
      std::numeric_limits<std::uint64_t>::max() / 2 / elem_bytes(p) / static_cast<std::uint64_t>(p.nranks);
  if (p.count > max_count) throw bad(fmt::format("count {} too large", p.count));

  p.algo = select_algorithm(p);
  if (!supports(p.coll, p.algo))
    throw bad(fmt::format("algorithm '{}' does not implement {}", name(p.algo), name(p.coll)));

  RankSchedule s;
  s.algo = p.algo;
  std::uint64_t default_segment = detail::kUnsegmented;
  if (p.algo == Algorithm::ring) default_segment = detail::kRingSegment;
  if (p.algo == Algorithm::pipelined_chain) default_segment = detail::kChainSegment;
  if (p.algo == Algorithm::inc) default_segment = detail::kIncSegment;
  detail::Builder b(p, s, default_segment);

  if (p.coll == Collective::barrier && p.algo == Algorithm::inc) {
    // Through the switch even on one rank: it is also how a job checks that its tree answers.
    detail::inc_collective(b);
  } else if (p.coll == Collective::barrier) {
    if (p.nranks > 1) detail::barrier_dissemination(b);
  } else if (p.count == 0) {
    // Nothing to move, on every rank alike.
  } else if (reproducible(p)) {
    if (p.nranks > (1 << 19))
      throw bad("reproducible sums take at most 2^19 ranks (12-bit limbs)");
    detail::reproducible_sum(p, s);
  } else if (p.nranks == 1) {
    // One rank: the result is the input (a no-op in place), whatever the algorithm.
    b.copy(b.in(0, p.count), b.out(0, p.count));
  } else if (p.algo == Algorithm::inc) {
    detail::inc_collective(b);
  } else if (host_accumulate(p) == Accumulate::wide) {
    detail::wide_sum(p, s);
  } else if (host_accumulate(p) == Accumulate::widen) {
    detail::widen_sum(b);
  } else {
    switch (p.coll) {
      case Collective::allreduce:
        if (p.algo == Algorithm::ring) detail::allreduce_ring(b);
        if (p.algo == Algorithm::recursive_doubling) detail::allreduce_recursive_doubling(b);
        if (p.algo == Algorithm::rabenseifner) detail::allreduce_rabenseifner(b);
        break;
      case Collective::reduce_scatter:
        detail::reduce_scatter_ring(b);
        break;
      case Collective::allgather:
        if (p.algo == Algorithm::ring) detail::allgather_ring(b);
        if (p.algo == Algorithm::recursive_doubling) detail::allgather_recursive_doubling(b);
        break;
      case Collective::broadcast:
        if (p.algo == Algorithm::binomial_tree) detail::broadcast_binomial(b);
        if (p.algo == Algorithm::pipelined_chain) detail::broadcast_chain(b);
        break;
      case Collective::alltoall:
        detail::alltoall_pairwise(b);
        break;
      case Collective::barrier:
        break;
    }
  }
  infer_dependencies(s);
  return s;
}

// ---------------------------------------------------------------------------------------------
// Dependency inference. Per buffer, an interval map of disjoint byte ranges, each with the op
// that last wrote it and the ops that read it since. A new op depends on the last writer of
// what it reads (RAW), and on the last writer and the readers since of what it writes (WAW,
// WAR). Each op adds at most two boundaries per region, so a schedule of n ops costs
// O(n log n) map operations plus the dependencies themselves.

namespace {

struct Interval {
  std::uint64_t end = 0;
  std::int64_t writer = -1;
  std::vector<std::uint32_t> readers;
};
using IntervalMap = std::map<std::uint64_t, Interval>;  // keyed by begin

void split_at(IntervalMap& m, std::uint64_t x) {
  auto it = m.upper_bound(x);
  if (it == m.begin()) return;
  --it;
  if (it->first < x && x < it->second.end) {
    Interval tail{it->second.end, it->second.writer, it->second.readers};
    it->second.end = x;
    m.emplace_hint(std::next(it), x, std::move(tail));
  }
}

IntervalMap::iterator first_overlap(IntervalMap& m, std::uint64_t a) {
  auto it = m.upper_bound(a);
  if (it != m.begin()) {
    auto prev = std::prev(it);
    if (prev->second.end > a) return prev;
  }
  return it;
}

void hazards(IntervalMap& m, const Region& r, bool write, std::vector<std::uint32_t>& deps) {
  const std::uint64_t end = r.offset + r.bytes;
  for (auto it = first_overlap(m, r.offset); it != m.end() && it->first < end; ++it) {
    if (it->second.writer >= 0) deps.push_back(static_cast<std::uint32_t>(it->second.writer));
    if (write) deps.insert(deps.end(), it->second.readers.begin(), it->second.readers.end());
  }
}

void record_read(IntervalMap& m, const Region& r, std::uint32_t op) {
  const std::uint64_t a = r.offset, b = r.offset + r.bytes;
  split_at(m, a);
  split_at(m, b);
  std::uint64_t pos = a;
  auto it = m.lower_bound(a);
  while (pos < b) {
    if (it == m.end() || it->first > pos) {  // untouched gap
      const std::uint64_t e = it == m.end() ? b : std::min(b, it->first);
      it = m.emplace_hint(it, pos, Interval{e, -1, {op}});
      pos = e;
      ++it;
      continue;
    }
    auto& readers = it->second.readers;
    if (readers.empty() || readers.back() != op) readers.push_back(op);
    pos = it->second.end;
    ++it;
  }
}

void record_write(IntervalMap& m, const Region& r, std::uint32_t op) {
  const std::uint64_t a = r.offset, b = r.offset + r.bytes;
  split_at(m, a);
  split_at(m, b);
  auto first = m.lower_bound(a);
  auto last = m.lower_bound(b);
  auto hint = m.erase(first, last);
  m.emplace_hint(hint, a, Interval{b, op, {}});
}

struct Access {
  const Region* reads[2] = {nullptr, nullptr};
  const Region* write = nullptr;
};

Access access_of(const Op& op) {
  Access a;
  switch (op.kind) {
    case OpKind::send:
      a.reads[0] = &op.src;
      break;
    case OpKind::recv:
      a.write = &op.dst;
      break;
    case OpKind::reduce:
      a.reads[0] = &op.src;
      a.reads[1] = &op.dst;
      a.write = &op.dst;
      break;
    case OpKind::recv_reduce:
    case OpKind::copy:
    case OpKind::widen:
    case OpKind::narrow:
    case OpKind::inc_reduce:
    case OpKind::inc_broadcast:
    case OpKind::inc_gather:
    case OpKind::repro_scan:
      a.reads[0] = &op.src;
      a.write = &op.dst;
      break;
    case OpKind::repro_encode:
    case OpKind::repro_decode:
      a.reads[0] = &op.src;
      a.reads[1] = &op.aux;
      a.write = &op.dst;
      break;
  }
  return a;
}

}  // namespace

// Appends op i's dependencies (the hazards found in `deps`, plus what a fence waits for) to the
// schedule's CSR arrays. Shared by both inference paths below.
class DepWriter {
 public:
  explicit DepWriter(RankSchedule& s) : s_(s), has_successor_(s.ops.size(), 0) {}
  void append(std::uint32_t i, bool fence, std::vector<std::uint32_t>& deps) {
    // A fence waits for every earlier op: the last fence and the ops since it that nothing
    // depends on yet (the others are covered through their successors).
    if (fence) {
      if (last_fence_ >= 0 && !has_successor_[static_cast<std::size_t>(last_fence_)])
        deps.push_back(static_cast<std::uint32_t>(last_fence_));
      for (std::uint32_t j : since_fence_)
        if (!has_successor_[j]) deps.push_back(j);
      since_fence_.clear();
      last_fence_ = i;
    } else {
      since_fence_.push_back(i);
    }
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    for (std::uint32_t d : deps) has_successor_[d] = 1;
    s_.deps.insert(s_.deps.end(), deps.begin(), deps.end());
    s_.dep_begin[i + 1] = static_cast<std::uint32_t>(s_.deps.size());
  }

 private:
  RankSchedule& s_;
  std::vector<std::uint8_t> has_successor_;
  std::vector<std::uint32_t> since_fence_;
  std::int64_t last_fence_ = -1;
};

// The common case: every two regions of a buffer are either the same range or disjoint (whole
// chunks and segments, as all algorithms here produce). Then each distinct region is one
// interval for the whole schedule and a flat table replaces the interval maps: several times
// faster, which matters when the simulator builds 1,024 or 16,384 ranks' schedules.
// Returns false (and does nothing) when some regions overlap partially.
static bool infer_dependencies_aligned(RankSchedule& s) {
  struct Range {
    std::uint64_t begin, end;
    bool operator<(const Range& o) const { return begin != o.begin ? begin < o.begin : end < o.end; }
    bool operator==(const Range& o) const = default;
  };
  std::vector<Range> ranges[3];
  for (const Op& op : s.ops) {
    const Access acc = access_of(op);
    for (const Region* r : {acc.reads[0], acc.reads[1], acc.write})
      if (r && r->bytes) ranges[static_cast<int>(r->buf) % 3].push_back({r->offset, r->offset + r->bytes});
  }
  std::size_t base[4] = {0, 0, 0, 0};
  for (int b = 0; b < 3; ++b) {
    auto& v = ranges[b];
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    for (std::size_t i = 1; i < v.size(); ++i)
      if (v[i].begin < v[i - 1].end) return false;  // partial overlap: general path
    base[b + 1] = base[b] + v.size();
  }
  auto id = [&](const Region& r) {
    const auto& v = ranges[static_cast<int>(r.buf) % 3];
    auto it = std::lower_bound(v.begin(), v.end(), Range{r.offset, r.offset + r.bytes});
    return base[static_cast<int>(r.buf) % 3] + static_cast<std::size_t>(it - v.begin());
  };
  const std::size_t n = s.ops.size();
  std::vector<std::int64_t> writer(base[3], -1);
  std::vector<std::vector<std::uint32_t>> readers(base[3]);
  std::vector<std::uint32_t> tmp;
  DepWriter out(s);
  for (std::uint32_t i = 0; i < n; ++i) {
    const Op& op = s.ops[i];
    const Access acc = access_of(op);
    std::size_t rid[2] = {SIZE_MAX, SIZE_MAX}, wid = SIZE_MAX;
    tmp.clear();
    for (int k = 0; k < 2; ++k)
      if (acc.reads[k] && acc.reads[k]->bytes) {
        rid[k] = id(*acc.reads[k]);
        if (writer[rid[k]] >= 0) tmp.push_back(static_cast<std::uint32_t>(writer[rid[k]]));
      }
    if (acc.write && acc.write->bytes) {
      wid = id(*acc.write);
      if (writer[wid] >= 0) tmp.push_back(static_cast<std::uint32_t>(writer[wid]));
      tmp.insert(tmp.end(), readers[wid].begin(), readers[wid].end());
    }
    out.append(i, op.fence, tmp);
    for (std::size_t r : rid)
      if (r != SIZE_MAX && (readers[r].empty() || readers[r].back() != i)) readers[r].push_back(i);
    if (wid != SIZE_MAX) {
      writer[wid] = i;
      readers[wid].clear();
    }
  }
  return true;
}

void infer_dependencies(RankSchedule& s) {
  const std::size_t n = s.ops.size();
  if (n >= std::numeric_limits<std::uint32_t>::max())
    throw Error(Error::Kind::invalid_argument, "schedule has too many ops");
  s.dep_begin.assign(n + 1, 0);
  s.deps.clear();
  if (infer_dependencies_aligned(s)) return;
  IntervalMap maps[3];
  std::vector<std::uint32_t> tmp;
  DepWriter out(s);

  for (std::uint32_t i = 0; i < n; ++i) {
    const Op& op = s.ops[i];
    const Access acc = access_of(op);
    tmp.clear();
    for (const Region* r : acc.reads)
      if (r && r->bytes) hazards(maps[static_cast<int>(r->buf) % 3], *r, false, tmp);
    if (acc.write && acc.write->bytes)
      hazards(maps[static_cast<int>(acc.write->buf) % 3], *acc.write, true, tmp);
    out.append(i, op.fence, tmp);

    for (const Region* r : acc.reads)
      if (r && r->bytes) record_read(maps[static_cast<int>(r->buf) % 3], *r, i);
    if (acc.write && acc.write->bytes)
      record_write(maps[static_cast<int>(acc.write->buf) % 3], *acc.write, i);
  }
}

// ---------------------------------------------------------------------------------------------

std::string_view name(OpKind k) noexcept {
  static constexpr std::string_view kinds[] = {"send",       "recv",          "recv_reduce",
                                               "copy",       "reduce",        "inc_reduce",
                                               "inc_broadcast", "inc_gather", "repro_scan",
                                               "repro_encode", "repro_decode", "widen",
                                               "narrow"};
  static_assert(std::size(kinds) == kNumOpKinds);
  return kinds[static_cast<unsigned>(k) % kNumOpKinds];
}

std::string to_string(const Op& op) {
  static constexpr std::string_view bufs[] = {"input", "output", "scratch"};
  auto reg = [](const Region& r) {
    return fmt::format("{}[{},+{})", bufs[static_cast<unsigned>(r.buf) % 3], r.offset, r.bytes);
  };
  const auto k = name(op.kind);
  const std::string fence = op.fence ? " (fence)" : "";
  switch (op.kind) {
    case OpKind::send:
      return fmt::format("{} to {} {}{}", k, op.peer, reg(op.src), fence);
    case OpKind::recv:
      return fmt::format("{} from {} {}{}", k, op.peer, reg(op.dst), fence);
    case OpKind::recv_reduce:
      return fmt::format("{} from {} {} -> {}{}", k, op.peer, reg(op.src), reg(op.dst), fence);
    case OpKind::inc_broadcast:
      return fmt::format("{} root {} {} -> {}{}", k, op.peer, reg(op.src), reg(op.dst), fence);
    default:
      return fmt::format("{} {} -> {}{}", k, reg(op.src), reg(op.dst), fence);
  }
}

ScheduleCounts summarize(const RankSchedule& s) noexcept {
  ScheduleCounts c;
  c.ops = s.ops.size();
  for (const Op& op : s.ops) {
    switch (op.kind) {
      case OpKind::send:
        ++c.sends;
        c.send_bytes += op.src.bytes;
        break;
      case OpKind::recv:
        ++c.recvs;
        c.recv_bytes += op.dst.bytes;
        break;
      case OpKind::recv_reduce:
        ++c.recvs;
        c.recv_bytes += op.dst.bytes;
        c.reduce_bytes += op.dst.bytes;
        break;
      case OpKind::copy:
        c.copy_bytes += op.dst.bytes;
        break;
      case OpKind::reduce:
        c.reduce_bytes += op.dst.bytes;
        break;
      case OpKind::inc_reduce:
      case OpKind::inc_broadcast:
      case OpKind::inc_gather:
        ++c.inc_ops;
        c.inc_bytes += op.src.bytes;
        break;
      case OpKind::repro_scan:
      case OpKind::repro_encode:
      case OpKind::repro_decode:
      case OpKind::widen:
      case OpKind::narrow:
        c.reduce_bytes += op.src.bytes;  // local passes over the data, as a reduce
        break;
    }
  }
  return c;
}

}  // namespace inc::coll
