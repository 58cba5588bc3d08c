// The OCP formats as conversion handlers (docs/EDGE.md, "Handlers"): fp8 (E4M3, E5M2) and the
// Microscaling block formats MXFP8 (E4M3 or E5M2 elements), MXFP6 (E2M3, E3M2), MXFP4 and MXINT8,
// blocks of 32 with an E8M0 scale, and block floating point (MXINT8's elements, blocks of 16)
// (src/numerics/fp8.hpp, mx.hpp; the loops over whole vectors in numerics/minifloat.hpp). f32/f16/bf16 collectives carry them on the wire; the
// receiving handler decodes exactly into the collective's type and passes on to reduce /
// forward, so partial sums accumulate in the collective's (wide) type in the engine and a value
// is rounded to the narrow format only when it goes on a link: once per hop, never per add.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "edge/handler.hpp"
#include "numerics/bitpack.hpp"
#include "numerics/fp8.hpp"
#include "numerics/minifloat.hpp"
#include "numerics/mx.hpp"

namespace inc::edge {

namespace {

bool wide_float(DataType t) { return t == DataType::f32 || t == DataType::f16 || t == DataType::bf16; }

constexpr std::size_t kBatch = 4096;  // elements a conversion passes on per emitted chunk

// The collective's elements [first, first + k) as f32 (exact: f16 and bf16 widen exactly).
void load_f32(DataType t, const std::byte* src, std::size_t first, std::size_t k, float* out) {
  if (t == DataType::f32) {
    std::memcpy(out, src + first * sizeof(float), k * sizeof(float));
    return;
  }
  numerics::half_to_f32(t, src + first * 2, k, out);  // f16/bf16: vectorised (minifloat.hpp)
}

// f32/f16/bf16 data as one fp8 byte per element: the sender rounds each value once (nearest
// even, OCP non-saturating overflow: E4M3 beyond 448 -> NaN, E5M2 beyond 57344 -> infinity);
// the receiver decodes exactly (every E4M3/E5M2 value is an f16, bf16 and f32 value).
class Fp8 final : public Handler {
 public:
  explicit Fp8(DataType wire) : wire_(wire), fmt_(wire == DataType::e4m3 ? numerics::MxElem::fp8_e4m3 : numerics::MxElem::fp8_e5m2) {}
  std::string_view name() const override { return wire_ == DataType::e4m3 ? "e4m3" : "e5m2"; }
  std::string_view summary() const override {
    return wire_ == DataType::e4m3 ? "f32/f16/bf16 data as OCP fp8 E4M3 on the wire (1 B/element, wide sums in the engine)"
                                   : "f32/f16/bf16 data as OCP fp8 E5M2 on the wire (1 B/element, wide sums in the engine)";
  }
  Role role() const override { return Role::convert; }
  bool converts(const coll::CollectiveParams& p) const override { return wide_float(p.dtype); }
  std::uint64_t wire_bytes(const coll::CollectiveParams& p, std::uint64_t bytes) const override {
    return bytes / size_of(p.dtype);
  }
  void encode(const coll::CollectiveParams& p, const std::byte* src, std::uint64_t bytes, std::byte* wire) const override {
    const std::size_t n = bytes / size_of(p.dtype);
    std::vector<float> batch(std::min(n, kBatch));
    for (std::size_t first = 0; first < n; first += kBatch) {
      const std::size_t k = std::min(n - first, kBatch);
      load_f32(p.dtype, src, first, k, batch.data());
      numerics::f32_to_fp8(fmt_, batch.data(), k, reinterpret_cast<std::uint8_t*>(wire + first), numerics::Fp8Overflow::ieee);
    }
  }
  std::size_t payload(Context& ctx, const Chunk& c) const override {
    const DataType t = ctx.msg().params->dtype;
    const std::size_t esz = size_of(t);
    ctx.scratch.resize(std::min(c.bytes, kBatch) * std::max(esz, sizeof(float)));
    auto* f = reinterpret_cast<float*>(ctx.scratch.data());  // the vector's allocation: aligned
    for (std::size_t done = 0; done < c.bytes;) {
      const std::size_t k = std::min(c.bytes - done, kBatch);
      numerics::fp8_to_f32(fmt_, reinterpret_cast<const std::uint8_t*>(c.data + done), k, f);
      if (t != DataType::f32) numerics::f32_to_half(t, f, k, ctx.scratch.data());  // in place (minifloat.hpp)
      ctx.emit(Chunk{(c.offset + done) * esz, ctx.scratch.data(), k * esz});
      done += k;
    }
    return c.bytes;
  }

