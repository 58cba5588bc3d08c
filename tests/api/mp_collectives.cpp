// Multi-process collective tests: run as N real processes on loopback by `inc launch`
// (see CMakeLists.txt). Every rank runs the same tests in the same order; each result is
// checked on every rank against a reference computed independently of the library:
//  * reductions on integer types: exact modular arithmetic in 64 bits (wrap-around included);
//  * reductions on floating types: inputs are small integers, so the exact result is known
//    in long double and every summation order must give it exactly;
//  * data movement (allgather, broadcast, alltoall): random bit patterns, compared bitwise;
//  * rounding behaviour: random real inputs against a long double reference with the bound
//    |got - ref| <= (p + 1) * eps(type) * sum |x_i|   (RoundingWithinBound).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "inc/inc.hpp"
#include "tests/api/mp_util.hpp"
#include "numerics/half.hpp"
#include "numerics/reduce.hpp"
#include "test_store.hpp"

using namespace inc;
using inc::testing::world;

namespace {

std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

const DataType kTypes[] = {DataType::f64, DataType::f32, DataType::f16, DataType::bf16, DataType::i8,
                           DataType::u8,  DataType::i32, DataType::u32, DataType::i64,  DataType::u64};
const ReduceOp kOps[] = {ReduceOp::sum, ReduceOp::prod, ReduceOp::min, ReduceOp::max, ReduceOp::avg};

bool is_signed_int(DataType t) {
  return t == DataType::i8 || t == DataType::i32 || t == DataType::i64;
}
int bits(DataType t) { return static_cast<int>(size_of(t) * 8); }

// Integer input of rank r at index i, as the two's-complement bit pattern in 64 bits.
std::uint64_t int_value(DataType t, ReduceOp op, int r, std::uint64_t i, int p) {
  std::uint64_t h = splitmix(i * 0x9e37u + 17);
  std::uint64_t mask = bits(t) == 64 ? ~0ull : ((1ull << bits(t)) - 1);
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::prod:
      return splitmix(h + static_cast<std::uint64_t>(r)) & mask;  // full range, wraps
    case ReduceOp::min:
    case ReduceOp::max: {
      // a + r without overflow; the extreme ranks decide.
      std::uint64_t span = (mask >> 1) - static_cast<std::uint64_t>(p);
      std::uint64_t a = h % span;
      return (a + static_cast<std::uint64_t>(r)) & mask;
    }
    case ReduceOp::avg:
      return (h % 50 + static_cast<std::uint64_t>(r)) & mask;  // no wrap: avg is well defined
  }
  return 0;
}

std::int64_t sign_extend(std::uint64_t v, int b) {
  if (b == 64) return static_cast<std::int64_t>(v);
  std::uint64_t m = 1ull << (b - 1);
  return static_cast<std::int64_t>((v ^ m) - m);
}

// Floating input: small integers, exactly representable, sums exact for p <= 8.
double float_value(DataType t, ReduceOp op, int r, std::uint64_t i) {
  std::uint64_t k = t == DataType::f64 ? (1ull << 40) : t == DataType::f32 ? (1ull << 20)
                    : t == DataType::f16 ? 128 : 16;
  if (op == ReduceOp::prod) return (r < 6 && (i + static_cast<std::uint64_t>(r)) % 2) ? 2.0 : 1.0;
  return static_cast<double>(splitmix(i) % k) + r + 1;
}

void store_int(DataType t, std::byte* buf, std::uint64_t i, std::uint64_t v) {
  std::memcpy(buf + i * size_of(t), &v, size_of(t));  // little-endian low bytes
}

// Fill rank r's input of `n` elements for a reduction starting at global index `base`.
void fill_reduction(DataType t, ReduceOp op, int r, int p, std::byte* buf, std::uint64_t base,
                    std::uint64_t n) {
  for (std::uint64_t i = 0; i < n; ++i) {
    if (is_floating(t))
      numerics::store_from_double(t, buf, i, float_value(t, op, r, base + i));
    else
      store_int(t, buf, i, int_value(t, op, r, base + i, p));
  }
}

