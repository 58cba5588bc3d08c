// References for wide accumulators on the hosts (tests/coll/test_widened.cpp,
// tests/api/mp_host_wide.cpp): decoding and rounding once with the reference codecs of
// tests/numerics (ldexp values, nearest-even by search; MX: numerics::mx_encode, tested against
// a brute-force OCP encoder in tests/numerics/test_mx.cpp), and the expectation of `wide` and
// `widen`: the f32 schedule of the same algorithm (the f32 path) on the decoded inputs, run by
// the local executor, each rank's result rounded once.
#pragma once

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "../numerics/fp8_reference.hpp"
#include "../numerics/h16_reference.hpp"
#include "coll/local_executor.hpp"
#include "numerics/mx.hpp"

namespace inc::testing::wide {

using coll::CollectiveParams;
using coll::LocalBuffers;
using coll::Region;

constexpr std::size_t K = 32;

inline inc::numerics::MxElem mx_elem(DataType t) {
  return t == DataType::mxint8 ? inc::numerics::MxElem::int8 : inc::numerics::MxElem::fp8_e4m3;
}

// Every element of a buffer of t (mxfp8_e4m3 / mxint8: scale byte, then one code per byte).
inline std::vector<double> decode_all(DataType t, const std::vector<std::byte>& buf) {
  std::vector<double> v;
  const auto* b = reinterpret_cast<const std::uint8_t*>(buf.data());
  if (is_mx(t)) {
    for (std::size_t blk = 0; blk < buf.size() / size_of(t); ++blk) {
      double x[K];
      inc::numerics::mx_decode(mx_elem(t), b + blk * size_of(t), b + blk * size_of(t) + 1, K, K, x);
      v.insert(v.end(), x, x + K);
    }
    return v;
  }
  for (std::size_t i = 0; i < buf.size() / size_of(t); ++i) {
    if (t == DataType::e4m3 || t == DataType::e5m2) {
      v.push_back((t == DataType::e4m3 ? fp8::kE4M3 : fp8::kE5M2).value(b[i]));
    } else {
      std::uint16_t h;
      std::memcpy(&h, b + 2 * i, 2);
      v.push_back(h16::decode(h, t == DataType::f16 ? h16::kF16 : h16::kBF16));
    }
  }
  return v;
}

// The values rounded once into t.
inline std::vector<std::byte> round_all(DataType t, const std::vector<double>& v) {
  std::vector<std::byte> out(v.size() / elements_per_unit(t) * size_of(t));
  auto* b = reinterpret_cast<std::uint8_t*>(out.data());
  if (is_mx(t)) {
    for (std::size_t blk = 0; blk < v.size() / K; ++blk) {
      float f[K];
      for (std::size_t k = 0; k < K; ++k) f[k] = static_cast<float>(v[blk * K + k]);
      inc::numerics::mx_encode(mx_elem(t), f, K, K, b + blk * size_of(t), b + blk * size_of(t) + 1);
    }
    return out;
  }
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (t == DataType::e4m3 || t == DataType::e5m2) {
      b[i] = (t == DataType::e4m3 ? fp8::kE4M3 : fp8::kE5M2).round(v[i]);
    } else {
      const std::uint16_t h = h16::round_once(v[i], t == DataType::f16 ? h16::kF16 : h16::kBF16);
      std::memcpy(b + 2 * i, &h, 2);
    }
  }
  return out;
}

// Lossy inputs: N(0,1) x 2^k, k in -6..6, rounded into t (so narrow steps round).
inline std::vector<std::byte> random_input(DataType t, std::uint64_t units, std::mt19937_64& rng) {
  std::normal_distribution<double> g(0, 1);
  std::uniform_int_distribution<int> k(-6, 6);
  std::vector<double> v(units * elements_per_unit(t));
  for (double& x : v) x = std::ldexp(g(rng), k(rng));
  return round_all(t, v);
}

inline std::vector<LocalBuffers> make_buffers(const CollectiveParams& p, const std::vector<std::vector<std::byte>>& in) {
  std::vector<LocalBuffers> b(static_cast<std::size_t>(p.nranks));
  for (int r = 0; r < p.nranks; ++r) {
    auto& x = b[static_cast<std::size_t>(r)];
    if (p.in_place) {
      x.output = in[static_cast<std::size_t>(r)];
    } else {
      x.input = in[static_cast<std::size_t>(r)];
      x.output.assign(coll::output_bytes(p), std::byte{0xA5});
    }
  }
  return b;
}

// Rank `rank`'s result in its buffers (in place, reduce_scatter's shard is at rank x count).
inline std::vector<std::byte> result_of(CollectiveParams p, const LocalBuffers& b, int rank) {
  p.rank = rank;
  const Region res = coll::result_region(p);
  return {b.output.begin() + static_cast<std::ptrdiff_t>(res.offset),
          b.output.begin() + static_cast<std::ptrdiff_t>(res.offset + res.bytes)};
}

// The expectation of wide and widen: the f32 schedule of the same algorithm on the decoded
// inputs (the existing f32 path), each rank's result rounded once.
inline std::vector<std::vector<std::byte>> reference(const CollectiveParams& p, const std::vector<std::vector<std::byte>>& in) {
  CollectiveParams f = p;
  f.dtype = DataType::f32;
  f.count = p.count * elements_per_unit(p.dtype);
  f.in_place = false;
  f.accumulate = Accumulate::narrow;
  std::vector<std::vector<std::byte>> fin;
  for (const auto& x : in) {
    std::vector<std::byte> w;
    for (double v : decode_all(p.dtype, x)) {
      const float y = static_cast<float>(v);
      const auto* c = reinterpret_cast<const std::byte*>(&y);
      w.insert(w.end(), c, c + 4);
    }
    fin.push_back(std::move(w));
  }
  auto bufs = make_buffers(f, fin);
  coll::run_local(f, coll::build_schedules(f), bufs);
  std::vector<std::vector<std::byte>> want;
  for (const auto& b : bufs) {
    std::vector<double> v(b.output.size() / 4);
    for (std::size_t i = 0; i < v.size(); ++i) {
      float y;
      std::memcpy(&y, b.output.data() + 4 * i, 4);
      v[i] = y;
    }
    want.push_back(round_all(p.dtype, v));
  }
  return want;
}

}  // namespace inc::testing::wide
