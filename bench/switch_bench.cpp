// Core-INC switch benchmarks (issue 3):
//   switch_bench dataplane  in-process data-plane aggregation throughput per core (GB/s of
//                           contributed payload), next to memcpy of the same payload bytes and
//                           to the bare add kernel, on the same buffers;
//   switch_bench udp        end-to-end allreduce over UDP loopback (a SwitchLanes daemon core
//                           with --lanes L lane threads + worker threads, each worker one socket
//                           driving one protocol per lane), next to raw UDP loopback measured
//                           by the same harness: L echo threads on the same event loop that
//                           return every datagram to its sender (same packet count and size as
//                           the INC run); with and without UDP GSO/GRO (--offload); --auth
//                           on|both: the job keyed, or keyed and unkeyed rounds alternated with
//                           the switch's CPU per datagram and keyed/unkeyed per round, every
//                           round checked to be what it claims by forged datagrams;
//   switch_bench lanes      --lanes L,.. data planes on as many threads at once, in-process
//                           (wall-clock total against one lane: scaling without the network);
//   switch_bench keyed      only the keyed data plane of `dataplane --auth` (keyed against unkeyed);
//   switch_bench all        all three. Medians of --runs runs; this machine is shared and noisy.
// Options: --members M --runs R --seconds S --workers W --count N --elems E,.. --slots K (per lane)
//          --lanes L,.. --offload on|off|both --batch N --json FILE --gmac evp,clmul,avx2,avx512
#include <algorithm>
#include <optional>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#if defined(__x86_64__)
#include <immintrin.h>
#endif
#ifdef INC_HAVE_SODIUM
#include <sodium.h>
#endif

#include "bench/switch_bench.hpp"
#include "src/proto/gmac.hpp"
#include "src/switch/arith.hpp"
#include "src/switch/dataplane.hpp"
#include "src/switch/lanes.hpp"
#include "src/switch/udp.hpp"
#include "src/switch/worker.hpp"

using namespace inc::sw;
namespace proto = inc::proto;

namespace inc_switch_bench {

// CPU time of the calling thread: per-core figures that hold on a shared, loaded machine.
double cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string json_out = "[\n";
void emit_json(const std::string& obj) {
  if (json_out.size() > 2) json_out += ",\n";
  json_out += "  " + obj;
}

}  // namespace inc_switch_bench

using namespace inc_switch_bench;

