// Accumulate::reproducible: an f32/f16/bf16 sum (or avg) as one schedule of i32 collectives
// built from the very algorithm chosen for the call (ring, recursive doubling, Rabenseifner or
// the switch), so that every path adds the same integers (src/numerics/repro.hpp):
//
//   repro_scan    input -> local block exponents        (2 i32 per block of 256 elements)
//   allreduce     i32 max of the block exponents        (the pre-pass; every rank agrees)
//   repro_encode  input -> 2 i32 limbs per element at the agreed exponents
//   allreduce or reduce_scatter, i32 sum of the limbs   (exact: no limb sum leaves i32)
//   repro_decode  limb sums -> the call's type, rounded once
//
// The two collectives are the algorithm's own schedules with their buffers moved into this
// schedule's scratch; infer_dependencies orders the whole.
#include <fmt/format.h>

#include "coll/algorithms_internal.hpp"
#include "numerics/repro.hpp"

namespace inc::coll::detail {

// Appends `sub`'s ops with its input/output/scratch moved to scratch offsets of `s`.
void append_moved(RankSchedule& s, const RankSchedule& sub, Arith arith, std::uint64_t in_off,
                  std::uint64_t out_off, std::uint64_t scratch_off) {
  auto move = [&](Region r) {
    if (r.bytes == 0) return Region{BufferId::scratch, 0, 0};
    const std::uint64_t base = r.buf == BufferId::input    ? in_off
                               : r.buf == BufferId::output ? out_off
                                                           : scratch_off;
    return Region{BufferId::scratch, base + r.offset, r.bytes};
  };
  for (Op o : sub.ops) {
    o.src = move(o.src);
    o.dst = move(o.dst);
    o.arith = arith;
    s.ops.push_back(o);
  }
}

void reproducible_sum(const CollectiveParams& p, RankSchedule& s) {
  namespace rp = numerics::repro;
  const std::uint64_t P = static_cast<std::uint64_t>(p.nranks);
  const std::uint64_t esz = size_of(p.dtype);
  const bool rs = p.coll == Collective::reduce_scatter;
  const std::uint64_t n_in = rs ? p.count * P : p.count;  // elements of the input
  const std::uint64_t n_out = p.count;
  const std::uint64_t nb = rp::blocks(n_in);

  CollectiveParams pre = p;  // the pre-pass: an allreduce of the block exponents
  pre.coll = Collective::allreduce;
  pre.dtype = DataType::i32;
  pre.op = ReduceOp::max;
  pre.count = 2 * nb;
  pre.in_place = false;
  pre.accumulate = Accumulate::automatic;
  if (!supports(Collective::allreduce, pre.algo)) pre.algo = Algorithm::automatic;  // (never: ring, inc)
  CollectiveParams data = p;  // the limbs
  data.dtype = DataType::i32;
  data.op = ReduceOp::sum;
  data.count = rp::kLimbs * p.count;
  data.in_place = false;
  data.accumulate = Accumulate::automatic;
  const RankSchedule pre_s = build_schedule(pre), data_s = build_schedule(data);

  // Scratch: local exponents | agreed exponents | limbs in | limb sums | the two schedules'.
  const std::uint64_t exp_bytes = 2 * nb * 4, limb_in = rp::kLimbs * 4 * n_in,
                      limb_out = rp::kLimbs * 4 * n_out;
  const std::uint64_t o_local = 0, o_exps = exp_bytes, o_in = 2 * exp_bytes, o_out = o_in + limb_in,
                      o_pre = o_out + limb_out, o_data = o_pre + pre_s.scratch_bytes;
  s.scratch_bytes = o_data + data_s.scratch_bytes;

  const Region input{p.in_place ? BufferId::output : BufferId::input, 0, n_in * esz};
  const Region local{BufferId::scratch, o_local, exp_bytes}, exps{BufferId::scratch, o_exps, exp_bytes};
  auto push = [&](OpKind k, Region src, Region dst, Region aux, std::uint64_t elem0) {
    Op o;
    o.kind = k;
    o.src = src;
    o.dst = dst;
    o.aux = aux;
    o.elem0 = elem0;
    s.ops.push_back(o);
  };
  push(OpKind::repro_scan, input, local, {}, 0);
  append_moved(s, pre_s, Arith::i32_max, o_local, o_exps, o_pre);
  push(OpKind::repro_encode, input, {BufferId::scratch, o_in, limb_in}, exps, 0);
  append_moved(s, data_s, Arith::i32_sum, o_in, o_out, o_data);
  const Region result = result_region(p);
  push(OpKind::repro_decode, {BufferId::scratch, o_out, limb_out}, result, exps,
       rs ? static_cast<std::uint64_t>(p.rank) * p.count : 0);
}

}  // namespace inc::coll::detail

namespace inc::coll {

void run_repro_op(const Op& o, const CollectiveParams& p, const std::byte* src, std::byte* dst,
                  const std::byte* aux) {
  namespace rp = numerics::repro;
  const std::uint64_t esz = size_of(p.dtype);
  switch (o.kind) {
    case OpKind::repro_scan: {
      auto* out = reinterpret_cast<std::int32_t*>(dst);
      std::fill(out, out + o.dst.bytes / 4, rp::kZero);
      rp::scan(p.dtype, src, o.src.bytes / esz, o.elem0, out);
      return;
    }
    case OpKind::repro_encode:
      rp::encode(p.dtype, src, o.src.bytes / esz, o.elem0, reinterpret_cast<const std::int32_t*>(aux),
                 p.nranks, reinterpret_cast<std::int32_t*>(dst));
      return;
    case OpKind::repro_decode:
      rp::decode(p.dtype, reinterpret_cast<const std::int32_t*>(src), o.dst.bytes / esz, o.elem0,
                 reinterpret_cast<const std::int32_t*>(aux), p.nranks, dst);
      return;
    default:
      return;
  }
}

}  // namespace inc::coll