// The reference of element `gi` of a reduction over p ranks, in the type's bytes.
void reference(DataType t, ReduceOp op, int p, std::uint64_t gi, std::byte* out) {
  if (is_floating(t)) {
    long double acc = float_value(t, op, 0, gi);
    for (int r = 1; r < p; ++r) {
      long double v = float_value(t, op, r, gi);
      switch (op) {
        case ReduceOp::sum:
        case ReduceOp::avg: acc += v; break;
        case ReduceOp::prod: acc *= v; break;
        case ReduceOp::min: acc = std::min(acc, v); break;
        case ReduceOp::max: acc = std::max(acc, v); break;
      }
    }
    if (op == ReduceOp::avg) acc /= p;
    numerics::store_from_double(t, out, 0, static_cast<double>(acc));
    return;
  }
  const int b = bits(t);
  const std::uint64_t mask = b == 64 ? ~0ull : ((1ull << b) - 1);
  std::uint64_t acc = int_value(t, op, 0, gi, p);
  for (int r = 1; r < p; ++r) {
    std::uint64_t v = int_value(t, op, r, gi, p);
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg: acc = (acc + v) & mask; break;
      case ReduceOp::prod: acc = (acc * v) & mask; break;
      case ReduceOp::min:
      case ReduceOp::max: {
        bool less = is_signed_int(t) ? sign_extend(v, b) < sign_extend(acc, b) : v < acc;
        if ((op == ReduceOp::min) == less) acc = v;
        break;
      }
    }
  }
  if (op == ReduceOp::avg) {
    acc = is_signed_int(t) ? static_cast<std::uint64_t>(sign_extend(acc, b) / p) & mask : acc / p;
  }
  store_int(t, out, 0, acc);
}

// avg on f16/bf16 divides in f32 and rounds once more: allow one unit in the last place.
bool close_enough(DataType t, ReduceOp op, const std::byte* got, const std::byte* want) {
  std::size_t esz = size_of(t);
  if (std::memcmp(got, want, esz) == 0) return true;
  if (op == ReduceOp::avg && (t == DataType::f16 || t == DataType::bf16)) {
    std::uint16_t a, b;
    std::memcpy(&a, got, 2);
    std::memcpy(&b, want, 2);
    return (a > b ? a - b : b - a) <= 1;
  }
  return false;
}

std::string label(const char* coll, const std::string& algo, DataType t, ReduceOp op,
                  std::uint64_t count, bool in_place) {
  return std::string(coll) + " algo=" + (algo.empty() ? "auto" : algo) + " type=" +
         std::string(name(t)) + " op=" + std::string(name(op)) + " count=" + std::to_string(count) +
         (in_place ? " in-place" : "");
}

std::vector<std::uint64_t> counts_for(DataType t) {
  // 0, 1, 7, a prime above a million, and 3 MiB worth of elements.
  return {0, 1, 7, 1000003, (3u << 20) / size_of(t)};
}

// Counts of a million elements and more cost every rank p x count reference work (on 2 cores
// shared by 8 ranks, most of the suite's time): each (algorithm, type) runs them for one op,
// rotating so that every (algorithm, op) gets them with two types and, over the algorithms,
// each type with several ops. Small counts (0, 1, 7) run for every combination.
bool large_counts_for(std::size_t algo_i, std::size_t type_i, std::size_t op_i) {
  return (algo_i + type_i) % std::size(kOps) == op_i;
}

}  // namespace

TEST(Collectives, Allreduce) {
  auto& comm = world();
  const int p = comm.size(), rank = comm.rank();
  const std::string algos[] = {"ring", "recursive_doubling", "rabenseifner", ""};
  for (std::size_t ai = 0; ai < std::size(algos); ++ai)
    for (std::size_t ti = 0; ti < std::size(kTypes); ++ti)
      for (std::size_t oi = 0; oi < std::size(kOps); ++oi)
        for (std::uint64_t count : counts_for(kTypes[ti])) {
          if (count > 1000 && !large_counts_for(ai, ti, oi)) continue;
          const std::string& algo = algos[ai];
          const DataType t = kTypes[ti];
          const ReduceOp op = kOps[oi];
          const std::size_t esz = size_of(t);
          bool in_place = (count % 2) == 1;
          std::vector<std::byte> in(count * esz), out(count * esz);
          fill_reduction(t, op, rank, p, in.data(), 0, count);
          CallOptions o;
          o.algo = algo;
          if (in_place) {
            comm.allreduce(in.data(), in.data(), count, t, op, o);
            out = in;
          } else {
            comm.allreduce(in.data(), out.data(), count, t, op, o);
          }
          std::byte want[8];
          std::uint64_t wrong = 0, first = 0;
          for (std::uint64_t i = 0; i < count; ++i) {
            reference(t, op, p, i, want);
            if (!close_enough(t, op, out.data() + i * esz, want) && wrong++ == 0) first = i;
          }
          EXPECT_EQ(wrong, 0u) << label("allreduce", algo, t, op, count, in_place)
                               << " first wrong element " << first;
        }
}

