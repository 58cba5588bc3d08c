// Reduction kernels vs memcpy on the same buffers.
//
// Each benchmark works on buffers of `bytes` bytes (4 KiB, 256 KiB, 8 MiB): the reduction reads
// a and b and writes dst (3 x bytes of memory traffic), memcpy reads a and writes dst (2 x).
// bytes_per_second counts `bytes` once per iteration for both, i.e. "bytes of vector reduced
// (or copied) per second", so the two columns are directly comparable.
//
//   inc_kernels_bench --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "inc/types.hpp"
#include "numerics/kernel_isa.hpp"
#include "numerics/events.hpp"
#include "numerics/reduce.hpp"
#include "numerics/repro.hpp"
#include "numerics/widening.hpp"

namespace {

using inc::DataType;
using inc::ReduceOp;
using inc::numerics::detail::KernelIsa;

constexpr std::int64_t kSizes[] = {4 << 10, 256 << 10, 8 << 20};

struct Buffers {
  std::vector<unsigned char> a, b, dst;
  Buffers(DataType t, std::size_t bytes) : a(bytes), b(bytes), dst(bytes) {
    std::mt19937 rng(42);
    std::uniform_real_distribution<double> real(-1.0, 1.0);
    std::uniform_int_distribution<int> small(-100, 100);
    const std::size_t n = bytes / inc::size_of(t) * (t == DataType::i4 ? 2 : 1);  // i4: 2 per byte
    for (std::size_t i = 0; i < n; ++i) {
      // Moderate values: finite normal results, no subnormal operands (which would measure
      // the CPU's denormal assists rather than the kernel).
      const double x = inc::is_floating(t) ? real(rng) : small(rng);
      const double y = inc::is_floating(t) ? real(rng) : small(rng);
      inc::numerics::store_from_double(t, a.data(), i, x);
      inc::numerics::store_from_double(t, b.data(), i, y);
    }
  }
};

// reduce() as the library runs it (the kernel variant chosen for this CPU).
void BM_reduce(benchmark::State& state, DataType t, ReduceOp op) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  Buffers buf(t, bytes);
  const std::size_t n = bytes / inc::size_of(t);
  for (auto _ : state) {
    inc::numerics::reduce(t, op, buf.dst.data(), buf.a.data(), buf.b.data(), n);
    benchmark::DoNotOptimize(buf.dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(bytes));
}

// One explicit kernel variant (to compare the portable build with x86-64-v3).
void BM_reduce_isa(benchmark::State& state, KernelIsa isa, DataType t, ReduceOp op) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  Buffers buf(t, bytes);
  const std::size_t n = bytes / inc::size_of(t);
  for (auto _ : state) {
    inc::numerics::detail::reduce_with(isa, t, op, buf.dst.data(), buf.a.data(), buf.b.data(), n);
    benchmark::DoNotOptimize(buf.dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(bytes));
}

// In place (dst == a), the way a collective accumulates into its receive buffer.
void BM_reduce_inplace(benchmark::State& state, DataType t) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  Buffers buf(t, bytes);
  const std::size_t n = bytes / inc::size_of(t);
  for (auto _ : state) {
    // max keeps the values bounded over many iterations (sum would drift to inf/overflow).
    inc::numerics::reduce(t, ReduceOp::max, buf.a.data(), buf.a.data(), buf.b.data(), n);
    benchmark::DoNotOptimize(buf.a.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(bytes));
}

void BM_memcpy(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  Buffers buf(DataType::u8, bytes);
  for (auto _ : state) {
    std::memcpy(buf.dst.data(), buf.a.data(), bytes);
    benchmark::DoNotOptimize(buf.dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(bytes));
}

void BM_divide(benchmark::State& state, DataType t) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  Buffers buf(t, bytes);
  const std::size_t n = bytes / inc::size_of(t);
  for (auto _ : state) {
    state.PauseTiming();
    std::memcpy(buf.dst.data(), buf.a.data(), bytes);
    state.ResumeTiming();
    inc::numerics::divide(t, buf.dst.data(), n, 3);
    benchmark::DoNotOptimize(buf.dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(bytes));
}

// reduce_counted(): the sum and its overflow count (every host reduction step runs it).
void BM_reduce_counted(benchmark::State& state, DataType t) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  Buffers buf(t, bytes);
  const std::size_t n = bytes / inc::size_of(t);
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        inc::numerics::reduce_counted(t, ReduceOp::sum, buf.dst.data(), buf.a.data(), buf.b.data(), n));
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(bytes));
}