namespace {


// ---- in-process data plane --------------------------------------------------------------------

// Packets of M members for 2K consecutive chunks, encoded once; chunk ids are patched per round.
struct Stream {
  std::vector<std::vector<std::byte>> pkts;  // [pos * M + m]
};

// E elements per packet of type t with operation op (f16/bf16: 2 bytes each; sum_widen: the
// switch widens into f32 cells and rounds at completion, this switch being the root).
// With `key`, a keyed job: every contribution is sealed by its member (untimed: the sealing
// time is subtracted) and opened by the switch, which seals each result it sends.
double run_dataplane(proto::ElemType t, std::uint32_t E, int M, int K, double seconds,
                     std::uint64_t& bytes_out, const proto::auth::Key* key = nullptr,
                     proto::WireOp op = proto::WireOp::sum) {
  const std::size_t es = proto::elem_size(t);
  // MX: E cells hold E / 32 blocks (each 32 f32 accumulators); `count` counts blocks.
  const std::uint32_t cnt = proto::is_mx(t) ? E / std::uint32_t(proto::kMxBlockElems) : E;
  SwitchConfig cfg;
  cfg.slots = std::uint32_t(K);
  cfg.slot_elems = E;
  cfg.auth_instance = proto::auth::random_instance();
  cfg.auth_seq_base = 1;
  SwitchDataPlane sw(cfg);
  std::optional<proto::auth::Key> job_key;
  if (key) job_key = *key;
  sw.admit({1, std::uint16_t(M), std::uint32_t(K), proto::kNoMember, job_key}, 0);
  std::vector<proto::auth::Sealer> sealers;
  for (int m = 0; key && m < M; ++m) sealers.emplace_back(*key, proto::auth::random_instance(), 1);
  const std::size_t trailer = key ? proto::kAuthTrailerBytes : 0;
  for (int m = 0; m < M; ++m) {
    std::byte b[proto::kHeaderBytes + proto::kAuthTrailerBytes];
    proto::Header h;
    h.type = proto::PacketType::join;
    h.job = 1;
    h.member = std::uint16_t(m);
    proto::encode_header(h, b);
    const std::size_t n = key ? sealers[std::size_t(m)].seal(b, proto::kHeaderBytes) : proto::kHeaderBytes;
    sw.on_packet(std::span<const std::byte>(b, n), Endpoint::node(std::uint32_t(m)), 0);
  }
  sw.outbox().clear();
  const std::uint32_t epoch = sw.job_epoch(1);
  Stream s;
  for (int pos = 0; pos < 2 * K; ++pos)
    for (int m = 0; m < M; ++m) {
      proto::Header h;
      h.type = proto::PacketType::data;
      h.flags = proto::flag::want_result;
      h.elem = t;
      h.op = op;
      h.member = std::uint16_t(m);
      h.job = 1;
      h.epoch = epoch;
      h.chunk = std::uint32_t(pos);
      h.slot = std::uint16_t(pos % K);
      h.count = std::uint16_t(cnt);
      std::vector<std::byte> p(proto::kHeaderBytes + cnt * es + trailer);
      proto::encode_header(h, p.data());
      for (std::uint32_t i = 0; i < cnt * es && es != 2 && es != 4; ++i) {
        // 8-bit types and MX blocks: small finite codes (fp8 0x30.., i4 nibbles, MX element
        // codes) and, at the start of each MX block, a scale of 2^-2 .. 2^0 varying by member.
        const bool scale = proto::is_mx(t) && i % es == 0;
        p[proto::kHeaderBytes + i] = std::byte(scale ? 125 + (std::uint32_t(m) % 3) : 0x30 + (i + std::uint32_t(m)) % 7);
      }
      for (std::uint32_t i = 0; i < E && (es == 2 || es == 4); ++i) {
        float f = float((i + std::uint32_t(m)) % 7);
        std::int32_t v = std::int32_t(i * 3 + std::uint32_t(m));
        // 16-bit: 1.0 plus a few ulps (f16 0x3c00, bf16 0x3f80), finite sums
        std::uint16_t h16 = std::uint16_t((t == proto::ElemType::f16 ? 0x3c00 : 0x3f80) + (i + std::uint32_t(m)) % 7);
        std::memcpy(p.data() + proto::kHeaderBytes + es * i,
                    es == 2 ? (void*)&h16 : t == proto::ElemType::f32 ? (void*)&f : (void*)&v, es);
      }
      s.pkts.push_back(std::move(p));
    }
  std::uint64_t chunks = 0;
  double t0 = cpu_s();
  double t1 = t0;
  std::uint32_t round = 0;
  while (t1 - t0 < seconds) {
    if (key) {  // the members' work, not the switch's: sealed outside the clock
      const double s0 = cpu_s();
      for (int pos = 0; pos < 2 * K; ++pos) {
        const std::uint32_t chunk = round * 2 * std::uint32_t(K) + std::uint32_t(pos);
        for (int m = 0; m < M; ++m) {
          auto& p = s.pkts[std::size_t(pos * M + m)];
          proto::store_u32(p.data() + 20, chunk);
          sealers[std::size_t(m)].seal(p.data(), p.size() - trailer);
        }
      }
      t0 += cpu_s() - s0;
    }
    for (int pos = 0; pos < 2 * K; ++pos) {
      const std::uint32_t chunk = round * 2 * std::uint32_t(K) + std::uint32_t(pos);
      for (int m = 0; m < M; ++m) {
        auto& p = s.pkts[std::size_t(pos * M + m)];
        if (!key) proto::store_u32(p.data() + 20, chunk);
        sw.on_packet(p, Endpoint::node(std::uint32_t(m)), 0);
      }
      sw.outbox().clear();  // the driver would hand these M results to sendmmsg
    }
    chunks += 2 * std::uint64_t(K);
    ++round;
    t1 = cpu_s();
  }
  if (sw.counters().aggregations != chunks) {
    std::fprintf(stderr, "data plane bench: %llu aggregations for %llu chunks\n",
                 (unsigned long long)sw.counters().aggregations, (unsigned long long)chunks);
    std::exit(1);
  }
  bytes_out = chunks * std::uint64_t(M) * cnt * es;
  return double(bytes_out) / (t1 - t0) / 1e9;
}

// memcpy of the same payload bytes from the same packet buffers into a slot-sized buffer, and
// the add kernel alone (what the data plane does at least once per packet).
double run_copy(std::uint32_t E, int M, int K, double seconds, bool add) {
  std::vector<std::vector<std::byte>> pkts(std::size_t(2 * K * M), std::vector<std::byte>(proto::kHeaderBytes + E * 4, std::byte(1)));
  std::vector<std::int32_t> slot(E);
  std::uint64_t bytes = 0;
  const double t0 = cpu_s();
  double t1 = t0;
  while (t1 - t0 < seconds) {
    for (auto& p : pkts) {
      if (add) add_i32_wrap(slot.data(), p.data() + proto::kHeaderBytes, E);
      else std::memcpy(slot.data(), p.data() + proto::kHeaderBytes, E * 4);
      asm volatile("" : : "r"(slot.data()) : "memory");
    }
    bytes += pkts.size() * std::uint64_t(E) * 4;
    t1 = cpu_s();
  }
  return double(bytes) / (t1 - t0) / 1e9;
}

void bench_dataplane(const Args& a) {
  std::printf("\n# data plane, in-process, one core: %d members, %d slots; GB/s of contributed payload per"
              " CPU second of the thread (so that a loaded machine does not hide the per-core rate)\n",
              a.members, a.slots);
  std::printf("(16/8-bit rows: E elements of 2/1 bytes per packet, so memcpy/add-kernel move E x 4 bytes"
              " there: compare their packet rates; 'w' = sum_widen, f32/i32 cells, narrowed at the root)\n");
  std::printf("(fp8/i4/MX rows: 'elems' is the slot's cells; an fp8/i4 packet holds that many bytes (i4: two"
              " elements each), an MX packet elems/32 blocks of 33 (mxfp6 25, mxfp4 17) bytes; ns/elem: CPU time per"
              " contributed element)\n");
  std::printf("%-8s %8s %12s %12s %12s %12s %10s %9s\n", "type", "elems", "dataplane", "memcpy", "add-kernel", "Mpkt/s",
              "dp/memcpy", "ns/elem");
  using proto::ElemType;
  using proto::WireOp;
  for (auto [t, op] : {std::pair{ElemType::i32, WireOp::sum}, std::pair{ElemType::f32, WireOp::sum},
                       std::pair{ElemType::f16, WireOp::sum}, std::pair{ElemType::f16, WireOp::sum_widen},
                       std::pair{ElemType::bf16, WireOp::sum}, std::pair{ElemType::bf16, WireOp::sum_widen},
                       std::pair{ElemType::i8, WireOp::sum}, std::pair{ElemType::i8, WireOp::sum_widen},
                       std::pair{ElemType::e4m3, WireOp::sum}, std::pair{ElemType::e4m3, WireOp::sum_widen},
                       std::pair{ElemType::e5m2, WireOp::sum}, std::pair{ElemType::e5m2, WireOp::sum_widen},
                       std::pair{ElemType::i4, WireOp::sum}, std::pair{ElemType::i4, WireOp::sum_widen},
                       std::pair{ElemType::mxe4m3, WireOp::sum_widen}, std::pair{ElemType::mxint8, WireOp::sum_widen},
                       std::pair{ElemType::mxfp4, WireOp::sum_widen}, std::pair{ElemType::mxe2m3, WireOp::sum_widen},
                       std::pair{ElemType::mxe3m2, WireOp::sum_widen}}) {
    for (auto E : a.elems) {
      std::vector<double> dp, mc, ad;
      std::uint64_t bytes = 0;
      for (int r = 0; r < a.runs; ++r) {
        dp.push_back(run_dataplane(t, E, a.members, a.slots, a.seconds, bytes, nullptr, op));
        mc.push_back(run_copy(E, a.members, a.slots, a.seconds, false));
        ad.push_back(run_copy(E, a.members, a.slots, a.seconds, true));
      }
      const double es = double(proto::elem_size(t));
      const bool mx = proto::is_mx(t);
      const double units = mx ? double(E / proto::kMxBlockElems) : double(E);  // per packet
      const double elems_per_unit = mx ? double(proto::kMxBlockElems) : t == ElemType::i4 ? 2.0 : 1.0;
      double d = median(dp), m = median(mc), k = median(ad);
      double mpps = d * 1e9 / (units * es) / 1e6;
      const double ns_per_elem = 1e9 / (d * 1e9 / es * elems_per_unit);
      const std::string tn = std::string(proto::name(t)) + (op == WireOp::sum_widen ? "w" : "");
      std::printf("%-8s %8u %12.2f %12.2f %12.2f %12.2f %10.2f %9.3f\n", tn.c_str(), E, d, m, k, mpps, d / m, ns_per_elem);
      char buf[512];
      std::snprintf(buf, sizeof buf,
                    "{\"bench\":\"dataplane\",\"type\":\"%s\",\"elems\":%u,\"members\":%d,\"dataplane_GBps\":%.3f,"
                    "\"memcpy_GBps\":%.3f,\"add_kernel_GBps\":%.3f,\"Mpkts\":%.3f,\"ns_per_elem\":%.4f}",
                    tn.c_str(), E, a.members, d, m, k, mpps, ns_per_elem);
      emit_json(buf);
    }
  }
}

// Lanes without the network: T data planes (one per thread, each its own pool and stream, as
// lanes are) aggregating at once; wall-clock GB/s of all of them against one alone. What stops
// linear scaling here is shared hardware (caches, memory bandwidth, the cores themselves).
void bench_dataplane_lanes(const Args& a) {
  std::printf("\n# data plane lanes in parallel, in-process: %d members, %d slots per lane, i32; total GB/s"
              " of contributed payload over wall time (this machine has %u CPUs)\n",
              a.members, a.slots, unsigned(std::thread::hardware_concurrency()));
  std::printf("%8s %6s %12s %12s %10s\n", "elems", "lanes", "total GB/s", "per lane", "speed-up");
  for (auto E : a.elems) {
    double one = 0;
    for (auto L : a.lanes) {
      std::vector<double> totals;
      for (int r = 0; r < a.runs; ++r) {
        std::vector<std::uint64_t> bytes(L);
        std::vector<std::thread> ts;
        const double t0 = now_s();
        for (std::uint16_t l = 0; l < L; ++l)
          ts.emplace_back([&, l] { run_dataplane(proto::ElemType::i32, E, a.members, a.slots, a.seconds, bytes[l]); });
        for (auto& t : ts) t.join();
        const double wall = now_s() - t0;
        std::uint64_t sum = 0;
        for (auto b : bytes) sum += b;
        totals.push_back(double(sum) / wall / 1e9);
      }
      const double total = median(totals);
      if (L == a.lanes.front()) one = total / L;
      std::printf("%8u %6u %12.2f %12.2f %10.2f\n", E, unsigned(L), total, total / L, one > 0 ? total / one : 0);
      char buf[256];
      std::snprintf(buf, sizeof buf, "{\"bench\":\"dataplane_lanes\",\"elems\":%u,\"lanes\":%u,\"total_GBps\":%.3f}", E,
                    unsigned(L), total);
      emit_json(buf);
    }
  }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// The first layer of UMAC (RFC 4418's NH, the fastest universal hash family we know of for
// AVX2 CPUs) over `len` bytes (a multiple of 64) with `passes` Toeplitz-shifted keys (4 for
// UMAC-128's 128-bit tags, 2 for UMAC-64's 64-bit ones): 32-bit additions, 32x32->64 products,
// 64-bit sums, two message blocks of 8 words per step. The arithmetic of the candidate only
// (word order differs from the RFC's and the later layers are left out, so a real UMAC costs
// more): what a MAC built on it would at least cost against GMAC on the same CPU.
template <int Passes>
__attribute__((target("avx2"), noinline)) std::uint64_t nh_avx2(const std::byte* m, std::size_t len,
                                                                  const std::byte* key) {
  constexpr int passes = Passes;
  __m256i acc[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
  for (std::size_t off = 0; off + 64 <= len; off += 64) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(m + off));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(m + off + 32));
    const __m256i x = _mm256_permute2x128_si256(a, b, 0x20), y = _mm256_permute2x128_si256(a, b, 0x31);
    for (int i = 0; i < passes; ++i) {
      const __m256i tx = _mm256_add_epi32(x, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(key + off + 16 * i)));
      const __m256i ty = _mm256_add_epi32(y, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(key + off + 32 + 16 * i)));
      acc[i] = _mm256_add_epi64(acc[i], _mm256_mul_epu32(tx, ty));
      acc[i] = _mm256_add_epi64(acc[i], _mm256_mul_epu32(_mm256_srli_epi64(tx, 32), _mm256_srli_epi64(ty, 32)));
    }
  }
  const __m256i s = _mm256_xor_si256(_mm256_xor_si256(acc[0], acc[1]), _mm256_xor_si256(acc[2], acc[3]));
  return std::uint64_t(_mm256_extract_epi64(s, 0) ^ _mm256_extract_epi64(s, 3));
}
#define INC_BENCH_NH 1
#endif

