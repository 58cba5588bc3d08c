// The OCP formats as conversion handlers (docs/EDGE.md, "Handlers"): fp8 (E4M3, E5M2) and the
// Microscaling block formats MXFP8 (E4M3 elements) and MXINT8, blocks of 32 with an E8M0 scale
// (src/numerics/fp8.hpp, mx.hpp). f32/f16/bf16 collectives carry them on the wire; the
// receiving handler decodes exactly into the collective's type and passes on to reduce /
// forward, so partial sums accumulate in the collective's (wide) type in the engine and a value
// is rounded to the narrow format only when it goes on a link: once per hop, never per add.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "edge/handler.hpp"
#include "numerics/fp8.hpp"
#include "numerics/mx.hpp"
#include "numerics/reduce.hpp"

namespace inc::edge {

namespace {

bool wide_float(DataType t) { return t == DataType::f32 || t == DataType::f16 || t == DataType::bf16; }

constexpr std::size_t kBatch = 4096;  // elements a conversion passes on per emitted chunk

// f32/f16/bf16 data as one fp8 byte per element: the sender rounds each value once (nearest
// even, OCP non-saturating overflow: E4M3 beyond 448 -> NaN, E5M2 beyond 57344 -> infinity);
// the receiver decodes exactly (every E4M3/E5M2 value is an f16, bf16 and f32 value).
class Fp8 final : public Handler {
 public:
  explicit Fp8(DataType wire) : wire_(wire) {}
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
    for (std::size_t i = 0; i < n; ++i) {
      const double x = numerics::load_as_double(p.dtype, src, i);
      wire[i] = static_cast<std::byte>(wire_ == DataType::e4m3 ? numerics::f64_to_e4m3(x) : numerics::f64_to_e5m2(x));
    }
  }
  std::size_t payload(Context& ctx, const Chunk& c) const override {
    const DataType t = ctx.msg().params->dtype;
    const std::size_t esz = size_of(t);
    ctx.scratch.resize(std::min(c.bytes, kBatch) * esz);
    for (std::size_t done = 0; done < c.bytes;) {
      const std::size_t k = std::min(c.bytes - done, kBatch);
      for (std::size_t i = 0; i < k; ++i) {
        const auto b = static_cast<std::uint8_t>(c.data[done + i]);
        const float v = wire_ == DataType::e4m3 ? numerics::e4m3_to_f32(b) : numerics::e5m2_to_f32(b);
        numerics::store_from_double(t, ctx.scratch.data(), i, v);
      }
      ctx.emit(Chunk{(c.offset + done) * esz, ctx.scratch.data(), k * esz});
      done += k;
    }
    return c.bytes;
  }

 private:
  DataType wire_;
};

// An MX block format: per 32 elements [E8M0 scale][32 element codes] on the wire (the last
// block may be shorter), encoded by numerics::mx_encode (shared exponent from the block's
// maximum, elements rounded to nearest even and saturated; a block holding a NaN or an infinity
// gets the NaN scale and arrives as NaNs). The receiver decodes exactly (mx_decode) and passes
// the values on in the collective's type.
class Mx final : public Handler {
 public:
  explicit Mx(numerics::MxElem e) : elem_(e) {}
  std::string_view name() const override { return elem_ == numerics::MxElem::int8 ? "mxint8" : "mxfp8"; }
  std::string_view summary() const override {
    return elem_ == numerics::MxElem::int8
               ? "f32/f16/bf16 data as OCP MXINT8 on the wire (32 int8 + an E8M0 scale per block, wide sums in the engine)"
               : "f32/f16/bf16 data as OCP MXFP8 E4M3 on the wire (32 fp8 + an E8M0 scale per block, wide sums in the engine)";
  }
  Role role() const override { return Role::convert; }
  bool converts(const coll::CollectiveParams& p) const override { return wide_float(p.dtype); }
  std::uint64_t wire_bytes(const coll::CollectiveParams& p, std::uint64_t bytes) const override {
    const std::uint64_t n = bytes / size_of(p.dtype);
    return (n + numerics::kMxBlock - 1) / numerics::kMxBlock + n;
  }
  void encode(const coll::CollectiveParams& p, const std::byte* src, std::uint64_t bytes, std::byte* wire) const override {
    const std::size_t n = bytes / size_of(p.dtype);
    float block[numerics::kMxBlock];
    for (std::size_t first = 0; first < n; first += numerics::kMxBlock) {
      const std::size_t k = std::min(numerics::kMxBlock, n - first);
      for (std::size_t i = 0; i < k; ++i) block[i] = static_cast<float>(numerics::load_as_double(p.dtype, src, first + i));
      auto* out = reinterpret_cast<std::uint8_t*>(wire + first / numerics::kMxBlock * (numerics::kMxBlock + 1));
      numerics::mx_encode(elem_, block, k, numerics::kMxBlock, out, out + 1);
    }
  }
  std::size_t payload(Context& ctx, const Chunk& c) const override {
    constexpr std::size_t kUnit = numerics::kMxBlock + 1;
    const DataType t = ctx.msg().params->dtype;
    const std::size_t esz = size_of(t), n = ctx.msg().bytes / esz;
    if (c.offset % kUnit != 0)
      throw Error(Error::Kind::internal, fmt::format("handler '{}': a chunk that does not start at a block", name()));
    std::size_t b = c.offset / kUnit, used = 0, batched = 0, batch_first = b * numerics::kMxBlock;
    ctx.scratch.resize(kBatch * esz);
    double values[numerics::kMxBlock];
    for (; b * numerics::kMxBlock < n; ++b) {
      const std::size_t k = std::min(numerics::kMxBlock, n - b * numerics::kMxBlock);
      if (c.bytes - used < k + 1) break;  // the rest of the block comes with more bytes
      const auto* in = reinterpret_cast<const std::uint8_t*>(c.data + used);
      numerics::mx_decode(elem_, in, in + 1, k, numerics::kMxBlock, values);
      for (std::size_t i = 0; i < k; ++i) numerics::store_from_double(t, ctx.scratch.data(), batched + i, values[i]);
      batched += k;
      used += k + 1;
      if (batched + numerics::kMxBlock > kBatch) {
        ctx.emit(Chunk{batch_first * esz, ctx.scratch.data(), batched * esz});
        batch_first += batched;
        batched = 0;
      }
    }
    if (batched) ctx.emit(Chunk{batch_first * esz, ctx.scratch.data(), batched * esz});
    return used;
  }

 private:
  numerics::MxElem elem_;
};

}  // namespace

void add_ocp_handlers(HandlerRegistry& r) {
  r.add(std::make_unique<Fp8>(DataType::e4m3));
  r.add(std::make_unique<Fp8>(DataType::e5m2));
  r.add(std::make_unique<Mx>(numerics::MxElem::fp8_e4m3));
  r.add(std::make_unique<Mx>(numerics::MxElem::int8));
}

}  // namespace inc::edge
