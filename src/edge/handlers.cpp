// The built-in handlers (handler.hpp): reduce and forward apply a message's data in place;
// bf16, f16 and int8 convert the wire format (docs/EDGE.md, "Handlers").
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "edge/handler.hpp"
#include "numerics/half.hpp"
#include "numerics/events.hpp"
#include "numerics/reduce.hpp"

namespace inc::edge {

namespace {

void check_range(const Context& ctx, const Chunk& c, std::size_t n, std::string_view who) {
  if (c.offset > ctx.msg().bytes || n > ctx.msg().bytes - c.offset)
    throw Error(Error::Kind::internal,
                fmt::format("handler '{}': bytes [{}, +{}) beyond the {} B of its receive op", who, c.offset, n,
                            ctx.msg().bytes));
}

// dst = operand (op) chunk, in place, for a receive-reduce step: every type and op, through the
// numerics kernels (the host runtime's reduction).
class Reduce final : public Handler {
 public:
  std::string_view name() const override { return "reduce"; }
  std::string_view summary() const override { return "reduce each chunk into place (every type and op)"; }
  Role role() const override { return Role::apply; }
  // In the op's arithmetic: the call's type, or f32 partial sums (a wide accumulator), or i32 limbs.
  std::size_t alignment(const coll::RecvMessage& m) const override {
    return unit_alignment(coll::arithmetic(m).dtype);
  }
  std::size_t payload(Context& ctx, const Chunk& c) const override {
    const auto& m = ctx.msg();
    if (m.kind != coll::OpKind::recv_reduce)
      throw Error(Error::Kind::internal, "handler 'reduce' was given a plain receive");
    const auto a = coll::arithmetic(m);
    const std::size_t esz = size_of(a.dtype);
    const std::size_t n = c.bytes - c.bytes % esz;
    check_range(ctx, c, n, name());
    const std::uint64_t events =
        numerics::reduce_counted(a.dtype, a.op, m.dst + c.offset, m.operand + c.offset, c.data, n / esz);
    if (m.events) *m.events += events;
    return n;
  }
};

// Each chunk into place for a plain receive: the data that the schedule's dependent send
// forwards (the next hop of a ring, chain or tree) or that is the result.
class Forward final : public Handler {
 public:
  std::string_view name() const override { return "forward"; }
  std::string_view summary() const override { return "place each chunk where the schedule forwards it from"; }
  Role role() const override { return Role::apply; }
  std::size_t payload(Context& ctx, const Chunk& c) const override {
    check_range(ctx, c, c.bytes, name());
    if (c.bytes) std::memcpy(ctx.msg().dst + c.offset, c.data, c.bytes);
    return c.bytes;
  }
};

bool is_half_or_float(DataType t) { return t == DataType::f32 || t == DataType::f16 || t == DataType::bf16; }

float load_float(DataType t, const std::byte* p, std::size_t i) {
  if (t == DataType::f32) {
    float f;
    std::memcpy(&f, p + 4 * i, 4);
    return f;
  }
  std::uint16_t h;
  std::memcpy(&h, p + 2 * i, 2);
  return t == DataType::f16 ? numerics::f16_to_f32(h) : numerics::bf16_to_f32(h);
}

void store_float(DataType t, std::byte* p, std::size_t i, float f) {
  if (t == DataType::f32) {
    std::memcpy(p + 4 * i, &f, 4);
    return;
  }
  const std::uint16_t h = t == DataType::f16 ? numerics::f32_to_f16(f) : numerics::f32_to_bf16(f);
  std::memcpy(p + 2 * i, &h, 2);
}

constexpr std::size_t kBatchElements = 4096;  // elements a conversion passes on per chunk

// f32 data as a 16-bit float on the wire: narrowed (round to nearest even) by the sender,
// widened back to f32 by the receiving handler, which passes it on to reduce / forward.
class Narrow final : public Handler {
 public:
  explicit Narrow(DataType wire) : wire_(wire) {}
  std::string_view name() const override { return wire_ == DataType::bf16 ? "bf16" : "f16"; }
  std::string_view summary() const override {
    return wire_ == DataType::bf16 ? "f32 data as bf16 on the wire (narrowed, widened back on arrival)"
                                   : "f32 data as f16 on the wire (narrowed, widened back on arrival)";
  }
  Role role() const override { return Role::convert; }
  bool converts(const coll::CollectiveParams& p) const override { return p.dtype == DataType::f32; }
  std::uint64_t wire_bytes(const coll::CollectiveParams&, std::uint64_t bytes) const override { return bytes / 2; }
  void encode(const coll::CollectiveParams&, const std::byte* src, std::uint64_t bytes, std::byte* wire) const override {
    for (std::size_t i = 0; i < bytes / 4; ++i) store_float(wire_, wire, i, load_float(DataType::f32, src, i));
  }
  std::size_t alignment(const coll::RecvMessage&) const override { return 2; }
  std::size_t payload(Context& ctx, const Chunk& c) const override {
    const std::size_t n = c.bytes / 2;
    ctx.scratch.resize(std::min(n, kBatchElements) * 4);
    for (std::size_t done = 0; done < n;) {
      const std::size_t k = std::min(n - done, kBatchElements);
      for (std::size_t i = 0; i < k; ++i) store_float(DataType::f32, ctx.scratch.data(), i, load_float(wire_, c.data, done + i));
      ctx.emit(Chunk{(c.offset / 2 + done) * 4, ctx.scratch.data(), k * 4});
      done += k;
    }
    return n * 2;
  }