// --gmac: the GMAC implementations to compare (all this CPU runs if empty).
bool wanted(const Args& a, proto::gmac::Isa i) {
  return a.gmac.empty() || std::find(a.gmac.begin(), a.gmac.end(), proto::gmac::name(i)) != a.gmac.end();
}

// What authentication costs one core: sealing and opening one packet (AES-256-GMAC, our
// src/proto/auth) per payload size with each GMAC implementation this CPU runs
// (src/proto/gmac.hpp; evp is OpenSSL's EVP AES-GCM, the only one before), against libsodium's
// Poly1305 with a ChaCha20-derived one-time key (the other candidate; built when libsodium is
// found) and the NH layer of UMAC (nh_avx2). Implementations alternate within each run, so load
// hits them alike.
void bench_auth(const Args& a) {
  std::vector<proto::gmac::Isa> isas;
  for (proto::gmac::Isa i : proto::gmac::kAllIsas)
    if (proto::gmac::available(i) && wanted(a, i)) isas.push_back(i);
  const proto::gmac::Isa best = proto::gmac::selected();
  std::printf("\n# authentication, one core: ns per packet to seal (sender) and to open (receiver: tag and"
              " replay window) with each GMAC implementation (median of %d runs); GB/s of payload opened by"
              " %s; poly1305 = libsodium's ChaCha20-Poly1305 tag on the same bytes\n",
              a.runs, std::string(proto::gmac::name(best)).c_str());
  std::printf("%8s", "payload");
  for (proto::gmac::Isa i : isas)
    std::printf(" %11s %11s", (std::string(proto::gmac::name(i)) + " seal").c_str(), (std::string(proto::gmac::name(i)) + " open").c_str());
  std::printf(" %10s %10s %12s %10s %9s %9s\n", "open GB/s", "evp/best", "poly1305 ns", "poly GB/s", "nh x4 ns", "nh x2 ns");
  const proto::auth::Key key = proto::auth::random_key();
  for (std::uint32_t payload : {0u, 1024u, 8192u, 32768u}) {
    std::vector<std::byte> pkt(proto::kHeaderBytes + payload + proto::kAuthTrailerBytes);
    proto::Header h;
    h.type = proto::PacketType::data;
    h.elem = payload ? proto::ElemType::i32 : proto::ElemType::none;
    h.op = payload ? proto::WireOp::sum : proto::WireOp::none;
    h.count = std::uint16_t(payload / 4);
    proto::encode_header(h, pkt.data());
    const int n = payload >= 8192 ? 20000 : 200000;
    std::vector<std::vector<double>> seal_ns(isas.size()), open_ns(isas.size());
    std::vector<double> poly_ns, nh_ns[2];
    for (int r = 0; r < a.runs; ++r) {
      for (std::size_t k = 0; k < isas.size(); ++k) {
        const proto::auth::Mac mac(key, proto::auth::random_instance(), isas[k]);
        std::vector<std::vector<std::byte>> sealed(64, pkt);
        double t0 = cpu_s();
        for (int i = 0; i < n; ++i) {
          auto& b = sealed[std::size_t(i) % sealed.size()];
          proto::auth::seal(mac, std::uint64_t(i) + 1, b.data(), proto::kHeaderBytes + payload);
        }
        seal_ns[k].push_back((cpu_s() - t0) / n * 1e9);
        // Open: fresh sealed packets in order (the window accepts each once), checked by a MAC
        // of this implementation.
        const proto::auth::Instance inst = proto::auth::random_instance();
        std::optional<proto::auth::Mac> cache;
        cache.emplace(key, inst, isas[k]);
        proto::auth::ReplayWindow w;
        proto::auth::Sealer s2(key, inst, 1);
        double open_total = 0;
        int opened = 0;
        for (int i = 0; i < n; i += 64) {
          for (auto& b : sealed) s2.seal(b.data(), proto::kHeaderBytes + payload);
          t0 = cpu_s();
          for (auto& b : sealed)
            if (proto::auth::open(key, cache, w, b) == proto::auth::Verdict::ok) ++opened;
          open_total += cpu_s() - t0;
        }
        if (opened == 0) std::exit(1);
        open_ns[k].push_back(open_total / opened * 1e9);
      }
#ifdef INC_HAVE_SODIUM
      unsigned char sub[32], otk[32], nonce[12] = {}, tag[16], inst[16] = {1};
      crypto_core_hchacha20(sub, inst, reinterpret_cast<const unsigned char*>(key.data()), nullptr);
      const double t0 = cpu_s();
      for (int i = 0; i < n; ++i) {
        std::memcpy(nonce + 4, &i, sizeof i);
        crypto_stream_chacha20_ietf(otk, 32, nonce, sub);
        crypto_onetimeauth_poly1305(tag, reinterpret_cast<const unsigned char*>(pkt.data()),
                                    proto::kHeaderBytes + payload + 24, otk);
        asm volatile("" : : "r"(tag) : "memory");
      }
      poly_ns.push_back((cpu_s() - t0) / n * 1e9);
#endif
#ifdef INC_BENCH_NH
      // NH over the bytes a tag covers, rounded up to 64 (RFC 4418 pads likewise).
      if (__builtin_cpu_supports("avx2")) {
        const std::size_t len = (proto::kHeaderBytes + payload + 24 + 63) & ~std::size_t(63);
        std::vector<std::byte> m(len), k(len + 64);
        for (std::size_t i = 0; i < k.size(); ++i) k[i] = std::byte(i * 151 + 7);
        for (int v = 0; v < 2; ++v) {
          const double t1 = cpu_s();
          std::uint64_t sink = 0;
          for (int i = 0; i < n; ++i) {
            m[0] = std::byte(sink);
            sink += v == 0 ? nh_avx2<4>(m.data(), len, k.data()) : nh_avx2<2>(m.data(), len, k.data());
          }
          asm volatile("" : : "r"(sink));
          nh_ns[v].push_back((cpu_s() - t1) / n * 1e9);
        }
      }
#endif
    }
    const double po = poly_ns.empty() ? 0 : median(poly_ns);
    const double nh4 = nh_ns[0].empty() ? 0 : median(nh_ns[0]), nh2 = nh_ns[1].empty() ? 0 : median(nh_ns[1]);
    double evp_open = 0, best_open = 0;
    std::string fields;
    std::printf("%8u", payload);
    for (std::size_t k = 0; k < isas.size(); ++k) {
      const double so = median(seal_ns[k]), op = median(open_ns[k]);
      std::printf(" %11.0f %11.0f", so, op);
      if (isas[k] == proto::gmac::Isa::evp) evp_open = op;
      if (isas[k] == best) best_open = op;
      char f[160];
      std::snprintf(f, sizeof f, ",\"%s\":{\"seal_ns\":%.1f,\"open_ns\":%.1f,\"seal_min_ns\":%.1f,\"open_min_ns\":%.1f}",
                    std::string(proto::gmac::name(isas[k])).c_str(), so, op,
                    *std::min_element(seal_ns[k].begin(), seal_ns[k].end()),
                    *std::min_element(open_ns[k].begin(), open_ns[k].end()));
      fields += f;
    }
    // (0: evp or the selected implementation left out by --gmac)
    std::printf(" %10.2f %10.2f %12.0f %10.2f %9.0f %9.0f\n", best_open > 0 ? payload / best_open : 0.0,
                best_open > 0 ? evp_open / best_open : 0.0, po, po > 0 ? payload / po : 0.0, nh4, nh2);
    emit_json("{\"bench\":\"auth\",\"payload\":" + std::to_string(payload) + ",\"best\":\"" +
              std::string(proto::gmac::name(best)) + "\"" + fields + ",\"poly1305_ns\":" + std::to_string(po) +
              ",\"nh4_ns\":" + std::to_string(nh4) + ",\"nh2_ns\":" + std::to_string(nh2) + "}");
  }
  // Control packets (admit/release without a controller, docs/PROTOCOL.md "Control plane"):
  // every request comes from a fresh sender instance, so the switch derives the subkey
  // (HMAC-SHA256, AES key schedule) of each one before checking its tag, and a forged one costs
  // it the same. Each packet here is 31 s after the previous one (the switch forgets stale
  // senders: the table stays at one).
  std::vector<double> ok_ns, forged_ns;
  const std::uint64_t wall0 = proto::auth::clock_seq_base();
  const int n = 20000;
  for (int r = 0; r < a.runs; ++r) {
    proto::auth::ControlReplay replay;
    std::vector<std::vector<std::byte>> pkts(256);
    double ok_s = 0, forged_s = 0;
    int ok = 0, refused = 0;
    for (int i = 0; i < n; i += int(pkts.size())) {
      for (std::size_t k = 0; k < pkts.size(); ++k) {
        proto::Header h;
        h.type = proto::PacketType::release;
        h.elem = proto::ElemType::raw;
        h.count = proto::kReleaseInfoBytes;
        pkts[k].assign(proto::kHeaderBytes + proto::kReleaseInfoBytes + proto::kAuthTrailerBytes, std::byte{0});
        proto::encode_header(h, pkts[k].data());
        const std::uint64_t seq = wall0 + std::uint64_t(i + int(k)) * 31'000'000'000ull;
        proto::auth::seal(proto::auth::Mac(key, proto::auth::random_instance()), seq, pkts[k].data(),
                          proto::kHeaderBytes + proto::kReleaseInfoBytes);
      }
      double t0 = cpu_s();
      for (std::size_t k = 0; k < pkts.size(); ++k)
        ok += replay.open(key, pkts[k], wall0 + std::uint64_t(i + int(k)) * 31'000'000'000ull) == proto::auth::Verdict::ok;
      ok_s += cpu_s() - t0;
      for (auto& b : pkts) b[b.size() - 1] ^= std::byte{1};  // a wrong tag
      t0 = cpu_s();
      for (std::size_t k = 0; k < pkts.size(); ++k)
        refused += replay.open(key, pkts[k], wall0) == proto::auth::Verdict::bad_tag;
      forged_s += cpu_s() - t0;
    }
    if (ok == 0 || refused == 0) std::exit(1);
    ok_ns.push_back(ok_s / ok * 1e9);
    forged_ns.push_back(forged_s / refused * 1e9);
  }
  std::printf("control packet (release, fresh sender each): %.0f ns to open, %.0f ns to refuse a forged one "
              "(median of %d runs)\n", median(ok_ns), median(forged_ns), a.runs);
  emit_json("{\"bench\":\"auth_control\",\"open_ns\":" + std::to_string(median(ok_ns)) +
            ",\"forged_ns\":" + std::to_string(median(forged_ns)) + "}");
}

// The in-process data plane with a keyed job against the same without a key, one CPU core: the
// switch opens every contribution and seals every result, with each GMAC implementation.
// Unkeyed and keyed runs alternate; ratios are taken per run (neighbours in time), then their
// median and minimum.
void bench_dataplane_keyed(const Args& a) {
  std::vector<proto::gmac::Isa> isas;
  for (proto::gmac::Isa i : proto::gmac::kAllIsas)
    if (proto::gmac::available(i) && wanted(a, i)) isas.push_back(i);
  const proto::gmac::Isa best = proto::gmac::selected();
  std::printf("\n# keyed data plane, in-process, one core: %d members, %d slots, i32; GB/s of contributed payload"
              " per CPU second (median of %d runs), unkeyed and keyed with each GMAC implementation; keyed/unkeyed"
              " per run, median (min)\n",
              a.members, a.slots, a.runs);
  std::printf("%8s %10s", "elems", "unkeyed");
  for (proto::gmac::Isa i : isas) std::printf(" %10s", std::string(proto::gmac::name(i)).c_str());
  for (proto::gmac::Isa i : isas) std::printf(" %16s", (std::string(proto::gmac::name(i)) + "/unkeyed").c_str());
  std::printf("\n");
  const proto::auth::Key key = proto::auth::random_key();
  for (auto E : a.elems) {
    std::vector<double> plain;
    std::vector<std::vector<double>> keyed(isas.size()), ratio(isas.size());
    std::uint64_t bytes = 0;
    for (int r = 0; r < a.runs; ++r) {
      plain.push_back(run_dataplane(proto::ElemType::i32, E, a.members, a.slots, a.seconds, bytes));
      for (std::size_t k = 0; k < isas.size(); ++k) {
        proto::gmac::use(isas[k]);
        keyed[k].push_back(run_dataplane(proto::ElemType::i32, E, a.members, a.slots, a.seconds, bytes, &key));
        ratio[k].push_back(keyed[k].back() / plain.back());
      }
      proto::gmac::use(best);
    }
    std::printf("%8u %10.2f", E, median(plain));
    std::string fields;
    for (std::size_t k = 0; k < isas.size(); ++k) std::printf(" %10.2f", median(keyed[k]));
    for (std::size_t k = 0; k < isas.size(); ++k) {
      const double med = median(ratio[k]), lo = *std::min_element(ratio[k].begin(), ratio[k].end());
      std::printf(" %9.2f (%4.2f)", med, lo);
      char f[160];
      std::snprintf(f, sizeof f, ",\"%s\":{\"GBps\":%.3f,\"ratio\":%.3f,\"ratio_min\":%.3f}",
                    std::string(proto::gmac::name(isas[k])).c_str(), median(keyed[k]), med, lo);
      fields += f;
    }
    std::printf("\n");
    char head[160];
    std::snprintf(head, sizeof head, "{\"bench\":\"dataplane_keyed\",\"elems\":%u,\"members\":%d,\"unkeyed_GBps\":%.3f", E,
                  a.members, median(plain));
    emit_json(head + fields + "}");
  }
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  CLI::App app{"Core-INC switch: data-plane throughput against memcpy, lanes, UDP loopback against raw UDP "
               "(docs/SWITCH.md)"};
  app.add_option("mode", a.mode, "what to run")->check(CLI::IsMember({"dataplane", "keyed", "lanes", "udp", "auth", "all"}));
  app.add_option("--members", a.members, "members per job")->check(CLI::Range(1, int(proto::kMaxMembers)));
  app.add_option("--runs", a.runs, "runs per point (median)")->check(CLI::Range(1, 1000));
  app.add_option("--seconds", a.seconds, "seconds per data-plane run")->check(CLI::Range(0.001, 3600.0));
  app.add_option("--workers", a.workers, "UDP workers")->check(CLI::Range(1, 64));
  app.add_option("--count", a.count, "f32 elements per UDP allreduce")->check(CLI::Range(std::uint64_t(1), std::uint64_t(1) << 40));
  app.add_option("--slots", a.slots, "slots per job")->check(CLI::Range(1, 1 << 20));
  app.add_option("--elems", a.elems, "elements per packet, comma list")
      ->delimiter(',')
      ->check(CLI::Range(1u, std::uint32_t(proto::kMaxPayloadBytes / 4)));
  app.add_option("--lanes", a.lanes, "data-plane threads, comma list")->delimiter(',')->check(CLI::Range(1, 64));
  app.add_option("--offload", a.offload, "UDP GSO/GRO")->check(CLI::IsMember({"on", "off", "both"}));
  app.add_option("--auth", a.auth, "udp: the job keyed (on, or --auth alone), unkeyed (off, the default) or both "
                                   "alternated in one run with ratios per round; dataplane: on/both add the keyed "
                                   "comparison (docs/PROTOCOL.md)")
      ->expected(0, 1)
      ->check(CLI::IsMember({"on", "off", "both"}));
  app.add_option("--gmac", a.gmac, "auth, keyed, dataplane --auth: GMAC implementations to compare, comma list "
                                   "(default: all this CPU runs); udp: one name, the one every MAC uses")
      ->delimiter(',')
      ->check(CLI::IsMember({"evp", "clmul", "avx2", "avx512"}));
  app.add_option("--batch", a.batch, "datagrams per recvmmsg")->check(CLI::Range(1, 1024));
  app.add_option("--json", a.json, "also write the figures as JSON here");
  CLI11_PARSE(app, argc, argv);
  if (a.auth.empty()) a.auth = "on";  // --auth without a value
  if (a.mode == "dataplane" || a.mode == "all") bench_dataplane(a);
  if (((a.mode == "dataplane" || a.mode == "all") && a.auth != "off") || a.mode == "keyed") bench_dataplane_keyed(a);
  if (a.mode == "lanes" || a.mode == "all") bench_dataplane_lanes(a);
  if (a.mode == "udp" || a.mode == "all") bench_udp(a);
  // The in-process data plane's keyed/unkeyed for the same element counts, in the same run.
  if (a.mode == "udp" && a.auth == "both") bench_dataplane_keyed(a);
  if (a.mode == "auth" || a.mode == "all") bench_auth(a);
  if (!a.json.empty()) {
    std::FILE* f = std::fopen(a.json.c_str(), "w");
    if (!f) return 1;
    std::fprintf(f, "%s\n]\n", json_out.c_str());
    std::fclose(f);
  }
  return 0;
}