TEST(Collectives, ReduceScatter) {
  auto& comm = world();
  const int p = comm.size(), rank = comm.rank();
  const std::string algos[] = {"ring", ""};
  for (std::size_t ai = 0; ai < std::size(algos); ++ai)
    for (std::size_t ti = 0; ti < std::size(kTypes); ++ti)
      for (std::size_t oi = 0; oi < std::size(kOps); ++oi)
        for (std::uint64_t count : counts_for(kTypes[ti])) {
          if (count > 1000 && !large_counts_for(ai, ti, oi)) continue;
          const std::string& algo = algos[ai];
          const DataType t = kTypes[ti];
          const ReduceOp op = kOps[oi];
          if (count > 1000) count /= static_cast<std::uint64_t>(p);
          const std::size_t esz = size_of(t);
          bool in_place = (count % 2) == 1;
          std::vector<std::byte> in(count * p * esz), out(count * esz);
          fill_reduction(t, op, rank, p, in.data(), 0, count * p);
          CallOptions o;
          o.algo = algo;
          const std::byte* result;
          if (in_place) {
            comm.reduce_scatter(in.data(), in.data() + rank * count * esz, count, t, op, o);
            result = in.data() + rank * count * esz;
          } else {
            comm.reduce_scatter(in.data(), out.data(), count, t, op, o);
            result = out.data();
          }
          std::byte want[8];
          std::uint64_t wrong = 0;
          for (std::uint64_t i = 0; i < count; ++i) {
            reference(t, op, p, static_cast<std::uint64_t>(rank) * count + i, want);
            if (!close_enough(t, op, result + i * esz, want)) ++wrong;
          }
          EXPECT_EQ(wrong, 0u) << label("reduce_scatter", algo, t, op, count, in_place);
        }
}

namespace {
// Random bits for data movement; NaN patterns included on purpose.
void fill_bits(std::byte* buf, std::size_t bytes, std::uint64_t seed) {
  for (std::size_t i = 0; i < bytes; i += 8) {
    std::uint64_t v = splitmix(seed * 0x100000001b3ull + i);
    std::memcpy(buf + i, &v, std::min<std::size_t>(8, bytes - i));
  }
}
}  // namespace

TEST(Collectives, AllgatherBroadcastAlltoall) {
  auto& comm = world();
  const int p = comm.size(), rank = comm.rank();
  for (DataType t : {DataType::f64, DataType::f32, DataType::bf16, DataType::u8})
    for (std::uint64_t count : counts_for(t)) {
      if (count > 1000) count /= static_cast<std::uint64_t>(p);
      const std::size_t esz = size_of(t), block = count * esz;
      for (std::string algo : {"ring", "recursive_doubling", ""}) {
        bool in_place = (count % 2) == 1;
        std::vector<std::byte> in(block), out(block * p);
        fill_bits(in.data(), block, static_cast<std::uint64_t>(rank) + 1);
        CallOptions o;
        o.algo = algo;
        if (in_place) {
          std::memcpy(out.data() + rank * block, in.data(), block);
          comm.allgather(out.data() + rank * block, out.data(), count, t, o);
        } else {
          comm.allgather(in.data(), out.data(), count, t, o);
        }
        std::vector<std::byte> want(block);
        int wrong_blocks = 0;
        for (int r = 0; r < p; ++r) {
          fill_bits(want.data(), block, static_cast<std::uint64_t>(r) + 1);
          if (block && std::memcmp(out.data() + r * block, want.data(), block) != 0) ++wrong_blocks;
        }
        EXPECT_EQ(wrong_blocks, 0) << label("allgather", algo, t, ReduceOp::sum, count, in_place);
      }
      for (std::string algo : {"binomial_tree", "pipelined_chain", ""})
        for (int root : {0, p - 1, p / 2}) {
          std::vector<std::byte> buf(block), want(block);
          fill_bits(want.data(), block, 1000 + static_cast<std::uint64_t>(root));
          if (rank == root) buf = want;
          CallOptions o;
          o.algo = algo;
          comm.ibroadcast(buf.data(), buf.data(), count, t, root, o).wait();
          EXPECT_TRUE(block == 0 || std::memcmp(buf.data(), want.data(), block) == 0)
              << label("broadcast", algo, t, ReduceOp::sum, count, false) << " root " << root;
        }
      {
        std::vector<std::byte> in(block * p), out(block * p);
        fill_bits(in.data(), block * p, 5000 + static_cast<std::uint64_t>(rank));
        bool in_place = (count % 2) == 1;
        if (in_place) {
          comm.alltoall(in.data(), in.data(), count, t);
          out = in;
        } else {
          comm.alltoall(in.data(), out.data(), count, t);
        }
        int wrong_blocks = 0;
        std::vector<std::byte> theirs(block * p);
        for (int r = 0; r < p; ++r) {
          fill_bits(theirs.data(), block * p, 5000 + static_cast<std::uint64_t>(r));
          if (block && std::memcmp(out.data() + r * block, theirs.data() + rank * block, block) != 0)
            ++wrong_blocks;
        }
        EXPECT_EQ(wrong_blocks, 0) << label("alltoall", "pairwise", t, ReduceOp::sum, count, in_place);
      }
    }
}