 private:
  DataType wire_;
  numerics::MxElem fmt_;
};

// An MX block format (or block floating point): per block [E8M0 scale][the block's element
// codes, `bits` each, packed least significant bit first] on the wire (the last block may be
// shorter), encoded as numerics::mx_encode does (shared exponent from the block's maximum,
// elements rounded to nearest even and saturated; a block holding a NaN or an infinity gets
// the NaN scale and arrives as NaNs). The receiver decodes exactly (f32: mx_decode_f32, the
// same values; f16/bf16: narrowed from them once, minifloat.hpp) and passes the values on in the
// collective's type.
class Mx final : public Handler {
 public:
  Mx(std::string name, std::string summary, numerics::MxElem e, std::size_t block, unsigned bits)
      : name_(std::move(name)), summary_(std::move(summary)), elem_(e), block_(block), bits_(bits) {}
  std::string_view name() const override { return name_; }
  std::string_view summary() const override { return summary_; }
  Role role() const override { return Role::convert; }
  bool converts(const coll::CollectiveParams& p) const override { return wide_float(p.dtype); }
  std::uint64_t wire_bytes(const coll::CollectiveParams& p, std::uint64_t bytes) const override {
    const std::uint64_t n = bytes / size_of(p.dtype), full = n / block_, rest = n % block_;
    return full * unit(block_) + (rest ? unit(rest) : 0);
  }
  void encode(const coll::CollectiveParams& p, const std::byte* src, std::uint64_t bytes, std::byte* wire) const override {
    const std::size_t n = bytes / size_of(p.dtype);
    const std::size_t per = std::max<std::size_t>(1, kBatch / block_) * block_;  // whole blocks per batch
    std::vector<float> batch(std::min(n, per));
    std::vector<std::uint8_t> scales(per / block_), codes(per);
    auto* out = reinterpret_cast<std::uint8_t*>(wire);
    for (std::size_t first = 0; first < n; first += per) {
      const std::size_t k = std::min(n - first, per);
      load_f32(p.dtype, src, first, k, batch.data());
      numerics::mx_encode_f32(elem_, batch.data(), k, block_, scales.data(), codes.data());
      for (std::size_t b = 0; b * block_ < k; ++b) {
        const std::size_t m = std::min(block_, k - b * block_);
        *out++ = scales[b];
        out = pack(codes.data() + b * block_, m, out);
      }
    }
  }
  std::size_t payload(Context& ctx, const Chunk& c) const override {
    const std::size_t kUnit = unit(block_);
    const DataType t = ctx.msg().params->dtype;
    const std::size_t esz = size_of(t), n = ctx.msg().bytes / esz;
    if (c.offset % kUnit != 0)
      throw Error(Error::Kind::internal, fmt::format("handler '{}': a chunk that does not start at a block", name()));
    const std::size_t per = std::max<std::size_t>(1, kBatch / block_) * block_;
    std::size_t b = c.offset / kUnit, used = 0, batched = 0, batch_first = b * block_;
    ctx.scratch.resize(per * std::max(esz, sizeof(float)));
    auto* f = reinterpret_cast<float*>(ctx.scratch.data());  // the vector's allocation: aligned
    std::vector<std::uint8_t> codes(block_);
    // f16/bf16: the batch decoded into f32 (exact: a power-of-two scale times an element of at
    // most 8 significant bits, in f32's range or beyond it, where both roundings give infinity),
    // then narrowed in place, one rounding as mx_decode's double rounded to the type.
    auto emit = [&] {
      if (t != DataType::f32) numerics::f32_to_half(t, f, batched, ctx.scratch.data());
      ctx.emit(Chunk{batch_first * esz, ctx.scratch.data(), batched * esz});
    };
    for (; b * block_ < n; ++b) {
      const std::size_t k = std::min(block_, n - b * block_);
      if (c.bytes - used < unit(k)) break;  // the rest of the block comes with more bytes
      const auto* in = reinterpret_cast<const std::uint8_t*>(c.data + used);
      unpack(in + 1, k, codes.data());
      numerics::mx_decode_f32(elem_, in, codes.data(), k, block_, f + batched);
      batched += k;
      used += unit(k);
      if (batched + block_ > per) {
        emit();
        batch_first += batched;
        batched = 0;
      }
    }
    if (batched) emit();
    return used;
  }

