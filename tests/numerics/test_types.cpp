// Name parsers of the public enums.
#include <gtest/gtest.h>

#include "inc/types.hpp"

namespace inc {
namespace {

TEST(Types, CanonicalNamesRoundTrip) {
  for (int i = 0; i < kNumDataTypes; ++i) {
    const auto t = static_cast<DataType>(i);
    EXPECT_EQ(parse_data_type(name(t)), t) << name(t);
  }
  for (int i = 0; i < kNumReduceOps; ++i) {
    const auto op = static_cast<ReduceOp>(i);
    EXPECT_EQ(parse_reduce_op(name(op)), op) << name(op);
  }
  for (int i = 0; i < kNumCollectives; ++i) {
    const auto c = static_cast<Collective>(i);
    EXPECT_EQ(parse_collective(name(c)), c) << name(c);
  }
}

TEST(Types, DataTypeAliases) {
  struct { const char* s; DataType t; } cases[] = {
      {"float", DataType::f32},   {"float32", DataType::f32},  {"fp32", DataType::f32},
      {"FLOAT", DataType::f32},   {"double", DataType::f64},   {"float64", DataType::f64},
      {"half", DataType::f16},    {"float16", DataType::f16},  {"fp16", DataType::f16},
      {"bfloat16", DataType::bf16}, {"BF16", DataType::bf16},  {"int8", DataType::i8},
      {"char", DataType::i8},     {"uint8", DataType::u8},     {"int32", DataType::i32},
      {"int", DataType::i32},     {"uint32", DataType::u32},   {"int64", DataType::i64},
      {"uint64", DataType::u64},  {"Int64", DataType::i64},
      {"fp8e4m3", DataType::e4m3}, {"E4M3", DataType::e4m3}, {"float8_e4m3fn", DataType::e4m3},
      {"fp8e5m2", DataType::e5m2}, {"e5m2", DataType::e5m2}, {"float8_e5m2", DataType::e5m2},
      {"int4", DataType::i4},     {"i4", DataType::i4},
  };
  for (const auto& c : cases) EXPECT_EQ(parse_data_type(c.s), c.t) << c.s;
}

TEST(Types, OpAndCollectiveAliases) {
  EXPECT_EQ(parse_reduce_op("mean"), ReduceOp::avg);
  EXPECT_EQ(parse_reduce_op("AVG"), ReduceOp::avg);
  EXPECT_EQ(parse_reduce_op("add"), ReduceOp::sum);
  EXPECT_EQ(parse_reduce_op("product"), ReduceOp::prod);
  EXPECT_EQ(parse_reduce_op("Max"), ReduceOp::max);
  EXPECT_EQ(parse_collective("all_reduce"), Collective::allreduce);
  EXPECT_EQ(parse_collective("ReduceScatter"), Collective::reduce_scatter);
  EXPECT_EQ(parse_collective("bcast"), Collective::broadcast);
}

TEST(Types, RejectsUnknownAndNearMisses) {
  for (const char* s : {"", "f", "f128", "float ", " float", "int16", "uint", "bfloat", "fp8", "e4m3fnuz", "u4"})
    EXPECT_FALSE(parse_data_type(s).has_value()) << '"' << s << '"';
  for (const char* s : {"", "sum ", "minimum", "xor", "avgs"})
    EXPECT_FALSE(parse_reduce_op(s).has_value()) << '"' << s << '"';
  for (const char* s : {"", "all", "reduce", "scatter", "gather"})
    EXPECT_FALSE(parse_collective(s).has_value()) << '"' << s << '"';
  EXPECT_FALSE(parse_data_type(std::string_view("f32\0", 4)).has_value());
}

}  // namespace
}  // namespace inc