TEST(Collectives, RoundingWithinBound) {
  auto& comm = world();
  const int p = comm.size(), rank = comm.rank();
  const std::uint64_t count = 1000;
  for (DataType t : {DataType::f64, DataType::f32, DataType::f16, DataType::bf16})
    for (std::string algo : {"ring", "recursive_doubling", "rabenseifner"}) {
      auto x = [&](int r, std::uint64_t i) {
        double u = static_cast<double>(splitmix(i * 977 + static_cast<std::uint64_t>(r)) >> 11) * 0x1p-53;
        std::byte b[8];
        numerics::store_from_double(t, b, 0, 2 * u - 1);  // the exact input value of type t
        return numerics::load_as_double(t, b, 0);
      };
      const std::size_t esz = size_of(t);
      std::vector<std::byte> in(count * esz), out(count * esz);
      for (std::uint64_t i = 0; i < count; ++i) numerics::store_from_double(t, in.data(), i, x(rank, i));
      CallOptions o;
      o.algo = algo;
      comm.allreduce(in.data(), out.data(), count, t, ReduceOp::sum, o);
      const double eps = t == DataType::f64 ? 0x1p-53 : t == DataType::f32 ? 0x1p-24
                         : t == DataType::f16 ? 0x1p-11 : 0x1p-8;
      int bad = 0;
      for (std::uint64_t i = 0; i < count; ++i) {
        long double ref = 0, mag = 0;
        for (int r = 0; r < p; ++r) ref += x(r, i), mag += std::fabs(x(r, i));
        double got = numerics::load_as_double(t, out.data(), i);
        double bound = (p + 1) * eps * static_cast<double>(mag) + (t == DataType::f16 ? 0x1p-24 : 0);
        if (std::fabs(got - static_cast<double>(ref)) > bound) ++bad;
      }
      EXPECT_EQ(bad, 0) << "rounding bound exceeded: " << name(t) << " " << algo;
    }
}

TEST(Collectives, NonBlockingOverlapAndSplit) {
  auto& comm = world();
  const int p = comm.size(), rank = comm.rank();
  // Several collectives in flight at once, completed in reverse order.
  std::vector<std::vector<std::int32_t>> bufs(4, std::vector<std::int32_t>(4097));
  std::vector<Request> reqs;
  for (int k = 0; k < 4; ++k) {
    for (std::size_t i = 0; i < bufs[k].size(); ++i) bufs[k][i] = rank * (k + 1) + static_cast<int>(i);
    reqs.push_back(comm.iallreduce(bufs[k].data(), bufs[k].data(), bufs[k].size(), DataType::i32, ReduceOp::sum));
  }
  for (int k = 3; k >= 0; --k) reqs[k].wait();
  for (int k = 0; k < 4; ++k)
    for (std::size_t i = 0; i < bufs[k].size(); ++i)
      ASSERT_EQ(bufs[k][i], (k + 1) * p * (p - 1) / 2 + p * static_cast<int>(i)) << k << " " << i;
  // test() polling completes too.
  std::int64_t v = rank, s = 0;
  auto req = comm.iallreduce(&v, &s, 1, DataType::i64, ReduceOp::sum);
  while (!req.test()) {
  }
  EXPECT_EQ(s, static_cast<std::int64_t>(p) * (p - 1) / 2);
  EXPECT_FALSE(req.report().algorithm.empty());
  EXPECT_FALSE(req.report().in_network);

  // Split into even and odd ranks; each group reduces its own ranks.
  Communicator sub = comm.split(rank % 2, -rank);  // reversed order inside the group
  ASSERT_TRUE(sub.valid());
  int members = (p + 1 - rank % 2) / 2;
  EXPECT_EQ(sub.size(), members);
  std::int32_t one = rank, total = 0;
  sub.allreduce(&one, &total, 1, DataType::i32, ReduceOp::sum);
  std::int32_t expect = 0;
  for (int r = rank % 2; r < p; r += 2) expect += r;
  EXPECT_EQ(total, expect);
  // Largest key first: rank order inside the group is reversed.
  std::int32_t first = rank;
  sub.broadcast(&first, 1, DataType::i32, 0);
  int last_member = rank % 2 + 2 * (members - 1);
  EXPECT_EQ(first, last_member);
  // And the world still works after the split.
  comm.barrier();
  Communicator none = comm.split(-1, 0);
  EXPECT_FALSE(none.valid());
}