 private:
  // Wire bytes of a block of k elements: the scale and the packed codes.
  std::size_t unit(std::size_t k) const { return 1 + (k * bits_ + 7) / 8; }
  // k codes of bits_ bits (their low bits), least significant bit first (numerics/bitpack.hpp).
  std::uint8_t* pack(const std::uint8_t* codes, std::size_t k, std::uint8_t* out) const {
    return numerics::pack_codes(bits_, codes, k, out);
  }
  void unpack(const std::uint8_t* in, std::size_t k, std::uint8_t* codes) const {
    numerics::unpack_codes(bits_, in, k, codes);
  }

  std::string name_, summary_;
  numerics::MxElem elem_;
  std::size_t block_;
  unsigned bits_;
};

}  // namespace

void add_ocp_handlers(HandlerRegistry& r) {
  using numerics::MxElem;
  constexpr std::size_t k = numerics::kMxBlock;
  r.add(std::make_unique<Fp8>(DataType::e4m3));
  r.add(std::make_unique<Fp8>(DataType::e5m2));
  const char* const tail = " + an E8M0 scale per block of 32, wide sums in the engine)";
  r.add(std::make_unique<Mx>("mxfp8", std::string("f32/f16/bf16 data as OCP MXFP8 E4M3 on the wire (32 fp8") + tail, MxElem::fp8_e4m3, k, 8));
  r.add(std::make_unique<Mx>("mxfp8e5m2", std::string("f32/f16/bf16 data as OCP MXFP8 E5M2 on the wire (32 fp8") + tail, MxElem::fp8_e5m2, k, 8));
  r.add(std::make_unique<Mx>("mxfp6e2m3", std::string("f32/f16/bf16 data as OCP MXFP6 E2M3 on the wire (32 x 6 bits") + tail, MxElem::fp6_e2m3, k, 6));
  r.add(std::make_unique<Mx>("mxfp6e3m2", std::string("f32/f16/bf16 data as OCP MXFP6 E3M2 on the wire (32 x 6 bits") + tail, MxElem::fp6_e3m2, k, 6));
  r.add(std::make_unique<Mx>("mxfp4", std::string("f32/f16/bf16 data as OCP MXFP4 E2M1 on the wire (32 x 4 bits") + tail, MxElem::fp4_e2m1, k, 4));
  r.add(std::make_unique<Mx>("mxint8", std::string("f32/f16/bf16 data as OCP MXINT8 on the wire (32 int8") + tail, MxElem::int8, k, 8));
  r.add(std::make_unique<Mx>("bfp16", "f32/f16/bf16 data as block floating point on the wire (16 int8 x 2^-6 + an E8M0 scale per block of 16, wide sums in the engine)", MxElem::int8, 16, 8));
}

}  // namespace inc::edge
