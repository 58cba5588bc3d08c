#include "tools/bench_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "numerics/mx_type.hpp"
#include "numerics/reduce.hpp"

namespace inc::tools {

namespace {

bool is_float(DataType t) { return is_floating(t); }
bool is_signed_int(DataType t) {
  return t == DataType::i8 || t == DataType::i32 || t == DataType::i64;
}
// Largest integer magnitude up to which every integer is exact in the float type.
std::int64_t exact_limit(DataType t) {
  switch (t) {
    case DataType::f64: return std::int64_t{1} << 53;
    case DataType::f32: return std::int64_t{1} << 24;
    case DataType::f16: return std::int64_t{1} << 11;
    case DataType::bf16: return std::int64_t{1} << 8;
    case DataType::e4m3: return std::int64_t{1} << 4;
    case DataType::e5m2: return std::int64_t{1} << 3;
    default: return 0;
  }
}
// Smallest and largest binary exponent of a power of two the float type holds exactly
// (subnormals included).
int min_exp(DataType t) {
  if (t == DataType::e4m3) return -9;
  if (t == DataType::e5m2) return -16;
  return t == DataType::f16 ? -24 : t == DataType::f32 || t == DataType::bf16 ? -133 : -1074;
}
int max_exp(DataType t) {
  if (t == DataType::e4m3) return 8;
  if (t == DataType::e5m2) return 15;
  return t == DataType::f16 ? 15 : t == DataType::f64 ? 1023 : 127;
}

// i4: a byte holds two elements; the reference combines every rank's input byte nibble by
// nibble (sum and prod modulo 16, signed min/max, avg = wrapped sum truncated by p).
int nibble(unsigned byte, int hi) { return static_cast<int>(((byte >> (4 * hi)) & 0xf) ^ 8) - 8; }

std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Store an integer as the type: exact conversion for floats within exact_limit, two's-complement
// truncation (wrap-around) for integer types.
void store_int(DataType t, std::size_t esz, std::int64_t v, std::byte* dst) {
  if (is_float(t)) {
    numerics::store_from_double(t, dst, 0, static_cast<double>(v));
    return;
  }
  const auto u = static_cast<std::uint64_t>(v);
  std::memcpy(dst, &u, esz);  // little-endian: the low bytes
}

}  // namespace

BenchPattern::BenchPattern(Collective coll, DataType t, ReduceOp op, int nranks, std::uint64_t salt)
    : coll_(coll),
      t_(t),
      op_(op),
      p_(std::max(1, nranks)),
      salt_(splitmix(salt ^ 0x1234567ull)),
      esz_(size_of(t)),
      float_(is_float(t)),
      movement_(coll != Collective::allreduce && coll != Collective::reduce_scatter) {
  if (is_mx(t)) {  // the largest |partial sum| whose integers the element format holds at any scale
    mx_window_ = std::min(p_, t == DataType::mxfp4 ? 3 : t == DataType::mxint8 ? 127 : 7);
    return;
  }
  if (movement_ || op == ReduceOp::prod) return;
  const std::int64_t p = p_;
  if (op == ReduceOp::sum || op == ReduceOp::avg) {
    if (!float_) {  // wrap-around: any values, exact modulo 2^bits
      g_step_ = 0x9E3779B1;
      for (int r = 0; r < p_; ++r) g_sum_ += static_cast<std::int64_t>(static_cast<std::uint64_t>(r) * 0x9E3779B1u);
      h_lo_ = 0;
      h_span_ = 0;  // full 64-bit random
      return;
    }
    // |value| <= m with p x m <= exact limit: the sum of all ranks is exact in any order.
    const std::int64_t m = exact_limit(t) / p;
    const std::int64_t G = std::max<std::int64_t>(1, std::min<std::int64_t>(p, m));
    const std::int64_t hm = std::max<std::int64_t>(0, m - G / 2 - 1);
    h_lo_ = -hm;
    h_span_ = 2 * hm + 1;
    g_step_ = 1;
    g_min_ = -(G / 2);  // g(r) = (r mod G) - G/2
    for (int r = 0; r < p_; ++r) g_sum_ += (r % G) - G / 2;
    g_max_ = G;  // number of distinct g values
    return;
  }
  // min / max: h(i) + ((r + i) mod p) mod G, G distinct rank values.
  std::int64_t half;
  if (float_) half = exact_limit(t) / 2;
  else if (is_signed_int(t)) half = esz_ >= 8 ? (std::int64_t{1} << 61) : (std::int64_t{1} << (8 * esz_ - 2));
  else half = esz_ >= 8 ? (std::int64_t{1} << 62) : (std::int64_t{1} << (8 * esz_ - 1));
  const std::int64_t G = std::max<std::int64_t>(1, std::min<std::int64_t>(p, half / 2));
  g_max_ = G;
  if (float_ || is_signed_int(t)) {
    h_lo_ = -half / 2;
    h_span_ = half;
  } else {
    h_lo_ = 0;
    h_span_ = half;
  }
}

std::uint64_t BenchPattern::hash(std::uint64_t a, std::uint64_t b) const {
  return splitmix(salt_ ^ splitmix(a * 0xD1B54A32D192ED03ull + b));
}

std::int64_t BenchPattern::int_input(int rank, std::uint64_t i) const {
  const std::uint64_t hv = hash(0, i);
  if (op_ == ReduceOp::sum || op_ == ReduceOp::avg) {
    if (!float_) return static_cast<std::int64_t>(hv + static_cast<std::uint64_t>(rank) * 0x9E3779B1u);
    const std::int64_t h = h_lo_ + static_cast<std::int64_t>(hv % static_cast<std::uint64_t>(h_span_));
    return h + (rank % g_max_) + g_min_;
  }
  // min / max
  const std::int64_t h = h_lo_ + static_cast<std::int64_t>(hv % static_cast<std::uint64_t>(h_span_));
  return h + static_cast<std::int64_t>((static_cast<std::uint64_t>(rank) + i) % static_cast<std::uint64_t>(p_)) % g_max_;
}

double BenchPattern::prod_input(int rank, std::uint64_t i) const {
  const std::uint64_t hv = hash(static_cast<std::uint64_t>(rank) + 1, i);
  if (!float_) {
    static constexpr std::int64_t kSigned[4] = {1, 2, 3, -1};
    static constexpr std::int64_t kUnsigned[4] = {1, 2, 3, 5};
    return static_cast<double>((is_signed_int(t_) ? kSigned : kUnsigned)[hv & 3]);
  }
  // +-2^e with e in {-1, 0, 1}; products stay exact powers of two while p fits the exponent range.
  const bool wide = p_ <= std::min(-min_exp(t_), max_exp(t_));
  const int e = wide ? static_cast<int>((hv >> 2) % 3) - 1 : 0;
  return std::ldexp((hv & 1) ? -1.0 : 1.0, e);
}

double BenchPattern::mx_value(int rank, std::uint64_t e) const {
  const int s = static_cast<int>(hash(4, e / kMxBlockElements) % 41) - 20;  // the block's power of two
  const double sign = (hash(static_cast<std::uint64_t>(rank) + 8, e) & 1) ? -1.0 : 1.0;
  if (op_ == ReduceOp::prod) return sign;  // +-1: every product exact
  const std::uint64_t slot = (static_cast<std::uint64_t>(rank) + hash(2, e)) % static_cast<std::uint64_t>(p_);
  return slot < static_cast<std::uint64_t>(mx_window_) ? std::ldexp(sign, s) : 0.0;
}

void BenchPattern::mx_store_input(int rank, std::uint64_t i, std::byte* dst) const {
  float v[kMxBlockElements];
  for (std::size_t k = 0; k < kMxBlockElements; ++k) v[k] = static_cast<float>(mx_value(rank, i * kMxBlockElements + k));
  numerics::mx_encode_blocks(t_, v, 1, dst);
}

void BenchPattern::mx_expected(std::uint64_t i, std::byte* dst) const {
  float v[kMxBlockElements];
  for (std::size_t k = 0; k < kMxBlockElements; ++k) {
    const std::uint64_t e = i * kMxBlockElements + k;
    double acc = mx_value(0, e);  // exact in double: integers times a power of two
    for (int r = 1; r < p_; ++r) {
      const double x = mx_value(r, e);
      acc = op_ == ReduceOp::prod ? acc * x : op_ == ReduceOp::min ? std::min(acc, x)
            : op_ == ReduceOp::max ? std::max(acc, x) : acc + x;
    }
    // avg: the exact sum divided once in f32, as the hosts' MX divide does, then encoded
    v[k] = op_ == ReduceOp::avg ? static_cast<float>(acc) / static_cast<float>(p_) : static_cast<float>(acc);
  }
  numerics::mx_encode_blocks(t_, v, 1, dst);
}

void BenchPattern::store_input(int rank, std::uint64_t i, std::byte* dst) const {
  if (movement_) {  // esz_ bytes of pseudo-random bits (an MX block: 33)
    std::uint64_t bits = hash(static_cast<std::uint64_t>(rank) + 1, i);
    for (std::size_t off = 0; off < esz_; off += 8, bits = splitmix(bits))
      std::memcpy(dst + off, &bits, std::min<std::size_t>(8, esz_ - off));
    return;
  }
  if (is_mx(t_)) return mx_store_input(rank, i, dst);
  if (op_ == ReduceOp::prod) {
    const double v = prod_input(rank, i);
    if (float_) numerics::store_from_double(t_, dst, 0, v);
    else store_int(t_, esz_, static_cast<std::int64_t>(v), dst);
    return;
  }
  store_int(t_, esz_, int_input(rank, i), dst);
}

void BenchPattern::fill(int rank, std::byte* buf, std::uint64_t first, std::uint64_t n) const {
  for (std::uint64_t k = 0; k < n; ++k) store_input(rank, first + k, buf + k * esz_);
}

void BenchPattern::expected_reduction(std::uint64_t i, std::byte* dst) const {
  if (is_mx(t_)) return mx_expected(i, dst);
  if (t_ == DataType::i4) {
    unsigned out = 0;
    for (int hi = 0; hi < 2; ++hi) {
      long acc = 0;
      for (int r = 0; r < p_; ++r) {
        std::byte in;
        store_input(r, i, &in);
        const long v = nibble(static_cast<unsigned>(in), hi);
        if (r == 0) acc = v;
        else if (op_ == ReduceOp::prod) acc = ((acc * v) % 16 + 16) % 16;
        else if (op_ == ReduceOp::min) acc = std::min(acc, v);
        else if (op_ == ReduceOp::max) acc = std::max(acc, v);
        else acc = ((acc + v) % 16 + 16) % 16;
        acc = acc >= 8 ? acc - 16 : acc;  // keep the signed 4-bit value
      }
      if (op_ == ReduceOp::avg) acc /= p_;
      out |= (static_cast<unsigned>(acc) & 0xfu) << (4 * hi);
    }
    *dst = static_cast<std::byte>(out);
    return;
  }
  if (op_ == ReduceOp::prod) {
    if (float_) {
      double v = 1;  // exact: powers of two within the type's range
      for (int r = 0; r < p_; ++r) v *= prod_input(r, i);
      numerics::store_from_double(t_, dst, 0, v);
    } else {
      std::uint64_t v = 1;  // wrap-around, exact modulo 2^bits in any order
      for (int r = 0; r < p_; ++r) v *= static_cast<std::uint64_t>(static_cast<std::int64_t>(prod_input(r, i)));
      store_int(t_, esz_, static_cast<std::int64_t>(v), dst);
    }
    return;
  }
  if (op_ == ReduceOp::min || op_ == ReduceOp::max) {
    const std::int64_t h = h_lo_ + static_cast<std::int64_t>(hash(0, i) % static_cast<std::uint64_t>(h_span_));
    store_int(t_, esz_, op_ == ReduceOp::min ? h : h + g_max_ - 1, dst);
    return;
  }
  // sum / avg: p x h(i) + sum of g(r), exact (floats) or modulo 2^64 then truncated (integers).
  std::uint64_t sum;
  if (float_) {
    const std::int64_t h = h_lo_ + static_cast<std::int64_t>(hash(0, i) % static_cast<std::uint64_t>(h_span_));
    sum = static_cast<std::uint64_t>(h * p_ + g_sum_);
  } else {
    sum = hash(0, i) * static_cast<std::uint64_t>(p_) + static_cast<std::uint64_t>(g_sum_);
  }
  if (op_ == ReduceOp::sum) {
    store_int(t_, esz_, static_cast<std::int64_t>(sum), dst);
    return;
  }
  // avg: the sum divided by p. Floats: the exact sum divided once (f32 and f64 in their own
  // precision, as IEEE division is correctly rounded; 16-bit types rounded once from double).
  // Integers: the wrapped sum in the type, divided with truncation toward zero.
  const auto s = static_cast<std::int64_t>(sum);
  switch (t_) {
    case DataType::f64: {
      const double v = static_cast<double>(s) / static_cast<double>(p_);
      std::memcpy(dst, &v, 8);
      return;
    }
    case DataType::f32: {
      const float v = static_cast<float>(s) / static_cast<float>(p_);
      std::memcpy(dst, &v, 4);
      return;
    }
    case DataType::f16:
    case DataType::bf16:
    case DataType::e4m3:
    case DataType::e5m2:
      numerics::store_from_double(t_, dst, 0, static_cast<double>(s) / static_cast<double>(p_));
      return;
    case DataType::i4:  // handled above
    case DataType::mxfp8_e4m3: case DataType::mxfp8_e5m2: case DataType::mxint8:
    case DataType::mxfp4: case DataType::mxfp6_e2m3: case DataType::mxfp6_e3m2: return;
    case DataType::i8: store_int(t_, esz_, static_cast<std::int8_t>(s) / p_, dst); return;
    case DataType::u8: store_int(t_, esz_, static_cast<std::uint8_t>(s) / p_, dst); return;
    case DataType::i32: store_int(t_, esz_, static_cast<std::int32_t>(s) / p_, dst); return;
    case DataType::u32: store_int(t_, esz_, static_cast<std::uint32_t>(s) / static_cast<std::uint32_t>(p_), dst); return;
    case DataType::i64: store_int(t_, esz_, s / p_, dst); return;
    case DataType::u64:
      store_int(t_, esz_, static_cast<std::int64_t>(sum / static_cast<std::uint64_t>(p_)), dst);
      return;
  }
}

std::uint64_t BenchPattern::count_wrong(int rank, std::uint64_t count, int root,
                                        const std::byte* out) const {
  std::byte want[64];  // one unit: up to 8 bytes, an MX block 33
  std::uint64_t wrong = 0;
  auto cmp = [&](const std::byte* got) {
    if (std::memcmp(got, want, esz_) != 0) ++wrong;
  };
  const auto p = static_cast<std::uint64_t>(p_);
  switch (coll_) {
    case Collective::allreduce:
      for (std::uint64_t i = 0; i < count; ++i) {
        expected_reduction(i, want);
        cmp(out + i * esz_);
      }
      break;
    case Collective::reduce_scatter:
      for (std::uint64_t i = 0; i < count; ++i) {
        expected_reduction(static_cast<std::uint64_t>(rank) * count + i, want);
        cmp(out + i * esz_);
      }
      break;
    case Collective::allgather:
      for (std::uint64_t r = 0; r < p; ++r)
        for (std::uint64_t i = 0; i < count; ++i) {
          store_input(static_cast<int>(r), i, want);
          cmp(out + (r * count + i) * esz_);
        }
      break;
    case Collective::broadcast:
      for (std::uint64_t i = 0; i < count; ++i) {
        store_input(root, i, want);
        cmp(out + i * esz_);
      }
      break;
    case Collective::alltoall:
      for (std::uint64_t r = 0; r < p; ++r)
        for (std::uint64_t i = 0; i < count; ++i) {
          store_input(static_cast<int>(r), static_cast<std::uint64_t>(rank) * count + i, want);
          cmp(out + (r * count + i) * esz_);
        }
      break;
    case Collective::barrier:
      break;
  }
  return wrong;
}

}  // namespace inc::tools
