// The collective descriptor carried by every data message (executor.hpp): what each message
// says about the collective it belongs to, so that a mismatch between ranks is an error naming
// both sides rather than a hang or wrong data.
#include <fmt/format.h>

#include <cstring>

#include "coll/executor.hpp"

namespace inc::coll {

namespace {
struct PackedDesc {
  std::uint8_t coll, dtype, op, algo;
  std::int32_t root;
  std::uint64_t count;
  std::uint32_t nranks;
  std::uint32_t accumulate;
  std::uint64_t segment_bytes;
};
static_assert(sizeof(PackedDesc) == 32);
}  // namespace

void encode_descriptor(const CollectiveParams& p, std::uint8_t (&desc)[32]) {
  PackedDesc d{static_cast<std::uint8_t>(p.coll),
               static_cast<std::uint8_t>(p.dtype),
               static_cast<std::uint8_t>(p.op),
               static_cast<std::uint8_t>(p.algo),
               p.root,
               p.count,
               static_cast<std::uint32_t>(p.nranks),
               static_cast<std::uint32_t>(p.accumulate),
               p.segment_bytes};
  std::memcpy(desc, &d, sizeof d);
}

CollectiveParams decode_descriptor(const std::uint8_t (&desc)[32]) {
  PackedDesc d;
  std::memcpy(&d, desc, sizeof d);
  CollectiveParams p;
  p.coll = static_cast<Collective>(d.coll);
  p.dtype = static_cast<DataType>(d.dtype);
  p.op = static_cast<ReduceOp>(d.op);
  p.algo = static_cast<Algorithm>(d.algo);
  p.root = d.root;
  p.count = d.count;
  p.nranks = static_cast<int>(d.nranks);
  p.segment_bytes = d.segment_bytes;
  p.accumulate = static_cast<Accumulate>(d.accumulate & 0xFF);
  return p;
}

std::string describe_params(const CollectiveParams& p) {
  const Accumulate acc = host_accumulate(p);
  std::string s = fmt::format("{} of {} x {}{}", name(p.coll), p.count, name(p.dtype),
                              acc == Accumulate::reproducible ? " reproducible"
                              : acc == Accumulate::narrow     ? ""
                                                              : fmt::format(" ({} accumulator)", name(acc)));
  if (p.coll == Collective::allreduce || p.coll == Collective::reduce_scatter)
    s += fmt::format(" ({}, {})", name(p.op), name(p.algo));
  else if (p.coll == Collective::broadcast)
    s += fmt::format(" (root {}, {})", p.root, name(p.algo));
  else
    s += fmt::format(" ({})", name(p.algo));
  return s;
}

}  // namespace inc::coll
