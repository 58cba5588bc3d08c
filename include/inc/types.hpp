// Public value types shared by the whole stack: element types, reduction operations,
// collective kinds and the library's error type. Header-only, no dependencies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace inc {

// e4m3, e5m2: OCP 8-bit floating point (E4M3: no infinities, NaN = S.1111.111, max 448;
// E5M2: IEEE-like with infinities and NaNs, max 57344). i4: signed 4-bit integers packed two
// per byte, element 2k in the low nibble of byte k (docs/NUMERICS.md "8- and 4-bit types").
// mx*: OCP Microscaling block formats (spec v1.0; docs/NUMERICS.md "MX as a data type"): the
// storage unit is one block of 32 elements, an E8M0 scale byte followed by the element codes:
// mxfp8_e4m3, mxfp8_e5m2, mxint8 one code per byte (33 B), mxfp6_e2m3/e3m2 four codes per three
// bytes (element k at bits 6k..6k+5 of the little-endian code bytes, 25 B), mxfp4 two codes per
// byte, element 2k in the low nibble (17 B). Counts in the API are elements, a multiple of 32.
enum class DataType : std::uint8_t { f64, f32, f16, bf16, i8, u8, i32, u32, i64, u64, e4m3, e5m2, i4,
                                     mxfp8_e4m3, mxfp8_e5m2, mxint8, mxfp4, mxfp6_e2m3, mxfp6_e3m2 };
inline constexpr int kNumDataTypes = 19;

// An OCP Microscaling block type (a unit of 32 elements sharing one scale).
constexpr bool is_mx(DataType t) noexcept { return t >= DataType::mxfp8_e4m3 && t <= DataType::mxfp6_e3m2; }
inline constexpr std::size_t kMxBlockElements = 32;

enum class ReduceOp : std::uint8_t { sum, prod, min, max, avg };
inline constexpr int kNumReduceOps = 5;

enum class Collective : std::uint8_t {
  allreduce,
  reduce_scatter,
  allgather,
  broadcast,
  alltoall,
  barrier
};
inline constexpr int kNumCollectives = 6;

// Where a sum of a 16-bit type (f16, bf16) in the network keeps its accumulator
// (docs/NUMERICS.md "In the switch"): `narrow`: 16 bits on every link and in every switch,
// each add rounded; `widen`: 16 bits from the hosts to the first switch that adds two or more
// inputs, f32 partial sums between switches, rounded once at the root; `wide`: the hosts send
// f32 and round the f32 result once. `automatic`: the communicator's default
// (INC_ACCUMULATE, else widen in the switch and narrow on the hosts). The host algorithms
// (f16, bf16, fp8, MX sums; docs/NUMERICS.md "Wide accumulators on the hosts"): `narrow` rounds
// at every step; `widen` sends each rank's own data narrow, f32 partial sums between hosts, each
// chunk rounded once where complete, the allgather narrow; `wide` sends f32 throughout and
// every rank rounds the f32 result once. `widen` and `wide` give the same bits there.
// `reproducible` (f32, f16, bf16 sum/avg; docs/NUMERICS.md "Reproducible sums"): every value
// in a 62-bit fixed-point window below its block's agreed exponent, summed as two i32 limbs in
// the switch or on the hosts alike, rounded once: the same bits whatever the arrival order,
// tree, host algorithm or rank placement; Report::inexact_blocks says where the window
// did not hold a block's values exactly.
// `fixed` (was INC_SWITCH_NUMERICS=fixed): f32 sums in the switch as i32 fixed point with a
// shared exponent per block agreed in the switch (fx32): independent of the arrival order and
// tree, 4 B/element, but each value rounded to a 30-bit window and not the hosts' bits; f32
// min/max then run on the hosts. 16- and 8-bit sums run as under widen.
enum class Accumulate : std::uint8_t { automatic, narrow, widen, wide, reproducible, fixed };
inline constexpr int kNumAccumulate = 6;

constexpr std::size_t size_of(DataType t) noexcept {
  switch (t) {
    case DataType::f64:
    case DataType::i64:
    case DataType::u64:
      return 8;
    case DataType::f32:
    case DataType::i32:
    case DataType::u32:
      return 4;
    case DataType::f16:
    case DataType::bf16:
      return 2;
    case DataType::i8:
    case DataType::u8:
    case DataType::e4m3:
    case DataType::e5m2:
      return 1;
    case DataType::i4:
      return 1;  // one storage unit, a byte, holds two elements: see elements_per_unit
    case DataType::mxfp8_e4m3:
    case DataType::mxfp8_e5m2:
    case DataType::mxint8:
      return 1 + kMxBlockElements;  // one block: scale + 32 one-byte codes
    case DataType::mxfp6_e2m3:
    case DataType::mxfp6_e3m2:
      return 1 + kMxBlockElements * 6 / 8;
    case DataType::mxfp4:
      return 1 + kMxBlockElements / 2;
  }
  return 0;
}

