// Name parsers for the public enums: canonical names (inc::name) plus common aliases from
// NCCL, MPI, PyTorch and NumPy spellings. Matching ignores ASCII case.
#include <cstddef>
#include <utility>

#include "inc/types.hpp"

namespace inc {
namespace {

constexpr char lower(char c) noexcept { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

constexpr bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i])) return false;
  return true;
}

template <class E, std::size_t N>
std::optional<E> lookup(const std::pair<std::string_view, E> (&table)[N],
                        std::string_view s) noexcept {
  for (const auto& [alias, value] : table)
    if (iequals(alias, s)) return value;
  return std::nullopt;
}

using DT = DataType;
constexpr std::pair<std::string_view, DT> kDataTypes[] = {
    {"f64", DT::f64},       {"double", DT::f64},    {"float64", DT::f64},   {"fp64", DT::f64},
    {"f32", DT::f32},       {"float", DT::f32},     {"float32", DT::f32},   {"fp32", DT::f32},
    {"f16", DT::f16},       {"half", DT::f16},      {"float16", DT::f16},   {"fp16", DT::f16},
    {"bf16", DT::bf16},     {"bfloat16", DT::bf16},
    {"i8", DT::i8},         {"int8", DT::i8},       {"char", DT::i8},       {"int8_t", DT::i8},
    {"u8", DT::u8},         {"uint8", DT::u8},      {"uint8_t", DT::u8},    {"byte", DT::u8},
    {"i32", DT::i32},       {"int32", DT::i32},     {"int", DT::i32},       {"int32_t", DT::i32},
    {"u32", DT::u32},       {"uint32", DT::u32},    {"uint32_t", DT::u32},
    {"i64", DT::i64},       {"int64", DT::i64},     {"int64_t", DT::i64},
    {"u64", DT::u64},       {"uint64", DT::u64},    {"uint64_t", DT::u64},
    {"e4m3", DT::e4m3},     {"fp8e4m3", DT::e4m3},  {"f8e4m3", DT::e4m3},   {"float8_e4m3fn", DT::e4m3},
    {"fp8_e4m3", DT::e4m3},
    {"e5m2", DT::e5m2},     {"fp8e5m2", DT::e5m2},  {"f8e5m2", DT::e5m2},   {"float8_e5m2", DT::e5m2},
    {"fp8_e5m2", DT::e5m2},
    {"i4", DT::i4},         {"int4", DT::i4},
    {"mxfp8_e4m3", DT::mxfp8_e4m3}, {"mxfp8e4m3", DT::mxfp8_e4m3}, {"mxfp8", DT::mxfp8_e4m3},
    {"mxfp8_e5m2", DT::mxfp8_e5m2}, {"mxfp8e5m2", DT::mxfp8_e5m2},
    {"mxint8", DT::mxint8},
    {"mxfp4", DT::mxfp4},           {"mxfp4_e2m1", DT::mxfp4},
    {"mxfp6_e2m3", DT::mxfp6_e2m3}, {"mxfp6e2m3", DT::mxfp6_e2m3}, {"mxfp6", DT::mxfp6_e2m3},
    {"mxfp6_e3m2", DT::mxfp6_e3m2}, {"mxfp6e3m2", DT::mxfp6_e3m2},
};

using RO = ReduceOp;
constexpr std::pair<std::string_view, RO> kReduceOps[] = {
    {"sum", RO::sum}, {"add", RO::sum},   {"prod", RO::prod}, {"product", RO::prod},
    {"mul", RO::prod}, {"min", RO::min},  {"max", RO::max},   {"avg", RO::avg},
    {"mean", RO::avg}, {"average", RO::avg},
};

using CO = Collective;
constexpr std::pair<std::string_view, CO> kCollectives[] = {
    {"allreduce", CO::allreduce},          {"all_reduce", CO::allreduce},
    {"reduce_scatter", CO::reduce_scatter}, {"reducescatter", CO::reduce_scatter},
    {"allgather", CO::allgather},          {"all_gather", CO::allgather},
    {"broadcast", CO::broadcast},          {"bcast", CO::broadcast},
    {"alltoall", CO::alltoall},            {"barrier", CO::barrier},
};

constexpr std::pair<std::string_view, Accumulate> kAccumulate[] = {
    {"automatic", Accumulate::automatic}, {"auto", Accumulate::automatic},
    {"narrow", Accumulate::narrow},       {"widen", Accumulate::widen},
    {"wide", Accumulate::wide},
    {"reproducible", Accumulate::reproducible}, {"repro", Accumulate::reproducible},
    {"fixed", Accumulate::fixed}, {"fx32", Accumulate::fixed},
};

}  // namespace

std::optional<DataType> parse_data_type(std::string_view s) noexcept { return lookup(kDataTypes, s); }
std::optional<ReduceOp> parse_reduce_op(std::string_view s) noexcept { return lookup(kReduceOps, s); }
std::optional<Collective> parse_collective(std::string_view s) noexcept {
  return lookup(kCollectives, s);
}
std::optional<Accumulate> parse_accumulate(std::string_view s) noexcept {
  return lookup(kAccumulate, s);
}

}  // namespace inc
