// Writing an Edge-INC packet handler (docs/EDGE.md, "Writing a handler"): `int4`, f32 data as
// 4-bit integers on the wire, two per byte, with an f32 scale per block of 64 elements (8x less
// than f32, where a fixed-function switch can only add the formats it was built for).
//
//   int4_handler                 check the handler on a message cut into random chunks, exit 0/1
//   int4_handler --serve SOCKET  run an edge engine (as `inc edge`) that also knows `int4`; jobs
//                                attach with INC_OFFLOAD=edge INC_EDGE=SOCKET INC_EDGE_HANDLER=int4
#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "edge/engine.hpp"
#include "edge/handler.hpp"

using namespace inc;

namespace {

class Int4 final : public edge::Handler {
 public:
  static constexpr std::size_t kBlock = 64;              // elements per scale
  static constexpr std::size_t kBlockWire = 4 + kBlock / 2;  // scale + packed nibbles

  std::string_view name() const override { return "int4"; }
  std::string_view summary() const override { return "f32 as 4-bit integers, two per byte, f32 scale per 64"; }
  Role role() const override { return Role::convert; }
  // Which collectives it converts: f32 ones (anything else goes through unconverted).
  bool converts(const coll::CollectiveParams& p) const override { return p.dtype == DataType::f32; }
  std::uint64_t wire_bytes(const coll::CollectiveParams&, std::uint64_t bytes) const override {
    const std::uint64_t n = bytes / 4, rest = n % kBlock;
    return n / kBlock * kBlockWire + (rest ? 4 + (rest + 1) / 2 : 0);
  }
  // The sender's side: runs where the schedule sends (on the engine, before the data leaves).
  void encode(const coll::CollectiveParams&, const std::byte* src, std::uint64_t bytes, std::byte* wire) const override {
    const std::size_t n = bytes / 4;
    for (std::size_t first = 0; first < n; first += kBlock) {
      const std::size_t k = std::min(kBlock, n - first);
      std::vector<float> x(k);
      std::memcpy(x.data(), src + 4 * first, 4 * k);
      float maxabs = 0;
      for (float v : x) maxabs = std::max(maxabs, std::fabs(v));
      const float scale = maxabs / 7.0f;
      std::memcpy(wire, &scale, 4);
      std::memset(wire + 4, 0, (k + 1) / 2);
      for (std::size_t i = 0; i < k; ++i) {
        const int q = scale > 0 ? static_cast<int>(std::clamp(std::nearbyint(x[i] / scale), -7.0f, 7.0f)) : 0;
        wire[4 + i / 2] |= static_cast<std::byte>((q & 0xf) << (4 * (i % 2)));
      }
      wire += 4 + (k + 1) / 2;
    }
  }
  // The receiver's side, per chunk as it arrives: whole blocks only (the rest comes again with
  // more bytes); decoded values go on to the next handler (reduce or forward) with emit().
  std::size_t payload(edge::Context& ctx, const edge::Chunk& c) const override {
    const std::size_t n = ctx.msg().bytes / 4;
    std::size_t block = c.offset / kBlockWire, used = 0;
    ctx.scratch.resize(4 * kBlock);
    for (; block * kBlock < n; ++block) {
      const std::size_t k = std::min(kBlock, n - block * kBlock), len = 4 + (k + 1) / 2;
      if (c.bytes - used < len) break;
      float scale, v;
      std::memcpy(&scale, c.data + used, 4);
      for (std::size_t i = 0; i < k; ++i) {
        int q = (static_cast<int>(c.data[used + 4 + i / 2]) >> (4 * (i % 2))) & 0xf;
        if (q > 7) q -= 16;
        v = static_cast<float>(q) * scale;
        std::memcpy(ctx.scratch.data() + 4 * i, &v, 4);
      }
      ctx.emit(edge::Chunk{block * kBlock * 4, ctx.scratch.data(), k * 4});
      used += len;
    }
    return used;
  }
};

std::atomic<bool> g_stop{false};
extern "C" void on_signal(int) { g_stop = true; }

// One message through the chain [int4, reduce], cut into random chunks: each result within
// half a step (scale / 2) of operand + x.
int self_check() {
  edge::HandlerRegistry reg = edge::HandlerRegistry::with_builtins();
  reg.add(std::make_unique<Int4>());
  edge::HandlerChain chain(reg, "int4");
  coll::CollectiveParams p;
  p.dtype = DataType::f32;
  const std::size_t n = 1000;
  std::vector<float> x(n), operand(n, 1.0f), dst(n);
  std::mt19937 rng(7);
  for (auto& v : x) v = std::uniform_real_distribution<float>(-5, 5)(rng);
  std::vector<std::byte> wire(chain.wire_bytes(p, n * 4));
  chain.encode(p, reinterpret_cast<const std::byte*>(x.data()), n * 4, wire.data());
  coll::RecvMessage m;
  m.params = &p;
  m.kind = coll::OpKind::recv_reduce;
  m.dst = reinterpret_cast<std::byte*>(dst.data());
  m.operand = reinterpret_cast<const std::byte*>(operand.data());
  m.bytes = n * 4;
  m.wire_bytes = wire.size();
  auto proc = chain.open(m);
  for (std::size_t done = 0, end = 0; done < wire.size();) {  // as the transport delivers it
    end = std::min(wire.size(), end + 1 + rng() % 100);
    done += proc->consume(done, wire.data() + done, end - done);
  }
  proc->finish();
  for (std::size_t i = 0; i < n; ++i) {
    const float step = 5.0f / 7.0f;  // at most max|x| / 7
    if (std::fabs(dst[i] - (1.0f + x[i])) > step / 2 + 1e-5f) {
      std::printf("int4: element %zu: %g, want %g +- %g\n", i, dst[i], 1.0f + x[i], step / 2);
      return 1;
    }
  }
  std::printf("int4: %zu elements in %zu wire bytes (f32: %zu), every one within half a step\n", n, wire.size(), n * 4);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--serve") {
    auto reg = std::make_shared<edge::HandlerRegistry>(edge::HandlerRegistry::with_builtins());
    reg->add(std::make_unique<Int4>());
    edge::EngineConfig cfg;
    cfg.socket_path = argv[2];
    cfg.handlers = reg;
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    try {
      edge::EdgeEngine engine(cfg);
      engine.run(g_stop);
    } catch (const Error& e) {
      std::fprintf(stderr, "int4_handler: %s\n", e.what());
      return 1;
    }
    return 0;
  }
  if (argc != 1) {
    std::fprintf(stderr, "usage: int4_handler [--serve SOCKET]\n");
    return 2;
  }
  try {
    return self_check();
  } catch (const Error& e) {
    std::fprintf(stderr, "int4_handler: %s\n", e.what());
    return 1;
  }
}