// The same sum and count as two passes per 2048 elements, sum_overflows() then reduce() (what
// reduce_counted() did for the types its loops did not count): the baseline of the fused loops.
void BM_reduce_counted_2pass(benchmark::State& state, DataType t) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  Buffers buf(t, bytes);
  const std::size_t n = bytes / inc::size_of(t), esz = inc::size_of(t);
  for (auto _ : state) {
    std::uint64_t ev = 0;
    for (std::size_t i = 0; i < n; i += 2048) {
      const std::size_t m = std::min<std::size_t>(n - i, 2048);
      ev += inc::numerics::sum_overflows(t, buf.a.data() + i * esz, buf.b.data() + i * esz, m);
      inc::numerics::reduce(t, ReduceOp::sum, buf.dst.data() + i * esz, buf.a.data() + i * esz,
                            buf.b.data() + i * esz, m);
    }
    benchmark::DoNotOptimize(ev);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(bytes));
}

// The reproducible mode's three host passes over one rank's input (scan, encode at the scanned
// exponents, decode of the limbs), on one kernel variant; bytes = the input's.
void BM_repro_passes(benchmark::State& state, KernelIsa isa, DataType t) {
  namespace rp = inc::numerics::repro;
  const auto bytes = static_cast<std::size_t>(state.range(0));
  Buffers buf(t, bytes);
  const std::size_t n = bytes / inc::size_of(t);
  std::vector<std::int32_t> exps(2 * rp::blocks(n)), limbs(2 * n);
  for (auto _ : state) {
    std::fill(exps.begin(), exps.end(), rp::kZero);
    rp::detail::scan_with(isa, t, buf.a.data(), n, 0, exps.data());
    rp::detail::encode_with(isa, t, buf.a.data(), n, 0, exps.data(), 8, limbs.data());
    rp::detail::decode_with(isa, t, limbs.data(), n, 0, exps.data(), 8, buf.dst.data());
    benchmark::DoNotOptimize(buf.dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(bytes));
}

// The wide accumulators' width passes (numerics/widening.hpp) on one variant: widen (the type ->
// f32) or narrow (f32 -> the type, with its overflow count); bytes = the call's type's.
void BM_width_pass(benchmark::State& state, KernelIsa isa, DataType t, bool widen) {
  const std::size_t units = static_cast<std::size_t>(state.range(0)) / inc::size_of(t);
  const std::size_t bytes = units * inc::size_of(t), n = units * inc::elements_per_unit(t);
  std::vector<float> wide(n);  // N(0,1) f32 values, and them in the type
  std::mt19937 rng(42);
  std::normal_distribution<float> g(0.0f, 1.0f);
  for (float& x : wide) x = g(rng);
  std::vector<unsigned char> narrow(bytes);
  inc::numerics::detail::narrow_from_f32_with(KernelIsa::generic, t, wide.data(), units, narrow.data());
  for (auto _ : state) {
    if (widen) inc::numerics::detail::widen_to_f32_with(isa, t, narrow.data(), units, wide.data());
    else benchmark::DoNotOptimize(inc::numerics::detail::narrow_from_f32_with(isa, t, wide.data(), units, narrow.data()));
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(bytes));
}

void apply_sizes(benchmark::internal::Benchmark* b) {
  for (auto s : kSizes) b->Arg(s);
}

int register_all() {
  benchmark::AddCustomContext(
      "inc_kernels", std::string(inc::numerics::detail::name(
                         inc::numerics::detail::selected_kernel_isa())));
  benchmark::RegisterBenchmark("memcpy", BM_memcpy)->Apply(apply_sizes);
  constexpr DataType kTypes[] = {DataType::f64, DataType::f32, DataType::f16, DataType::bf16,
                                 DataType::i8,  DataType::u8,  DataType::i32, DataType::u32,
                                 DataType::i64, DataType::u64};
  for (DataType t : kTypes) {
    const std::string n(inc::name(t));
    benchmark::RegisterBenchmark(("reduce_sum/" + n).c_str(), BM_reduce, t, ReduceOp::sum)
        ->Apply(apply_sizes);
  }
  // The portable variant where reduce() uses a wider one.
  if (inc::numerics::detail::selected_kernel_isa() != KernelIsa::generic) {
    for (DataType t : {DataType::f32, DataType::f16, DataType::bf16, DataType::i64}) {
      const std::string n(inc::name(t));
      benchmark::RegisterBenchmark(("reduce_sum_generic/" + n).c_str(), BM_reduce_isa,
                                   KernelIsa::generic, t, ReduceOp::sum)
          ->Apply(apply_sizes);
    }
  }
  // A few other ops and the in-place form at the L2-resident size.
  for (DataType t : {DataType::f32, DataType::f16, DataType::bf16, DataType::i64}) {
    const std::string n(inc::name(t));
    benchmark::RegisterBenchmark(("reduce_max/" + n).c_str(), BM_reduce, t, ReduceOp::max)
        ->Arg(256 << 10);
    benchmark::RegisterBenchmark(("reduce_prod/" + n).c_str(), BM_reduce, t, ReduceOp::prod)
        ->Arg(256 << 10);
    benchmark::RegisterBenchmark(("reduce_max_inplace/" + n).c_str(), BM_reduce_inplace, t)
        ->Arg(256 << 10);
  }
  for (DataType t : {DataType::f32, DataType::f16, DataType::i32}) {
    const std::string n(inc::name(t));
    benchmark::RegisterBenchmark(("divide/" + n).c_str(), BM_divide, t)->Arg(256 << 10);
  }
  // Overflow counting (docs/NUMERICS.md "Overflow and saturation counts"), beside reduce_sum.
  for (DataType t : {DataType::f32, DataType::f16, DataType::bf16, DataType::i8, DataType::i32}) {
    const std::string n(inc::name(t));
    benchmark::RegisterBenchmark(("reduce_sum_counted/" + n).c_str(), BM_reduce_counted, t)->Apply(apply_sizes);
  }
  // The narrow types' fused counting against the two-pass baseline (and their plain sums).
  for (DataType t : {DataType::bf16, DataType::e4m3, DataType::e5m2, DataType::i4}) {
    const std::string n(inc::name(t));
    if (t != DataType::bf16) {
      benchmark::RegisterBenchmark(("reduce_sum/" + n).c_str(), BM_reduce, t, ReduceOp::sum)->Apply(apply_sizes);
      benchmark::RegisterBenchmark(("reduce_sum_counted/" + n).c_str(), BM_reduce_counted, t)->Apply(apply_sizes);
    }
    benchmark::RegisterBenchmark(("reduce_sum_counted_2pass/" + n).c_str(), BM_reduce_counted_2pass, t)
        ->Apply(apply_sizes);
  }
  // The wide accumulators' widen / narrow passes, scalar (generic) and AVX2 (docs/NUMERICS.md
  // "Wide accumulators on the hosts").
  for (KernelIsa isa : inc::numerics::detail::kAllKernelIsas) {
    if (!inc::numerics::detail::kernel_isa_available(isa)) continue;
    for (DataType t : {DataType::f16, DataType::bf16, DataType::e4m3, DataType::e5m2, DataType::mxfp8_e4m3,
                       DataType::mxfp4})
      for (bool widen : {true, false}) {
        const std::string n = std::string(widen ? "widen/" : "narrow/") + std::string(inc::numerics::detail::name(isa)) +
                              "/" + std::string(inc::name(t));
        benchmark::RegisterBenchmark(n.c_str(), BM_width_pass, isa, t, widen)->Arg(64 << 10)->Arg(4 << 20);
      }
  }
  // Reproducible sums' host passes, scalar and AVX2 (docs/NUMERICS.md "Vectorised reproducible passes").
  for (KernelIsa isa : inc::numerics::detail::kAllKernelIsas) {
    if (!inc::numerics::detail::kernel_isa_available(isa)) continue;
    for (DataType t : {DataType::f32, DataType::f16, DataType::bf16}) {
      const std::string n = std::string(inc::numerics::detail::name(isa)) + "/" + std::string(inc::name(t));
      benchmark::RegisterBenchmark(("repro_passes/" + n).c_str(), BM_repro_passes, isa, t)
          ->Arg(256 << 10)
          ->Arg(8 << 20);
    }
  }
  return 0;
}

const int registered = register_all();

}  // namespace

BENCHMARK_MAIN();