 private:
  DataType wire_;
};

// int8 with a scale per block of kBlock elements: [f32 scale][int8 x block] on the wire,
// scale = max |x| / 127 of the block, x ~ round(x / scale) (nearest even). f16/bf16 data is
// widened to f32 to quantise and narrowed back (nearest even) after dequantising. A block with
// a NaN or an infinity goes as scale NaN and arrives as NaNs.
class Int8 final : public Handler {
 public:
  static constexpr std::size_t kBlock = 256;
  std::string_view name() const override { return "int8"; }
  std::string_view summary() const override {
    return "f32/f16/bf16 data as int8 with an f32 scale per 256 elements on the wire (quantised, dequantised on arrival)";
  }
  Role role() const override { return Role::convert; }
  bool converts(const coll::CollectiveParams& p) const override { return is_half_or_float(p.dtype); }
  std::uint64_t wire_bytes(const coll::CollectiveParams& p, std::uint64_t bytes) const override {
    const std::uint64_t n = bytes / size_of(p.dtype);
    return (n + kBlock - 1) / kBlock * 4 + n;
  }
  void encode(const coll::CollectiveParams& p, const std::byte* src, std::uint64_t bytes, std::byte* wire) const override {
    const std::size_t n = bytes / size_of(p.dtype);
    for (std::size_t b = 0; b * kBlock < n; ++b) {
      const std::size_t first = b * kBlock, k = std::min(kBlock, n - first);
      float maxabs = 0;
      bool finite = true;
      for (std::size_t i = 0; i < k; ++i) {
        const float x = load_float(p.dtype, src, first + i);
        finite = finite && std::isfinite(x);
        maxabs = std::max(maxabs, std::fabs(x));
      }
      const float scale = finite ? maxabs / 127.0f : std::numeric_limits<float>::quiet_NaN();
      std::byte* out = wire + b * (kBlock + 4);
      std::memcpy(out, &scale, 4);
      for (std::size_t i = 0; i < k; ++i) {
        float q = 0;
        if (finite && scale > 0) q = std::clamp(std::nearbyint(load_float(p.dtype, src, first + i) / scale), -127.0f, 127.0f);
        out[4 + i] = static_cast<std::byte>(static_cast<std::int8_t>(q));
      }
    }
  }
  std::size_t payload(Context& ctx, const Chunk& c) const override {
    const auto& m = ctx.msg();
    const DataType t = m.params->dtype;
    const std::size_t esz = size_of(t), n = m.bytes / esz;
    if (c.offset % (kBlock + 4) != 0)
      throw Error(Error::Kind::internal, "handler 'int8': a chunk that does not start at a block");
    std::size_t b = c.offset / (kBlock + 4), used = 0;
    ctx.scratch.resize(kBatchElements * esz);
    std::size_t batched = 0, batch_first = b * kBlock;
    for (; b * kBlock < n; ++b) {
      const std::size_t k = std::min(kBlock, n - b * kBlock);
      if (c.bytes - used < k + 4) break;  // the rest of the block comes with more bytes
      const std::byte* in = c.data + used;
      float scale;
      std::memcpy(&scale, in, 4);
      for (std::size_t i = 0; i < k; ++i)
        store_float(t, ctx.scratch.data(), batched + i, static_cast<float>(static_cast<std::int8_t>(in[4 + i])) * scale);
      batched += k;
      used += k + 4;
      if (batched + kBlock > kBatchElements) {
        ctx.emit(Chunk{batch_first * esz, ctx.scratch.data(), batched * esz});
        batch_first += batched;
        batched = 0;
      }
    }
    if (batched) ctx.emit(Chunk{batch_first * esz, ctx.scratch.data(), batched * esz});
    return used;
  }
};

}  // namespace

HandlerRegistry HandlerRegistry::with_builtins() {
  HandlerRegistry r;
  r.add(std::make_unique<Reduce>());
  r.add(std::make_unique<Forward>());
  r.add(std::make_unique<Narrow>(DataType::bf16));
  r.add(std::make_unique<Narrow>(DataType::f16));
  r.add(std::make_unique<Int8>());
  add_ocp_handlers(r);
  return r;
}

}  // namespace inc::edge
