// MX block formats in the switch against 16/32-bit sums in the switch and against decoding on
// the hosts and running a bf16 ring (docs/NUMERICS.md "MX blocks in the switch"): the error of
// an Allreduce sum against the exact (f64) sum of the members' original values, and the bytes
// each member sends per element. The switch paths run through the real data plane and worker
// protocol on the deterministic simulated network (src/switch/simnet.hpp), one switch, no loss;
// the ring is the hosts' bf16 kernel in the ring's order (each step rounds to bf16).
//   mx_bench [--members 4,16,64] [--elems 65536] [--seed 9] [--slot-elements 256]
#include <CLI/CLI.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "src/numerics/half.hpp"
#include "src/numerics/mx.hpp"
#include "src/numerics/mx_type.hpp"
#include "src/numerics/reduce.hpp"
#include "src/switch/simnet.hpp"

using namespace inc;
using namespace inc::sw;

namespace {

struct Result {
  std::vector<std::byte> out;  // member 0's result
  double bytes_sent = 0;       // member 0's bytes sent (headers included)
};

// One Allreduce sum of `in` (member m's bytes) through one simulated switch.
Result through_switch(NumKind k, const std::vector<std::vector<std::byte>>& in, std::uint64_t count,
                      std::uint32_t slot_elems) {
  const auto n = std::uint16_t(in.size());
  SimFaults none;  // no loss, no jitter: the bytes are the payload and one header per chunk
  none.jitter = 0;
  SimCluster c(1, none);
  SwitchConfig sc;
  sc.slots = 64;
  sc.slot_elems = slot_elems;
  sc.incarnation = 3;
  const Endpoint s = c.add_switch(sc);
  c.sw(0).admit({7, n, 16}, 0);
  for (std::uint16_t m = 0; m < n; ++m) {
    WorkerConfig w;
    w.job = 7;
    w.member = m;
    w.switch_ep = s;
    c.add_worker(w);
  }
  std::vector<std::vector<std::byte>> out(n, std::vector<std::byte>(in[0].size()));
  for (std::uint16_t m = 0; m < n; ++m)
    c.start(m, WorkerOp::allreduce(k, ReduceKind::sum, in[m], out[m], count, n));
  if (!c.run(1000 * kSecond) || !c.worker(0).done()) {
    std::fprintf(stderr, "mx_bench: the simulated allreduce did not finish: %s\n", c.worker(0).error().message.c_str());
    std::exit(1);
  }
  return {std::move(out[0]), double(c.worker(0).report().bytes_sent)};
}

std::vector<std::byte> bytes_of(const void* p, std::size_t n) {
  std::vector<std::byte> v(n);
  std::memcpy(v.data(), p, n);
  return v;
}

// MX wire blocks of x (the library's block layout, which is the switch's wire: numerics'
// mx_encode_blocks, the bits of mx_encode), and back (exact).
std::vector<std::byte> mx_blocks(DataType t, const std::vector<float>& x) {
  std::vector<std::byte> w(x.size() / 32 * size_of(t));
  numerics::mx_encode_blocks(t, x.data(), x.size() / 32, w.data());
  return w;
}
std::vector<double> mx_values(DataType t, const std::vector<std::byte>& w, std::size_t n) {
  std::vector<float> f(n);
  numerics::mx_decode_blocks(t, w.data(), n / 32, f.data());
  return {f.begin(), f.end()};
}

struct Err {
  double rel_l2, max_rel;
};
Err error(const std::vector<double>& got, const std::vector<double>& exact) {
  double se = 0, sx = 0, mx = 0, mref = 0;
  for (std::size_t i = 0; i < exact.size(); ++i) {
    const double d = got[i] - exact[i];
    se += d * d;
    sx += exact[i] * exact[i];
    mx = std::max(mx, std::fabs(d));
    mref = std::max(mref, std::fabs(exact[i]));
  }
  return {std::sqrt(se / sx), mx / mref};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"MX blocks in the switch: error and bytes against bf16/f32 in the switch and a bf16 ring"};
  std::vector<int> members{4, 16, 64};
  std::uint64_t elems = 65536, seed = 9;
  std::uint32_t slot = 256;
  app.add_option("--members", members, "members per Allreduce (1..64: one switch)")->delimiter(',');
  app.add_option("--elems", elems, "elements per member (a multiple of 32)");
  app.add_option("--seed", seed, "random seed");
  app.add_option("--slot-elements", slot, "the switch's cells per slot (as inc switch --slot-elements; >= 32)");
  CLI11_PARSE(app, argc, argv);
  if (elems == 0 || elems % 32 != 0) {
    std::fprintf(stderr, "mx_bench: --elems must be a positive multiple of 32\n");
    return 2;
  }
  if (slot < 32 || slot > 16358) {
    std::fprintf(stderr, "mx_bench: --slot-elements must be within 32..16358\n");
    return 2;
  }
  for (int m : members)
    if (m < 1 || m > 64) {
      std::fprintf(stderr, "mx_bench: --members must be within 1..64 (one switch)\n");
      return 2;
    }
  std::printf("# Allreduce sum of N(0,1) x 2^k values (k uniform in -8..8 per 256 elements), %llu per member;"
              " error against the exact f64 sum of the original values; aggr. only: against the exact sum of what"
              " the members sent (after quantisation); B/elem: bytes member 0 sent per element (headers included;"
              " the ring: its 2(p-1)/p x 2 B)\n",
              (unsigned long long)elems);
  std::printf("# one switch, %u cells per slot: a chunk carries %u f32/bf16 elements or %u MX blocks\n", slot, slot, slot / 32);
  std::printf("%-8s %-36s %12s %12s %12s %8s\n", "members", "path", "rel. L2 err", "max err/max", "aggr. only",
              "B/elem");
  for (int M : members) {
    std::mt19937_64 rng(seed + std::uint64_t(M));
    std::normal_distribution<double> nd(0, 1);
    std::vector<std::vector<float>> x(static_cast<std::size_t>(M), std::vector<float>(elems));
    std::vector<double> exact(elems, 0.0);
    std::vector<int> k(elems / 256 + 1);
    for (auto& v : k) v = int(rng() % 17) - 8;
    for (int m = 0; m < M; ++m)
      for (std::uint64_t i = 0; i < elems; ++i) {
        x[std::size_t(m)][i] = float(std::ldexp(nd(rng), k[i / 256]));
        exact[i] += double(x[std::size_t(m)][i]);  // f64: exact enough (2^-53 relative)
      }
    // `contributed`: the exact sum of what the members actually sent (their inputs after the
    // format's quantisation), so that the last column is the aggregation's own error.
    auto row = [&](const char* path, const std::vector<double>& got, const std::vector<double>& contributed, double bpe) {
      const Err e = error(got, exact), a = error(got, contributed);
      std::printf("%-8d %-36s %12.3e %12.3e %12.3e %8.3f\n", M, path, e.rel_l2, e.max_rel, a.rel_l2, bpe);
      std::printf("{\"bench\":\"mx\",\"members\":%d,\"path\":\"%s\",\"rel_l2\":%.4e,\"max_rel\":%.4e,"
                  "\"aggregation_rel_l2\":%.4e,\"bytes_per_elem\":%.4f}\n",
                  M, path, e.rel_l2, e.max_rel, a.rel_l2, bpe);
    };
    auto sum_of = [&](auto value_of) {  // exact (f64) sum over members of value_of(m, i)
      std::vector<double> s(elems, 0.0);
      for (int m = 0; m < M; ++m)
        for (std::uint64_t i = 0; i < elems; ++i) s[i] += value_of(m, i);
      return s;
    };
    std::vector<std::vector<std::byte>> in(static_cast<std::size_t>(M));
    // f32 in the switch.
    for (int m = 0; m < M; ++m) in[std::size_t(m)] = bytes_of(x[std::size_t(m)].data(), elems * 4);
    {
      const Result r = through_switch(NumKind::f32, in, elems, slot);
      std::vector<double> got(elems);
      for (std::uint64_t i = 0; i < elems; ++i) got[i] = numerics::load_as_double(DataType::f32, r.out.data(), i);
      row("switch f32", got, exact, r.bytes_sent / double(elems));
    }
    // bf16 in the switch (widen: f32 partial sums, rounded once at the root).
    std::vector<std::vector<std::uint16_t>> b16(static_cast<std::size_t>(M), std::vector<std::uint16_t>(elems));
    for (int m = 0; m < M; ++m) {
      for (std::uint64_t i = 0; i < elems; ++i) b16[std::size_t(m)][i] = numerics::f32_to_bf16(x[std::size_t(m)][i]);
      in[std::size_t(m)] = bytes_of(b16[std::size_t(m)].data(), elems * 2);
    }
    {
      const Result r = through_switch(NumKind::bf16_widen, in, elems, slot);
      std::vector<double> got(elems);
      for (std::uint64_t i = 0; i < elems; ++i) got[i] = numerics::load_as_double(DataType::bf16, r.out.data(), i);
      row("switch bf16 (widen)", got,
          sum_of([&](int m, std::uint64_t i) { return double(numerics::bf16_to_f32(b16[std::size_t(m)][i])); }),
          r.bytes_sent / double(elems));
    }
    // MX in the switch (widen: f32 accumulators, re-quantised once at the root).
    for (auto [e, kind, name] : {std::tuple{DataType::mxfp8_e4m3, NumKind::mxe4m3_widen, "switch MXFP8 E4M3 (widen)"},
                                 std::tuple{DataType::mxint8, NumKind::mxint8_widen, "switch MXINT8 (widen)"},
                                 std::tuple{DataType::mxfp6_e2m3, NumKind::mxe2m3_widen, "switch MXFP6 E2M3 (widen)"},
                                 std::tuple{DataType::mxfp6_e3m2, NumKind::mxe3m2_widen, "switch MXFP6 E3M2 (widen)"},
                                 std::tuple{DataType::mxfp4, NumKind::mxfp4_widen, "switch MXFP4 (widen)"}}) {
      std::vector<std::vector<double>> dec(static_cast<std::size_t>(M));
      for (int m = 0; m < M; ++m) {
        in[std::size_t(m)] = mx_blocks(e, x[std::size_t(m)]);
        dec[std::size_t(m)] = mx_values(e, in[std::size_t(m)], elems);
      }
      const auto contributed = sum_of([&](int m, std::uint64_t i) { return dec[std::size_t(m)][i]; });
      const Result r = through_switch(kind, in, elems / 32, slot);
      row(name, mx_values(e, r.out, elems), contributed, r.bytes_sent / double(elems));
      if (e != DataType::mxfp8_e4m3) continue;
      // wide: the hosts decode to f32 (exact) and the switch adds f32; no re-quantisation.
      for (int m = 0; m < M; ++m) {
        std::vector<float> f(dec[std::size_t(m)].begin(), dec[std::size_t(m)].end());
        in[std::size_t(m)] = bytes_of(f.data(), elems * 4);
      }
      const Result w = through_switch(NumKind::f32, in, elems, slot);
      std::vector<double> got(elems);
      for (std::uint64_t i = 0; i < elems; ++i) got[i] = numerics::load_as_double(DataType::f32, w.out.data(), i);
      row("switch MXFP8 E4M3, wide (f32)", got, contributed, w.bytes_sent / double(elems));
    }
    // Decode MXFP8 / MXINT8 on the hosts to bf16, then a bf16 ring: chunk c's sum starts at rank
    // c + 1 and takes one rank per step, each add rounded to bf16 (the hosts' kernel).
    for (auto [e, name] : {std::pair{DataType::mxfp8_e4m3, "hosts: MXFP8 -> bf16, bf16 ring"},
                           std::pair{DataType::mxint8, "hosts: MXINT8 -> bf16, bf16 ring"}}) {
      std::vector<std::vector<std::uint16_t>> h(static_cast<std::size_t>(M), std::vector<std::uint16_t>(elems));
      for (int m = 0; m < M; ++m) {
        const auto v = mx_values(e, mx_blocks(e, x[std::size_t(m)]), elems);
        for (std::uint64_t i = 0; i < elems; ++i) numerics::store_from_double(DataType::bf16, h[std::size_t(m)].data(), i, v[i]);
      }
      std::vector<double> got(elems);
      const std::uint64_t chunk = (elems + std::uint64_t(M) - 1) / std::uint64_t(M);
      for (std::uint64_t i = 0; i < elems; ++i) {
        const int c = int(i / chunk);
        std::uint16_t acc = h[std::size_t((c + 1) % M)][i];
        for (int s = 2; s <= M; ++s) numerics::reduce(DataType::bf16, ReduceOp::sum, &acc, &acc, &h[std::size_t((c + s) % M)][i], 1);
        got[i] = numerics::load_as_double(DataType::bf16, &acc, 0);
      }
      row(name, got, sum_of([&](int m, std::uint64_t i) { return numerics::load_as_double(DataType::bf16, h[std::size_t(m)].data(), i); }),
          M > 1 ? 4.0 * (M - 1) / M : 0.0);
    }
    // MX on the hosts (DataType::mxfp8_e4m3 / mxint8 / mxfp4): a ring whose every step decodes
    // the two blocks, adds in f32 and re-quantises (the hosts' MX kernel, numerics::reduce):
    // chunk c (in blocks) starts at rank c + 1; 2(p-1)/p x size_of/32 B per element.
    for (auto [t, name] : {std::pair{DataType::mxfp8_e4m3, "hosts: MXFP8 E4M3 ring (MX kernel)"},
                           std::pair{DataType::mxint8, "hosts: MXINT8 ring (MX kernel)"},
                           std::pair{DataType::mxfp6_e2m3, "hosts: MXFP6 E2M3 ring (MX kernel)"},
                           std::pair{DataType::mxfp6_e3m2, "hosts: MXFP6 E3M2 ring (MX kernel)"},
                           std::pair{DataType::mxfp4, "hosts: MXFP4 ring (MX kernel)"}}) {
      std::vector<std::vector<std::byte>> b(static_cast<std::size_t>(M));
      std::vector<std::vector<double>> dec(static_cast<std::size_t>(M));
      for (int m = 0; m < M; ++m) {
        b[std::size_t(m)] = mx_blocks(t, x[std::size_t(m)]);
        dec[std::size_t(m)] = mx_values(t, b[std::size_t(m)], elems);
      }
      const std::size_t bb = size_of(t), nb = elems / 32;
      const std::uint64_t chunk = (nb + std::uint64_t(M) - 1) / std::uint64_t(M);
      std::vector<std::byte> out(nb * bb);
      for (std::uint64_t k = 0; k < nb; ++k) {
        const int c = int(k / chunk);
        std::byte* acc = out.data() + k * bb;
        std::memcpy(acc, b[std::size_t((c + 1) % M)].data() + k * bb, bb);
        for (int s = 2; s <= M; ++s) numerics::reduce(t, ReduceOp::sum, acc, acc, b[std::size_t((c + s) % M)].data() + k * bb, 1);
      }
      row(name, mx_values(t, out, elems), sum_of([&](int m, std::uint64_t i) { return dec[std::size_t(m)][i]; }),
          M > 1 ? 2.0 * (M - 1) / M * double(bb) / 32 : 0.0);
    }
  }
  return 0;
}
