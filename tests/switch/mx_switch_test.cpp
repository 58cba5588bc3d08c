// MX blocks (OCP Microscaling v1.0: one E8M0 scale + 32 elements) aggregated in the switch on
// the seeded simulated network: the switch aligns the block scales (decodes into f32
// accumulators), adds, and re-quantises once at the root (sum_widen) or at every aggregating
// hop (sum). Reference written here, independent of src/numerics: every input block decoded
// exactly (ldexp), summed exactly in double, encoded by the spec's rule (shared exponent =
// floor(log2(max |v|)) - emax_elem, each element the nearest code by brute force, ties to the
// even code, saturating). The inputs keep every f32 partial sum exact, so the switch must give
// exactly the reference's bytes whatever the tree, arrival order and loss.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "src/numerics/mx_type.hpp"
#include "tests/switch/sim_util.hpp"

namespace inc::sw::testing {
namespace {

constexpr std::size_t K = 32;

struct Fmt {
  proto::ElemType wire;
  NumKind narrow, widen;
  int emax;
  bool is_int;   // MXINT8: two's complement x 2^-6
  int ebits, mbits, bias;  // fp elements
  std::size_t bytes() const { return proto::elem_size(wire); }
  int bits() const { return is_int ? 8 : 1 + ebits + mbits; }  // per element code on the wire
  int ncodes() const { return 1 << bits(); }
  int sign_bit() const { return ebits + mbits; }
  bool finite(int c) const {
    if (is_int || bits() < 8) return true;  // MXINT8, FP6, FP4: no inf/NaN codes
    if (ebits == 4) return (c & 0x7f) != 0x7f;  // e4m3: NaN only
    return (c & 0x7c) != 0x7c;                  // e5m2
  }
  double value(int c) const {
    if (is_int) return std::ldexp(double(std::int8_t(c)), -6);
    const int e = (c >> mbits) & ((1 << ebits) - 1), m = c & ((1 << mbits) - 1);
    const double v = e == 0 ? std::ldexp(m, 1 - bias - mbits) : std::ldexp((1 << mbits) + m, e - bias - mbits);
    return (c >> sign_bit()) & 1 ? -v : v;
  }
  // Nearest code (fp: by magnitude, then the sign; ties to the even code), saturating.
  int encode(double v) const {
    int best = 0;
    double bd = INFINITY;
    const double target = is_int ? v : std::fabs(v);
    const int lim = is_int ? 256 : (1 << sign_bit());
    for (int c = 0; c < lim; ++c) {
      if (!finite(c)) continue;
      const double d = std::fabs(value(c) - target);
      if (d < bd || (d == bd && (c & 1) == 0 && (best & 1) == 1)) bd = d, best = c;
    }
    return !is_int && std::signbit(v) ? best | (1 << sign_bit()) : best;
  }
};
const Fmt kMxE4M3{proto::ElemType::mxe4m3, NumKind::mxe4m3, NumKind::mxe4m3_widen, 8, false, 4, 3, 7};
const Fmt kMxE5M2{proto::ElemType::mxe5m2, NumKind::mxe5m2, NumKind::mxe5m2_widen, 15, false, 5, 2, 15};
const Fmt kMxInt8{proto::ElemType::mxint8, NumKind::mxint8, NumKind::mxint8_widen, 0, true, 0, 0, 0};
const Fmt kMxFp4{proto::ElemType::mxfp4, NumKind::mxfp4, NumKind::mxfp4_widen, 2, false, 2, 1, 1};
const Fmt kMxE2M3{proto::ElemType::mxe2m3, NumKind::mxe2m3, NumKind::mxe2m3_widen, 2, false, 2, 3, 1};
const Fmt kMxE3M2{proto::ElemType::mxe3m2, NumKind::mxe3m2, NumKind::mxe3m2_widen, 4, false, 3, 2, 3};

using Blocks = std::vector<std::uint8_t>;  // count blocks of f.bytes() bytes

// Element i's code: bits i x b .. i x b + b - 1 of the block's code bytes (least significant
// bit first; b = 8, 6 or 4), one bit at a time.
int code_at(const Fmt& f, const std::uint8_t* blk, std::size_t i) {
  int c = 0;
  for (int j = 0; j < f.bits(); ++j) {
    const std::size_t bit = i * std::size_t(f.bits()) + std::size_t(j);
    c |= ((blk[1 + bit / 8] >> (bit % 8)) & 1) << j;
  }
  return c;
}
void set_code(const Fmt& f, std::uint8_t* blk, std::size_t i, int c) {  // (the bits were 0)
  for (int j = 0; j < f.bits(); ++j) {
    const std::size_t bit = i * std::size_t(f.bits()) + std::size_t(j);
    blk[1 + bit / 8] = std::uint8_t(blk[1 + bit / 8] | ((c >> j) & 1) << (bit % 8));
  }
}
std::vector<double> decode(const Fmt& f, const Blocks& b) {
  const std::size_t n = b.size() / f.bytes();
  std::vector<double> v(n * K);
  for (std::size_t k = 0; k < n; ++k) {
    const std::uint8_t* blk = b.data() + k * f.bytes();
    for (std::size_t i = 0; i < K; ++i)
      v[k * K + i] = blk[0] == 0xff ? NAN : std::ldexp(f.value(code_at(f, blk, i)), blk[0] - 127);
  }
  return v;
}
Blocks encode(const Fmt& f, const std::vector<double>& v) {
  const std::size_t n = v.size() / K;
  Blocks b(n * f.bytes(), 0);
  for (std::size_t k = 0; k < n; ++k) {
    std::uint8_t* blk = b.data() + k * f.bytes();
    double amax = 0;
    bool special = false;
    for (std::size_t i = 0; i < K; ++i) {
      special |= !std::isfinite(v[k * K + i]);
      amax = std::max(amax, std::fabs(v[k * K + i]));
    }
    if (special) {
      blk[0] = 0xff;
      continue;
    }
    int shared = amax > 0 ? int(std::floor(std::log2(amax))) - f.emax : -127;
    shared = std::clamp(shared, -127, 127);
    blk[0] = std::uint8_t(shared + 127);
    for (std::size_t i = 0; i < K; ++i) {
      set_code(f, blk, i, f.encode(std::ldexp(v[k * K + i], -shared)));
    }
  }
  return b;
}

// Random blocks: scales 2^-3..2^3, element codes of magnitude 0 or in [2^-3, 2^8]: every f32
// partial sum of up to six members is exact (a grid of 2^-9 below 6 x 2^11 x 1.x < 2^15).
Blocks random_blocks(const Fmt& f, std::size_t n, std::mt19937_64& rng) {
  Blocks b(n * f.bytes(), 0);
  for (std::size_t k = 0; k < n; ++k) {
    std::uint8_t* blk = b.data() + k * f.bytes();
    blk[0] = std::uint8_t(124 + rng() % 7);
    for (std::size_t i = 0; i < K; ++i) {
      int c;
      do c = int(rng() % unsigned(f.ncodes()));
      while (!f.finite(c) || (f.value(c) != 0 && (std::fabs(f.value(c)) < 0.125 || std::fabs(f.value(c)) > 256)) ||
             (!f.is_int && f.value(c) == 0 && c != 0));
      set_code(f, blk, i, c);
    }
  }
  return b;
}

std::vector<double> exact_sum(const Fmt& f, const std::vector<Blocks>& in, std::size_t from, std::size_t to) {
  std::vector<double> s(decode(f, in[from]).size(), 0.0);
  for (std::size_t m = from; m < to; ++m) {
    const auto v = decode(f, in[m]);
    for (std::size_t i = 0; i < s.size(); ++i) s[i] += v[i];
  }
  return s;
}

// Narrow (sum): each leaf adding two or more members re-quantises its partial sum; the root
// re-quantises the total. Widen: the total, encoded once.
Blocks reference(const Fmt& f, const std::vector<std::uint16_t>& tree, const std::vector<Blocks>& in, bool widen) {
  if (widen || tree.size() == 1) return encode(f, exact_sum(f, in, 0, in.size()));
  std::vector<double> total(decode(f, in[0]).size(), 0.0);
  std::size_t first = 0;
  for (auto m : tree) {
    const Blocks part = m > 1 ? encode(f, exact_sum(f, in, first, first + m)) : in[first];
    const auto v = decode(f, part);
    for (std::size_t i = 0; i < v.size(); ++i) total[i] += v[i];
    first += m;
  }
  return encode(f, total);
}

std::vector<Blocks> run(Topo& t, NumKind k, const std::vector<Blocks>& in, std::size_t blocks) {
  const auto n = std::uint16_t(in.size());
  std::vector<Blocks> out(n, Blocks(in[0].size()));
  for (std::uint16_t m = 0; m < n; ++m)
    t.c->start(m, WorkerOp::allreduce(k, ReduceKind::sum, cbytes(in[m]), wbytes(out[m]), blocks, n));
  EXPECT_TRUE(t.c->run(100 * kSecond));
  for (std::uint16_t m = 0; m < n; ++m) EXPECT_TRUE(t.c->worker(m).done()) << t.c->worker(m).error().message;
  return out;
}

const std::vector<std::vector<std::uint16_t>> kTrees = {{6}, {1, 5}, {3, 3}, {2, 1, 3}};

// One allreduce of `blocks` random blocks per member on one switch (a one-leaf tree) or the
// two-level tree, 5% loss/dup/reorder: "" when every member got the reference's bytes, else
// which member did not.
std::string check_tree(const Fmt& f, bool widen, const std::vector<std::uint16_t>& tree, std::size_t blocks,
                       std::uint64_t seed, std::uint64_t net_seed) {
  std::uint16_t n = 0;
  for (auto m : tree) n += m;
  std::mt19937_64 rng(seed);
  std::vector<Blocks> in;
  for (std::uint16_t m = 0; m < n; ++m) in.push_back(random_blocks(f, blocks, rng));
  Topo t = tree.size() == 1 ? flat(net_seed, faults_for(0.05), n, 4, 64)
                            : two_level(net_seed, faults_for(0.05), tree, 4, 64);
  const auto out = run(t, widen ? f.widen : f.narrow, in, blocks);
  const Blocks want = reference(f, tree, in, widen);
  for (std::uint16_t m = 0; m < n; ++m)
    if (out[m] != want)
      return std::string(proto::name(f.wire)) + " widen " + std::to_string(widen) + " blocks " +
             std::to_string(blocks) + " leaves " + std::to_string(tree.size()) + " member " + std::to_string(m);
  return "";
}

TEST(MxSwitch, EveryFormatAndPolicyMatchesTheExactReferenceOnEveryTreeUnderLoss) {
  for (const Fmt* f : {&kMxE4M3, &kMxE5M2, &kMxInt8, &kMxFp4})
    for (bool widen : {false, true})
      for (const auto& tree : kTrees) {
        std::uint16_t n = 0;
        for (auto m : tree) n += m;
        // 37 blocks: chunks of 2 blocks (64 cells), the last one short
        ASSERT_EQ(check_tree(*f, widen, tree, 37, n * 13 + widen + 2 * unsigned(f->wire), 20 + n), "");
      }
}

// MXFP6 (E2M3, E3M2: 25-byte blocks, the 32 six-bit codes four per three bytes) under both
// switch policies, 1, 31 and 100 blocks (chunks of 2), one switch and the trees above, 5%
// loss/dup/reorder: every member gets exactly the reference's bytes.
TEST(MxSwitch, Mxfp6EveryPolicyAndBlockCountMatchesTheExactReferenceOnEveryTreeUnderLoss) {
  for (const Fmt* f : {&kMxE2M3, &kMxE3M2})
    for (bool widen : {false, true})
      for (std::size_t blocks : {std::size_t{1}, std::size_t{31}, std::size_t{100}})
        for (const auto& tree : kTrees) {
          std::uint16_t n = 0;
          for (auto m : tree) n += m;
          ASSERT_EQ(check_tree(*f, widen, tree, blocks, n * 13 + widen + 2 * unsigned(f->wire) + 7 * blocks, 40 + n), "");
        }
}

// Edge cases through one switch: a NaN-scale block makes the sum's block NaN (the next block
// unaffected); fp blocks that cancel give the all-zero block (scale code 0); MXINT8's -128
// has no opposite, so its block matches the reference's re-quantisation instead.
TEST(MxSwitch, NaNZeroAndSaturatingBlocks) {
  for (const Fmt* f : {&kMxE4M3, &kMxInt8}) {
    std::mt19937_64 rng(4);
    std::vector<Blocks> in{random_blocks(*f, 3, rng), random_blocks(*f, 3, rng)};
    in[0][0] = 0xff;  // block 0 of member 0: NaN
    in[1].assign(in[0].begin(), in[0].end());
    in[1][0] = 127;
    in[1][f->bytes()] = in[0][f->bytes()];  // block 1: member 1 = -member 0
    for (std::size_t i = 0; i < K; ++i) {
      const int c = in[0][f->bytes() + 1 + i];
      in[1][f->bytes() + 1 + i] = std::uint8_t(f->is_int ? (c == 0x80 ? 0x7f : -std::int8_t(c)) : (c ? c ^ 0x80 : 0));
    }
    Topo t = flat(30, faults_for(0.02), 2, 4, 64);
    const auto out = run(t, f->widen, in, 3);
    EXPECT_EQ(out[0][0], 0xff);
    if (f->is_int) {
      ASSERT_EQ(out[0], reference(*f, {2}, in, true));  // (-128 and 127 leave -1/64 x scale)
    } else {
      EXPECT_EQ(out[0][f->bytes()], 0);  // all-zero block: scale code 0, codes 0
      for (std::size_t i = 0; i < K; ++i) EXPECT_EQ(out[0][f->bytes() + 1 + i], 0) << i;
      ASSERT_EQ(out[0], reference(*f, {2}, in, true));
    }
    EXPECT_EQ(out[1], out[0]);
  }
}

// Bytes per block on the members' links: 33 (mxfp6: 25, mxfp4: 17) both ways, i.e. 1.03
// (0.78, 0.53) per element; a chunk holds slot_elems / 32 blocks (32 f32 accumulators each).
TEST(MxSwitch, BytesOnTheHostLinks) {
  SimFaults none;
  none.jitter = 0;
  for (const Fmt* f : {&kMxE4M3, &kMxFp4, &kMxE2M3, &kMxE3M2}) {
    const std::uint16_t n = 3;
    const std::size_t blocks = 50;
    std::mt19937_64 rng(8);
    std::vector<Blocks> in;
    for (std::uint16_t m = 0; m < n; ++m) in.push_back(random_blocks(*f, blocks, rng));
    Topo t = flat(31, none, n, 4, 128);
    run(t, f->widen, in, blocks);
    const std::uint64_t chunks = (blocks + 3) / 4;
    ASSERT_EQ(f->bytes(), 1 + K * std::size_t(f->bits()) / 8) << proto::name(f->wire);  // 33, 17, 25
    for (std::uint16_t r = 0; r < n; ++r) {
      const auto& rep = t.c->worker(r).report();
      EXPECT_EQ(rep.retransmissions, 0u);
      EXPECT_EQ(rep.bytes_sent, blocks * f->bytes() + (chunks + 1) * proto::kHeaderBytes);
      EXPECT_EQ(rep.bytes_received,
                blocks * f->bytes() + chunks * proto::kHeaderBytes + proto::kHeaderBytes + proto::kJoinInfoBytes);
    }
  }
}

// A switch whose slots hold fewer than 32 cells cannot hold a block's accumulators: the op is
// refused with a reason, not split.
TEST(MxSwitch, SlotsSmallerThanABlockAreRefused) {
  std::mt19937_64 rng(2);
  std::vector<Blocks> in{random_blocks(kMxE4M3, 2, rng), random_blocks(kMxE4M3, 2, rng)};
  Topo t = flat(32, SimFaults{}, 2, 4, 16);
  std::vector<Blocks> out(2, Blocks(in[0].size()));
  for (std::uint16_t m = 0; m < 2; ++m)
    t.c->start(m, WorkerOp::allreduce(NumKind::mxe4m3_widen, ReduceKind::sum, cbytes(in[m]), wbytes(out[m]), 2, 2));
  t.c->run(10 * kSecond);
  for (std::uint16_t m = 0; m < 2; ++m) {
    EXPECT_TRUE(t.c->worker(m).failed());
    EXPECT_NE(t.c->worker(m).error().message.find("32 accumulator cells"), std::string::npos)
        << t.c->worker(m).error().message;
  }
}

// Why MX min/max stay on the hosts (docs/NUMERICS.md "MX blocks in the switch"): the hosts'
// MX kernel re-encodes after every step and re-encoding is not idempotent, so the hosts' bits
// depend on the order of their steps; a switch (IEEE max of the decoded blocks in f32, exact,
// then one encoding) would give one of them. MXINT8, scale 2^0: A = (-128, 3, 0...) x 2^-6
// (-2.0 and 3/64), C = (-64, 3, 0...) x 2^-6. max(max(A, A), C): max(A, A) re-encodes at
// scale 2^1, where 3/64 is 1.5 steps and rounds to 2 (4/64), which then beats C's 3/64;
// max(max(A, C), A) keeps 3/64, as does the exact max encoded once.
TEST(MxSwitch, MaxStaysOnTheHostsBecauseTheirBitsDependOnTheOrderOfTheSteps) {
  const DataType t = DataType::mxint8;
  std::uint8_t a[33] = {127, 0x80, 3}, c[33] = {127, 0xC0, 3}, x[33], y[33], once[33];
  numerics::mx_reduce(t, ReduceOp::max, x, a, a, 1);  // ((A max A) max C)
  numerics::mx_reduce(t, ReduceOp::max, x, x, c, 1);
  numerics::mx_reduce(t, ReduceOp::max, y, a, c, 1);  // ((A max C) max A)
  numerics::mx_reduce(t, ReduceOp::max, y, y, a, 1);
  float v[K];
  numerics::mx_decode_blocks(t, c, 1, v);  // the exact max is C's values (-1 >= -2, 3/64)
  numerics::mx_encode_blocks(t, v, 1, once);
  EXPECT_EQ(std::vector<std::uint8_t>(x, x + 3), (std::vector<std::uint8_t>{127, 0xC0, 4}));
  EXPECT_EQ(std::vector<std::uint8_t>(y, y + 3), (std::vector<std::uint8_t>{127, 0xC0, 3}));
  EXPECT_EQ(std::vector<std::uint8_t>(y, y + 33), std::vector<std::uint8_t>(once, once + 33));
}

}  // namespace
}  // namespace inc::sw::testing