// Elements per storage unit of size_of(t) bytes: 2 for i4 (two per byte), 32 for the MX block
// types, else 1. Counts in the public API are elements; an i4 count must be even, an MX count a
// multiple of 32. Below the API (schedules, kernels, wire) an i4 buffer is handled as count / 2
// one-byte units, each holding two elements, an MX buffer as count / 32 blocks.
constexpr std::size_t elements_per_unit(DataType t) noexcept {
  return t == DataType::i4 ? 2 : is_mx(t) ? kMxBlockElements : 1;
}
// The alignment the kernels need for a buffer of t: a unit's size for the power-of-two-sized
// types, 1 for the MX blocks (read byte by byte).
constexpr std::size_t unit_alignment(DataType t) noexcept { return is_mx(t) ? 1 : size_of(t); }

constexpr bool is_floating(DataType t) noexcept {
  return t == DataType::f64 || t == DataType::f32 || t == DataType::f16 || t == DataType::bf16 ||
         t == DataType::e4m3 || t == DataType::e5m2 || is_mx(t);  // MX: real values, mxint8 too
}

constexpr std::string_view name(DataType t) noexcept {
  constexpr std::string_view names[] = {"f64", "f32", "f16", "bf16", "i8",   "u8", "i32",
                                        "u32", "i64", "u64", "e4m3", "e5m2", "i4",
                                        "mxfp8_e4m3", "mxfp8_e5m2", "mxint8", "mxfp4", "mxfp6_e2m3", "mxfp6_e3m2"};
  auto i = static_cast<unsigned>(t);
  return i < kNumDataTypes ? names[i] : std::string_view("?");
}

constexpr std::string_view name(ReduceOp op) noexcept {
  constexpr std::string_view names[] = {"sum", "prod", "min", "max", "avg"};
  auto i = static_cast<unsigned>(op);
  return i < kNumReduceOps ? names[i] : std::string_view("?");
}

constexpr std::string_view name(Collective c) noexcept {
  constexpr std::string_view names[] = {"allreduce", "reduce_scatter", "allgather",
                                        "broadcast", "alltoall",       "barrier"};
  auto i = static_cast<unsigned>(c);
  return i < kNumCollectives ? names[i] : std::string_view("?");
}

constexpr std::string_view name(Accumulate a) noexcept {
  constexpr std::string_view names[] = {"automatic", "narrow", "widen", "wide", "reproducible", "fixed"};
  auto i = static_cast<unsigned>(a);
  return i < kNumAccumulate ? names[i] : std::string_view("?");
}

// Parsers accept the canonical names above plus common aliases (float, half, int32, ...).
std::optional<DataType> parse_data_type(std::string_view s) noexcept;
std::optional<ReduceOp> parse_reduce_op(std::string_view s) noexcept;
std::optional<Collective> parse_collective(std::string_view s) noexcept;
std::optional<Accumulate> parse_accumulate(std::string_view s) noexcept;  // the names above

// One hop of a reduction's data path, for Report::hops (docs/NUMERICS.md, "Per-hop numerics"):
// in order, host -> first switch, switch -> parent, ..., root -> hosts (or "host->host" for
// the host algorithms' steps).
struct NumericsHop {
  std::string hop;                     // "host->leaf", "leaf->spine", "spine->hosts", ...
  std::uint32_t accumulator_bits = 0;  // width of what the hop carries: inputs, partial sums or the result
  double bytes_per_element = 0;        // payload bytes per element on the hop's links
  std::string carries;                 // "f16 inputs", "f32 partial sums", "f16 result", ...
};

// Every failure the library reports is an inc::Error with a category and a message that
// names the collective, the step, the peer and what was expected.
class Error : public std::runtime_error {
 public:
  enum class Kind {
    invalid_argument,  // bad call: null buffer, unknown algorithm, bad option
    config,            // bad environment or configuration file
    mismatch,          // ranks called different collectives / counts / types / ops
    timeout,           // a deadline passed
    peer_failure,      // a peer closed its connection or aborted
    network,           // socket-level failure
    internal
  };
  Error(Kind kind, std::string message) : std::runtime_error(std::move(message)), kind_(kind) {}
  Kind kind() const noexcept { return kind_; }

 private:
  Kind kind_;
};

}  // namespace inc