// A barrier on the hosts (dissemination) holds every rank until all have entered, whichever
// rank comes last.
TEST(Collectives, BarrierHoldsEveryRankUntilAllEntered) {
  auto& comm = world();
  const std::string bad = inc::testing::barrier_violations(comm, "host_barrier", comm.size(), [&] {
    EXPECT_FALSE(comm.last_report().in_network);
    EXPECT_EQ(comm.last_report().coll, Collective::barrier);
  });
  EXPECT_EQ(bad, "");
}

TEST(Collectives, InvalidArgumentsAreErrors) {
  auto& comm = world();
  float f = 1;
  auto expect_invalid = [](auto&& fn, const char* what) {
    try {
      fn();
      ADD_FAILURE() << what << ": no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), Error::Kind::invalid_argument) << what << ": " << e.what();
    }
  };
  expect_invalid([&] { comm.allreduce(nullptr, &f, 1, DataType::f32, ReduceOp::sum); }, "null send");
  expect_invalid([&] { comm.allreduce(&f, nullptr, 1, DataType::f32, ReduceOp::sum); }, "null recv");
  expect_invalid([&] { comm.broadcast(&f, 1, DataType::f32, comm.size()); }, "bad root");
  expect_invalid([&] { comm.allreduce(&f, &f, 1, static_cast<DataType>(42), ReduceOp::sum); }, "bad type");
  expect_invalid([&] { comm.allreduce(&f, &f, 1, DataType::f32, static_cast<ReduceOp>(9)); }, "bad op");
  CallOptions o;
  o.algo = "fastest";
  expect_invalid([&] { comm.allreduce(&f, &f, 1, DataType::f32, ReduceOp::sum, o); }, "unknown algo");
  o.algo = "pipelined_chain";
  expect_invalid([&] { comm.allreduce(&f, &f, 1, DataType::f32, ReduceOp::sum, o); }, "wrong algo");
  // Null buffers are fine with count 0, and the communicator is still healthy.
  comm.allreduce(nullptr, nullptr, 0, DataType::f32, ReduceOp::sum);
  comm.barrier();
}

// Under `inc launch --edge` (INC_OFFLOAD=edge): this host's engine runs every collective of the
// tests above, blocking and not, and of sub-communicators, and the reports name it.
TEST(Collectives, OffloadedToTheEdgeEngineWhenAsked) {
  const char* mode = std::getenv("INC_OFFLOAD");
  if (!mode || std::string(mode) != "edge") GTEST_SKIP() << "INC_OFFLOAD is not edge";
  auto& comm = world();
  ASSERT_TRUE(comm.offloaded());
  std::int32_t v = comm.rank() + 1, s = 0;
  comm.allreduce(&v, &s, 1, DataType::i32, ReduceOp::sum);
  EXPECT_EQ(s, comm.size() * (comm.size() + 1) / 2);
  Report r = comm.last_report();
  EXPECT_EQ(r.offload, "edge");
  EXPECT_NE(r.reason.find("offloaded to the edge engine at "), std::string::npos) << r.reason;
  auto req = comm.ibarrier();
  req.wait();
  EXPECT_EQ(req.report().offload, "edge");
  Communicator sub = comm.dup();
  sub.broadcast(&v, 1, DataType::i32, 0);
  EXPECT_EQ(v, 1);
  EXPECT_EQ(sub.last_report().offload, "edge");
  // Registered memory: used in place by the engine.
  auto* buf = static_cast<std::int32_t*>(comm.alloc_registered(1000 * sizeof(std::int32_t)));
  for (int i = 0; i < 1000; ++i) buf[i] = i;
  comm.allreduce(buf, buf, 1000, DataType::i32, ReduceOp::max);
  EXPECT_EQ(buf[999], 999);
  comm.free_registered(buf);
}
