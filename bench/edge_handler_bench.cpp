// Throughput of the edge engine's fp8 / MX conversion handlers (docs/EDGE.md, "The OCP formats
// as handlers"): the loops the handlers ran before (per element through double: f64_to_e4m3,
// mx_encode/mx_decode with load_as_double/store_from_double, as handlers_ocp.cpp did) against
// the bulk conversions they call now (numerics/minifloat.hpp: decode tables, AVX2 encoders), on
// the same f32 vector, rounds alternated (old, new, old, new, ...), medians and their ratio;
// then the whole handler (HandlerChain: sender's encode + receiver's chain into place).
// Then the MX handlers' code packing (6 and 4 bits) and f16/bf16 paths: the previous loops (the
// generic variant of numerics/bitpack.hpp, which is the handlers' earlier scalar loop; per
// element through double) against the vectorised ones, alternated the same way.
//   edge_handler_bench [--mib 16] [--rounds 5]
#include <CLI/CLI.hpp>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "edge/handler.hpp"
#include "numerics/bitpack.hpp"
#include "numerics/fp8.hpp"
#include "numerics/minifloat.hpp"
#include "numerics/mx.hpp"
#include "numerics/reduce.hpp"

using namespace inc;
using numerics::MxElem;

namespace {

template <class F>
double seconds(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Fmt {
  const char* handler;
  bool mx;
  MxElem elem;
};

// The previous handlers' loops (f32 data).
void old_encode(const Fmt& f, const std::vector<float>& v, std::vector<std::uint8_t>& wire) {
  const std::size_t n = v.size();
  if (!f.mx) {
    for (std::size_t i = 0; i < n; ++i) {
      const double x = numerics::load_as_double(DataType::f32, v.data(), i);
      wire[i] = f.elem == MxElem::fp8_e4m3 ? numerics::f64_to_e4m3(x) : numerics::f64_to_e5m2(x);
    }
    return;
  }
  float block[numerics::kMxBlock];
  for (std::size_t first = 0; first < n; first += numerics::kMxBlock) {
    const std::size_t k = std::min(numerics::kMxBlock, n - first);
    for (std::size_t i = 0; i < k; ++i) block[i] = static_cast<float>(numerics::load_as_double(DataType::f32, v.data(), first + i));
    std::uint8_t* out = wire.data() + first / numerics::kMxBlock * (numerics::kMxBlock + 1);
    numerics::mx_encode(f.elem, block, k, numerics::kMxBlock, out, out + 1);
  }
}
void old_decode(const Fmt& f, const std::vector<std::uint8_t>& wire, std::vector<float>& out) {
  const std::size_t n = out.size();
  if (!f.mx) {
    for (std::size_t i = 0; i < n; ++i)
      numerics::store_from_double(DataType::f32, out.data(), i,
                                  f.elem == MxElem::fp8_e4m3 ? numerics::e4m3_to_f32(wire[i]) : numerics::e5m2_to_f32(wire[i]));
    return;
  }
  double values[numerics::kMxBlock];
  for (std::size_t first = 0; first < n; first += numerics::kMxBlock) {
    const std::size_t k = std::min(numerics::kMxBlock, n - first);
    const std::uint8_t* in = wire.data() + first / numerics::kMxBlock * (numerics::kMxBlock + 1);
    numerics::mx_decode(f.elem, in, in + 1, k, numerics::kMxBlock, values);
    for (std::size_t i = 0; i < k; ++i) numerics::store_from_double(DataType::f32, out.data(), first + i, values[i]);
  }
}
// The bulk conversions the handlers call now (8-bit codes, the same wire layout).
void new_encode(const Fmt& f, const std::vector<float>& v, std::vector<std::uint8_t>& wire) {
  const std::size_t n = v.size();
  if (!f.mx) return numerics::f32_to_fp8(f.elem, v.data(), n, wire.data(), numerics::Fp8Overflow::ieee);
  std::uint8_t scales[128], codes[128 * numerics::kMxBlock];
  for (std::size_t first = 0; first < n; first += 128 * numerics::kMxBlock) {
    const std::size_t k = std::min(128 * numerics::kMxBlock, n - first);
    numerics::mx_encode_f32(f.elem, v.data() + first, k, numerics::kMxBlock, scales, codes);
    for (std::size_t b = 0; b * numerics::kMxBlock < k; ++b) {
      std::uint8_t* out = wire.data() + (first / numerics::kMxBlock + b) * (numerics::kMxBlock + 1);
      out[0] = scales[b];
      std::copy_n(codes + b * numerics::kMxBlock, std::min(numerics::kMxBlock, k - b * numerics::kMxBlock), out + 1);
    }
  }
}
void new_decode(const Fmt& f, const std::vector<std::uint8_t>& wire, std::vector<float>& out) {
  const std::size_t n = out.size();
  if (!f.mx) return numerics::fp8_to_f32(f.elem, wire.data(), n, out.data());
  for (std::size_t first = 0; first < n; first += numerics::kMxBlock) {
    const std::size_t k = std::min(numerics::kMxBlock, n - first);
    const std::uint8_t* in = wire.data() + first / numerics::kMxBlock * (numerics::kMxBlock + 1);
    numerics::mx_decode_f32(f.elem, in, in + 1, k, numerics::kMxBlock, out.data() + first);
  }
}

// Per block of 32 as the handlers do it: [scale][codes packed to `bits`], generic vs selected.
void packing_and_half_paths(const std::vector<float>& v, int rounds) {
  using numerics::detail::KernelIsa;
  const KernelIsa now = numerics::detail::selected_kernel_isa();
  const std::size_t n = v.size() / 32 * 32, blocks = n / 32;
  std::printf("\n%-22s %10s %10s %7s   %s\n", "MX handler step", "old MB/s", "new MB/s", "ratio", "bits");
  auto row = [&](const char* what, double mb, auto&& old_run, auto&& new_run, auto&& same) {
    std::vector<double> to, tn;
    for (int r = 0; r < rounds; ++r) {
      to.push_back(seconds(old_run));
      tn.push_back(seconds(new_run));
    }
    std::printf("%-22s %10.0f %10.0f %6.1fx   %s\n", what, mb / median(to), mb / median(tn), median(to) / median(tn),
                same() ? "identical" : "DIFFER");
  };
  std::vector<std::uint8_t> scales(blocks), codes(n), back1(n), back2(n);
  for (unsigned bits : {6u, 4u}) {
    const numerics::MxElem e = bits == 6 ? MxElem::fp6_e2m3 : MxElem::fp4_e2m1;
    numerics::mx_encode_f32(e, v.data(), n, 32, scales.data(), codes.data());
    const std::size_t unit = 1 + 4 * bits;
    std::vector<std::uint8_t> w1(blocks * unit), w2(w1.size());
    auto pack = [&](KernelIsa isa, std::vector<std::uint8_t>& w) {
      for (std::size_t b = 0; b < blocks; ++b) {
        w[b * unit] = scales[b];
        numerics::detail::pack_codes_with(isa, bits, codes.data() + 32 * b, 32, w.data() + b * unit + 1);
      }
    };
    auto unpack = [&](KernelIsa isa, const std::vector<std::uint8_t>& w, std::vector<std::uint8_t>& c) {
      for (std::size_t b = 0; b < blocks; ++b) numerics::detail::unpack_codes_with(isa, bits, w.data() + b * unit + 1, 32, c.data() + 32 * b);
    };
    const double mb = static_cast<double>(n) / 1e6;  // MB of codes (one byte each)
    const std::string name = std::string(bits == 6 ? "mxfp6" : "mxfp4") + " pack";
    row(name.c_str(), mb, [&] { pack(KernelIsa::generic, w1); }, [&] { pack(now, w2); }, [&] { return w1 == w2; });
    const std::string uname = std::string(bits == 6 ? "mxfp6" : "mxfp4") + " unpack";
    row(uname.c_str(), mb, [&] { unpack(KernelIsa::generic, w1, back1); }, [&] { unpack(now, w2, back2); },
        [&] { return back1 == back2 && back1 == codes; });
  }
  // f16/bf16 collectives: the sender widens (was load_as_double per element), the receiver
  // narrows the decoded block (was mx_decode in double and store_from_double per element).
  numerics::mx_encode_f32(MxElem::fp8_e4m3, v.data(), n, 32, scales.data(), codes.data());
  for (DataType t : {DataType::f16, DataType::bf16}) {
    std::vector<std::uint16_t> h(n), o1(n), o2(n);
    for (std::size_t i = 0; i < n; ++i) numerics::store_from_double(t, h.data(), i, v[i]);
    std::vector<float> f1(n), f2(n);
    const double mb = static_cast<double>(n) * 2 / 1e6;  // MB of f16/bf16
    const std::string wname = std::string(inc::name(t)) + " widen";
    row(wname.c_str(), mb,
        [&] { for (std::size_t i = 0; i < n; ++i) f1[i] = static_cast<float>(numerics::load_as_double(t, h.data(), i)); },
        [&] { numerics::half_to_f32(t, h.data(), n, f2.data()); },
        [&] { return std::memcmp(f1.data(), f2.data(), 4 * n) == 0; });
    const std::string dname = std::string(inc::name(t)) + " mxfp8 decode";
    row(dname.c_str(), mb,
        [&] {
          double wide[32];
          for (std::size_t b = 0; b < blocks; ++b) {
            numerics::mx_decode(MxElem::fp8_e4m3, &scales[b], codes.data() + 32 * b, 32, 32, wide);
            for (std::size_t i = 0; i < 32; ++i) numerics::store_from_double(t, o1.data(), 32 * b + i, wide[i]);
          }
        },
        [&] {
          for (std::size_t b = 0; b < blocks; ++b)
            numerics::mx_decode_f32(MxElem::fp8_e4m3, &scales[b], codes.data() + 32 * b, 32, 32, f2.data() + 32 * b);
          numerics::f32_to_half(t, f2.data(), n, o2.data());
        },
        [&] { return o1 == o2; });
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"edge handler conversion throughput: previous loops vs bulk conversions"};
  double mib = 16;
  int rounds = 5;
  app.add_option("--mib", mib, "MiB of f32 per conversion")->check(CLI::Range(0.001, 4096.0))->capture_default_str();
  app.add_option("--rounds", rounds, "alternated rounds per variant")->check(CLI::Range(1, 1000))->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  const std::size_t n = static_cast<std::size_t>(mib * (1 << 20) / 4);
  std::vector<float> v(n), out(n), out2(n);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> d(-1, 1);
  for (std::size_t i = 0; i < n; ++i) v[i] = d(rng) * std::ldexp(1.0f, static_cast<int>(i / 32 % 40) - 20);
  std::vector<std::uint8_t> w1(n + n / 32 + 1), w2(w1.size());
  std::printf("# %zu f32 (%.1f MiB), %d rounds alternated; MB/s of f32 converted; kernel variant %s\n", n, mib, rounds,
              std::string(numerics::detail::name(numerics::detail::selected_kernel_isa())).c_str());
  std::printf("%-8s %10s %10s %7s   %10s %10s %7s   %s\n", "format", "enc old", "enc new", "ratio", "dec old", "dec new",
              "ratio", "bits");
  const Fmt fmts[] = {{"e4m3", false, MxElem::fp8_e4m3}, {"e5m2", false, MxElem::fp8_e5m2},
                      {"mxfp8", true, MxElem::fp8_e4m3}, {"mxint8", true, MxElem::int8}};
  const double mb = static_cast<double>(n) * 4 / 1e6;
  for (const Fmt& f : fmts) {
    std::vector<double> eo, en, dn, dold;
    for (int r = 0; r < rounds; ++r) {
      eo.push_back(seconds([&] { old_encode(f, v, w1); }));
      en.push_back(seconds([&] { new_encode(f, v, w2); }));
      dold.push_back(seconds([&] { old_decode(f, w1, out); }));
      dn.push_back(seconds([&] { new_decode(f, w2, out2); }));
    }
    const bool same = w1 == w2 && std::equal(out.begin(), out.end(), out2.begin(), [](float a, float b) {
                        return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
                      });
    std::printf("%-8s %10.0f %10.0f %6.1fx   %10.0f %10.0f %6.1fx   %s\n", f.handler, mb / median(eo), mb / median(en),
                median(eo) / median(en), mb / median(dold), mb / median(dn), median(dold) / median(dn),
                same ? "identical" : "DIFFER");
  }
  packing_and_half_paths(v, rounds);
  // The whole handlers now: the sender's encode and the receiver's chain (plain receive).
  std::printf("\n%-14s %14s %14s\n", "handler", "encode MB/s", "receive MB/s");
  const auto reg = edge::HandlerRegistry::with_builtins();
  std::vector<std::uint16_t> half(n);
  for (const char* h : {"e4m3", "mxfp8", "mxint8", "mxfp6e2m3", "mxfp4", "bfp16", "mxfp8/f16", "mxfp6e2m3/f16",
                        "mxfp4/bf16"}) {
    const std::string hs(h);
    const DataType t = hs.find("/bf16") != std::string::npos ? DataType::bf16
                       : hs.find("/f16") != std::string::npos ? DataType::f16 : DataType::f32;
    edge::HandlerChain chain(reg, hs.substr(0, hs.find('/')));
    coll::CollectiveParams p;
    p.dtype = t;
    const std::byte* src = reinterpret_cast<const std::byte*>(v.data());
    if (t != DataType::f32) {
      numerics::f32_to_half(t, v.data(), n, half.data());
      src = reinterpret_cast<const std::byte*>(half.data());
    }
    coll::RecvMessage m;
    m.params = &p;
    m.kind = coll::OpKind::recv;
    m.bytes = n * size_of(t);
    m.wire_bytes = chain.wire_bytes(p, m.bytes);
    m.dst = reinterpret_cast<std::byte*>(out.data());
    std::vector<std::byte> wire(m.wire_bytes);
    std::vector<double> te, tr;
    for (int r = 0; r < rounds; ++r) {
      te.push_back(seconds([&] { chain.encode(p, src, m.bytes, wire.data()); }));
      tr.push_back(seconds([&] {
        auto proc = chain.open(m);
        std::size_t done = 0;
        while (done < wire.size()) done += proc->consume(done, wire.data() + done, std::min<std::size_t>(wire.size() - done, 1 << 16));
        proc->finish();
      }));
    }
    std::printf("%-14s %14.0f %14.0f\n", h, mb / median(te), mb / median(tr));  // MB of f32-equivalent values
  }
  return 0;
}
