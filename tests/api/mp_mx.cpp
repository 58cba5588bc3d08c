// The MX block types (DataType::mxfp8_e4m3 ... mxfp6_e3m2; docs/NUMERICS.md "MX as a data type")
// through the public API in real processes: every host algorithm and, under `inc launch
// --switch` / `--topology`, the switch with every accumulator policy. Results are compared byte
// for byte with the reference encoder (numerics::mx_encode, tested against a brute-force OCP
// reference in tests/numerics/test_mx.cpp) applied at the path's rounding points, with this
// file's own block packing; reports must give the path, the policy and the bytes per element.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "inc/inc.hpp"
#include "tests/api/inc_traffic.hpp"
#include "tests/api/mp_util.hpp"
#include "numerics/mx.hpp"

using namespace inc;
using inc::testing::world;

namespace {

constexpr std::size_t K = 32;

numerics::MxElem elem(DataType t) {
  switch (t) {
    case DataType::mxfp8_e5m2: return numerics::MxElem::fp8_e5m2;
    case DataType::mxint8: return numerics::MxElem::int8;
    case DataType::mxfp4: return numerics::MxElem::fp4_e2m1;
    case DataType::mxfp6_e2m3: return numerics::MxElem::fp6_e2m3;
    case DataType::mxfp6_e3m2: return numerics::MxElem::fp6_e3m2;
    default: return numerics::MxElem::fp8_e4m3;
  }
}
unsigned code_bits(DataType t) {
  return t == DataType::mxfp4 ? 4 : (t == DataType::mxfp6_e2m3 || t == DataType::mxfp6_e3m2) ? 6 : 8;
}

// One block: the reference encoder's scale and codes, packed bit by bit (element k at bits
// k*b .. k*b+b-1 of the little-endian code bytes), and back to doubles (exact).
void encode(DataType t, const double* v, std::uint8_t* blk) {
  float f[K];
  for (std::size_t k = 0; k < K; ++k) f[k] = static_cast<float>(v[k]);
  std::uint8_t codes[K];
  numerics::mx_encode(elem(t), f, K, K, blk, codes);
  const unsigned b = code_bits(t);
  std::memset(blk + 1, 0, size_of(t) - 1);
  for (std::size_t k = 0; k < K; ++k)
    for (unsigned j = 0; j < b; ++j)
      if ((codes[k] >> j) & 1) blk[1 + (k * b + j) / 8] |= static_cast<std::uint8_t>(1u << ((k * b + j) % 8));
}
void decode(DataType t, const std::uint8_t* blk, double* v) {
  const unsigned b = code_bits(t);
  std::uint8_t codes[K] = {};
  for (std::size_t k = 0; k < K; ++k)
    for (unsigned j = 0; j < b; ++j)
      if ((blk[1 + (k * b + j) / 8] >> ((k * b + j) % 8)) & 1) codes[k] |= static_cast<std::uint8_t>(1u << j);
  numerics::mx_decode(elem(t), blk, codes, K, K, v);
}

// Lossy inputs: +-(1 + m/8) x 2^e, e in -6..5, encoded per block (the encoding rounds). Every
// decoded value is a multiple of 2^-9 below 2^7, so any f32 sum of up to 8 of them is exact
// whatever the order: the only rounding points are the encoder's.
std::vector<std::uint8_t> lossy_input(DataType t, int rank, std::uint64_t blocks) {
  std::vector<std::uint8_t> buf(blocks * size_of(t));
  double v[K];
  for (std::uint64_t b = 0; b < blocks; ++b) {
    for (std::size_t k = 0; k < K; ++k) {
      const std::uint64_t h = ((b * K + k) * 2654435761u + static_cast<std::uint64_t>(rank) * 97531u) ^ (b >> 3);
      const int e = static_cast<int>(h % 12) - 6;
      v[k] = ((h >> 9) & 1 ? -1.0 : 1.0) * std::ldexp(1.0 + static_cast<double>((h >> 4) % 8) / 8, e);
    }
    encode(t, v, buf.data() + b * size_of(t));
  }
  return buf;
}

// The expected sum: groups of ranks (one group: a single switch or one host add) are summed
// exactly and, when `per_group` and there are several groups (the leaves of a tree), each
// group's sum is re-encoded before the groups' exact sum is encoded once (one group: its sum is
// encoded once; encoding is not idempotent: MXINT8's -127.5 rounds to -128, -2.0 x the scale,
// which the next encoding gives the next scale). `from_zero`: the switch's MX accumulators
// start at +0 (at every hop), so an element that is -0 on every input of a hop sums to +0 (the
// hosts' add and the switch's f32 sums of `wide` keep -0).
std::vector<std::uint8_t> expected_sum(DataType t, const std::vector<std::vector<std::uint8_t>>& in,
                                       const std::vector<std::vector<int>>& groups, bool per_group,
                                       bool from_zero = false) {
  const std::uint64_t blocks = in[0].size() / size_of(t);
  std::vector<std::uint8_t> out(in[0].size());
  double total[K], part[K], x[K];
  for (std::uint64_t b = 0; b < blocks; ++b) {
    for (std::size_t gi = 0; gi < groups.size(); ++gi) {
      const auto& g = groups[gi];
      for (std::size_t ri = 0; ri < g.size(); ++ri) {  // from the first value: -0 stays -0
        decode(t, in[static_cast<std::size_t>(g[ri])].data() + b * size_of(t), x);
        for (std::size_t k = 0; k < K; ++k) part[k] = ri == 0 ? (from_zero ? 0.0 + x[k] : x[k]) : part[k] + x[k];
      }
      if (per_group && groups.size() > 1 && g.size() > 1) {
        std::uint8_t blk[64];
        encode(t, part, blk);
        decode(t, blk, part);
      }
      for (std::size_t k = 0; k < K; ++k) total[k] = gi == 0 ? (from_zero ? 0.0 + part[k] : part[k]) : total[k] + part[k];
    }
    encode(t, total, out.data() + b * size_of(t));
  }
  return out;
}

// The ranks under each aggregating switch: tests/api/tree4.topo puts 0-1 and 2-3 under two
// leaves (INC_TOPOLOGY names the file); INC_SWITCH alone is one switch over every rank.
std::vector<std::vector<int>> switch_groups(int p) {
  const char* topo = std::getenv("INC_TOPOLOGY");
  if (topo && std::string(topo).find("tree4") != std::string::npos) return {{0, 1}, {2, 3}};
  std::vector<std::vector<int>> groups(1);
  for (int r = 0; r < p; ++r) groups[0].push_back(r);
  return groups;
}

constexpr DataType kSwitchTypes[] = {DataType::mxfp8_e4m3, DataType::mxfp8_e5m2, DataType::mxint8,
                                     DataType::mxfp4,      DataType::mxfp6_e2m3, DataType::mxfp6_e3m2};
constexpr DataType kAllTypes[] = {DataType::mxfp8_e4m3, DataType::mxfp8_e5m2, DataType::mxint8,
                                  DataType::mxfp4,      DataType::mxfp6_e2m3, DataType::mxfp6_e3m2};

// In the switch with each policy: widen and wide encode the exact sum once; narrow re-encodes
// at every switch that adds two or more inputs (the leaves of tree4.topo). Every rank holds
// the same bits; the report gives the policy and the bytes per element on this rank's link
// (33/32 for 8-bit, 25/32 for MXFP6, 17/32 for MXFP4, 4 when wide), and the bytes sent agree
// with them.
TEST(IncMx, SwitchSumsAreTheReferenceEncodersBitsUnderEveryPolicy) {
  if (!std::getenv("INC_SWITCH") && !std::getenv("INC_TOPOLOGY")) GTEST_SKIP() << "no switch";
  auto& comm = world();
  const int p = comm.size(), rank = comm.rank();
  const auto groups = switch_groups(p);
  for (DataType t : kSwitchTypes)
    for (Accumulate acc : {Accumulate::narrow, Accumulate::widen, Accumulate::wide})
      for (std::uint64_t blocks : {std::uint64_t{1}, std::uint64_t{31}, std::uint64_t{3125}}) {
        const std::string what = std::string(name(t)) + " " + std::string(name(acc)) + " blocks=" + std::to_string(blocks);
        std::vector<std::vector<std::uint8_t>> in;
        for (int r = 0; r < p; ++r) in.push_back(lossy_input(t, r, blocks));
        std::vector<std::uint8_t> out(in[0].size(), 0xAA);
        CallOptions o;
        o.accumulate = acc;
        comm.barrier();  // start together, so that retransmits do not blur the byte count
        comm.allreduce(in[static_cast<std::size_t>(rank)].data(), out.data(), blocks * K, t, ReduceOp::sum, o);
        const Report rep = comm.last_report();
        ASSERT_TRUE(rep.in_network) << what << ": " << rep.reason;
        EXPECT_EQ(rep.accumulate, acc) << what;
        const double bpe = acc == Accumulate::wide ? 4.0 : static_cast<double>(size_of(t)) / K;
        ASSERT_FALSE(rep.hops.empty()) << what;
        EXPECT_DOUBLE_EQ(rep.hops.front().bytes_per_element, bpe) << what;
        const double n = static_cast<double>(blocks * K);
        if (blocks == 3125) {  // headers: 8 blocks per chunk with the daemon's 256 cells per slot
          EXPECT_GE(static_cast<double>(rep.bytes_sent), n * bpe) << what;
          // First transmissions only: a rank waiting for a slow peer resends and probes (bytes_resent).
          EXPECT_LT(static_cast<double>(inc_test::first_transmission_bytes(rep)), n * bpe * 5 / 4)
              << what << ": " << rep.retransmissions << " retransmissions, " << rep.bytes_resent << " B resent";
        }
        // (wide: f32 cells in the switch take the first input as it is, so -0 stays -0)
        const auto want = expected_sum(t, in, groups, acc == Accumulate::narrow, acc != Accumulate::wide);
        std::uint64_t wrong = 0;
        std::string first;  // the first wrong block, got / want, in hex
        for (std::uint64_t b = 0; b < blocks; ++b)
          if (std::memcmp(out.data() + b * size_of(t), want.data() + b * size_of(t), size_of(t)) != 0 && wrong++ == 0) {
            first = "block " + std::to_string(b) + ":";
            for (const std::vector<std::uint8_t>* v : std::initializer_list<const std::vector<std::uint8_t>*>{&out, &want}) {
              first += "\n ";
              for (std::size_t k = 0; k < size_of(t); ++k) {
                char hex[4];
                std::snprintf(hex, sizeof hex, " %02x", (*v)[b * size_of(t) + k]);
                first += hex;
              }
            }
          }
        EXPECT_EQ(wrong, 0u) << what << "; first " << first;
      }
  // MX max has no switch arithmetic: the hosts reduce it and the report says why.
  std::vector<std::uint8_t> x(size_of(DataType::mxfp6_e2m3) * 4), r(x.size());
  comm.allreduce(x.data(), r.data(), 4 * K, DataType::mxfp6_e2m3, ReduceOp::max);
  EXPECT_FALSE(comm.last_report().in_network);
  EXPECT_NE(comm.last_report().reason.find("has no max for them"), std::string::npos) << comm.last_report().reason;
}

// Every host algorithm, every MX type: (1) in pairs of ranks (a split), lossy inputs: each
// algorithm adds once, so the result is the encoding of the exact sum, byte for byte; (2) the
// whole communicator, inputs whose every partial sum the format holds exactly (0 or +-2^s on
// at most 3 ranks per element): sum, avg, min and max give the reference encoder's bits of the
// exact result whatever the order of the steps. MX on every host link: 33/32 B/element.
TEST(MxApi, HostAlgorithmsAreTheReferenceEncodersBits) {
  auto& comm = world();
  const int p = comm.size(), rank = comm.rank();
  Communicator pair = comm.split(rank / 2, rank);
  const int q = pair.size(), me = pair.rank();
  for (const char* algo : {"ring", "recursive_doubling", "rabenseifner"})
    for (DataType t : kAllTypes) {
      const std::string what = std::string(name(t)) + " " + algo;
      CallOptions o;
      o.algo = algo;
      const std::uint64_t blocks = 1001;
      std::vector<std::vector<std::uint8_t>> in;
      for (int r = 0; r < q; ++r) in.push_back(lossy_input(t, 2 * (rank / 2) + r, blocks));
      std::vector<std::uint8_t> out(in[0].size());
      pair.allreduce(in[static_cast<std::size_t>(me)].data(), out.data(), blocks * K, t, ReduceOp::sum, o);
      Report rep = pair.last_report();
      EXPECT_FALSE(rep.in_network) << what;
      ASSERT_FALSE(rep.hops.empty()) << what;
      EXPECT_DOUBLE_EQ(rep.hops.front().bytes_per_element, static_cast<double>(size_of(t)) / K) << what;
      std::vector<std::vector<int>> one(1);
      for (int r = 0; r < q; ++r) one[0].push_back(r);
      EXPECT_EQ(out, expected_sum(t, in, one, false)) << what;
      // (2) all ranks, exact at every step
      // sums: 0 or +-2^(7 - b mod 9) (one power of two per block b), nonzero on 3 ranks per
      // element; min/max: 0, +-1, +-2 times 2^-(b mod 5). Never -0 (IEEE min/max order it).
      auto value = [&](int r, std::uint64_t e, ReduceOp op) -> double {
        const std::uint64_t b = e / K;
        const double sign = ((e * 7 + static_cast<std::uint64_t>(r) * 5) / 3) % 2 ? -1.0 : 1.0;
        if (op == ReduceOp::sum || op == ReduceOp::avg) {
          const bool on = (static_cast<std::uint64_t>(r) + e) % static_cast<std::uint64_t>(p) < 3;
          return on ? std::ldexp(sign, 7 - static_cast<int>(b % 9)) : 0.0;
        }
        const auto m = static_cast<int>((static_cast<std::uint64_t>(r) + e) % 3);
        return m ? std::ldexp(sign * m, -static_cast<int>(b % 5)) : 0.0;
      };
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg, ReduceOp::min, ReduceOp::max}) {
        const std::uint64_t nb = 257;
        std::vector<std::uint8_t> x(nb * size_of(t)), y(x.size()), want(x.size());
        double v[K], w[K];
        for (std::uint64_t b = 0; b < nb; ++b) {
          for (std::size_t k = 0; k < K; ++k) {
            const std::uint64_t e = b * K + k;
            v[k] = value(rank, e, op);
            double acc = value(0, e, op);
            for (int r = 1; r < p; ++r)
              acc = op == ReduceOp::min ? std::min(acc, value(r, e, op)) : op == ReduceOp::max ? std::max(acc, value(r, e, op)) : acc + value(r, e, op);
            w[k] = op == ReduceOp::avg ? static_cast<double>(static_cast<float>(acc) / static_cast<float>(p)) : acc;
          }
          encode(t, v, x.data() + b * size_of(t));
          encode(t, w, want.data() + b * size_of(t));
        }
        comm.allreduce(x.data(), y.data(), nb * K, t, op, o);
        EXPECT_FALSE(comm.last_report().in_network) << what;
        EXPECT_EQ(y, want) << what << " " << name(op);
      }
    }
}

// Counts are elements, a multiple of 32; anything else is refused before any byte moves.
TEST(MxApi, CountNotAMultipleOf32IsRefused) {
  auto& comm = world();
  std::vector<std::uint8_t> x(33 * 2), r(x.size());
  try {
    comm.allreduce(x.data(), r.data(), 33, DataType::mxfp8_e4m3, ReduceOp::sum);
    ADD_FAILURE() << "count 33 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), Error::Kind::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("not a multiple of 32"), std::string::npos) << e.what();
  }
  std::int32_t one = 1, all = 0;  // still usable
  comm.allreduce(&one, &all, 1, DataType::i32, ReduceOp::sum);
  EXPECT_EQ(all, comm.size());
}

}  // namespace
