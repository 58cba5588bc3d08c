// Wide accumulators on the hosts: Accumulate::wide and Accumulate::widen for f16, bf16, e4m3,
// e5m2 and MX sums (and avg's sum) of allreduce and reduce_scatter (docs/NUMERICS.md "Wide
// accumulators on the hosts"). Both are schedules, so the runtime, run_local and the simulator
// run (and count) the same ops:
//
//   wide:   widen    input -> f32 (exact; MX blocks decoded)
//           the call's algorithm on f32: its own schedule moved into scratch, Arith::f32
//           narrow   the f32 result -> the call's type, once (every rank rounds the same f32)
//   widen:  the first aggregating step sends each rank's own data in the call's type (the
//           receiver widens it); partial sums between hosts travel as f32; each chunk is rounded
//           once where it is complete (ring, Rabenseifner: by its owner at the end of the
//           reduce-scatter; recursive doubling: by every rank after its last step, the same f32
//           sum on each); the allgather phase and the fold's hand-back move the call's type.
//
// Both add the same f32 values in the same order as the algorithm's f32 schedule, so they give
// the same bits: round_once(the f32 algorithm's sum of the widened inputs).
#include "coll/algorithms_internal.hpp"
#include "numerics/widening.hpp"

namespace inc::coll {

namespace {

bool has_wide_sum(DataType t) noexcept { return numerics::has_width_passes(t); }

// Bytes of one unit of the call's type widened to f32 (MX: a block of 32 values).
std::uint64_t wide_unit(DataType t) noexcept { return 4 * elements_per_unit(t); }

}  // namespace

Accumulate host_accumulate(const CollectiveParams& p) noexcept {
  if (reproducible(p)) return Accumulate::reproducible;
  const bool sum = p.op == ReduceOp::sum || p.op == ReduceOp::avg;
  const bool reduces = p.coll == Collective::allreduce || p.coll == Collective::reduce_scatter;
  if (!sum || !reduces || !has_wide_sum(p.dtype) || p.algo == Algorithm::inc || p.nranks < 2 || p.count == 0)
    return Accumulate::narrow;
  switch (p.accumulate) {
    case Accumulate::wide:
      return Accumulate::wide;
    case Accumulate::widen:
    case Accumulate::fixed:  // (the switch runs 16- and 8-bit sums under fixed as widen)
      return Accumulate::widen;
    default:
      return Accumulate::narrow;
  }
}

std::uint64_t run_width_op(const Op& o, DataType t, const std::byte* src, std::byte* dst) {
  // Vectorised passes (numerics/widening.hpp; f32 regions are 4-byte aligned scratch). narrow:
  // one rounding; a finite f32 that rounds to a non-finite value is an overflow event (as the
  // switch's root and the wide path's hosts count it). MX encoding saturates: none.
  const std::uint64_t units = (o.kind == OpKind::widen ? o.src.bytes : o.dst.bytes) / size_of(t);
  if (o.kind == OpKind::widen) {
    numerics::widen_to_f32(t, src, units, reinterpret_cast<float*>(dst));
    return 0;
  }
  return numerics::narrow_from_f32(t, reinterpret_cast<const float*>(src), units, dst);
}

bool is_local_pass(OpKind k) noexcept {
  return k == OpKind::repro_scan || k == OpKind::repro_encode || k == OpKind::repro_decode ||
         k == OpKind::widen || k == OpKind::narrow;
}

std::uint64_t run_local_op(const Op& o, const CollectiveParams& p, const std::byte* src, std::byte* dst,
                           const std::byte* aux) {
  if (o.kind == OpKind::widen || o.kind == OpKind::narrow) return run_width_op(o, p.dtype, src, dst);
  run_repro_op(o, p, src, dst, aux);
  return 0;
}

}  // namespace inc::coll

namespace inc::coll::detail {

void wide_sum(const CollectiveParams& p, RankSchedule& s) {
  const std::uint64_t P = static_cast<std::uint64_t>(p.nranks);
  const std::uint64_t U = size_of(p.dtype), W = wide_unit(p.dtype);
  const bool rs = p.coll == Collective::reduce_scatter;
  const std::uint64_t n_in = rs ? p.count * P : p.count, n_out = p.count;  // units
  CollectiveParams f = p;  // the same algorithm on the widened values
  f.dtype = DataType::f32;
  f.count = p.count * elements_per_unit(p.dtype);
  f.in_place = false;
  f.accumulate = Accumulate::automatic;
  const RankSchedule sub = build_schedule(f);
  const std::uint64_t o_in = 0, o_out = n_in * W, o_sub = o_out + n_out * W;
  s.scratch_bytes = o_sub + sub.scratch_bytes;
  auto push = [&](OpKind k, Region src, Region dst) {
    Op o;
    o.kind = k;
    o.src = src;
    o.dst = dst;
    s.ops.push_back(o);
  };
  push(OpKind::widen, {p.in_place ? BufferId::output : BufferId::input, 0, n_in * U},
       {BufferId::scratch, o_in, n_in * W});
  append_moved(s, sub, Arith::f32, o_in, o_out, o_sub);
  push(OpKind::narrow, {BufferId::scratch, o_out, n_out * W}, result_region(p));
}

namespace {

// The widen schedules' f32 regions and local ops, beside a Builder of the call's type. Scratch:
// acc | tmp | slot (the call's type, received first hops) | acc2 (recursive doubling only),
// each of `n` units; f32 regions stay 4-byte aligned, slots whole units (an MX block: 33 B).
class Wider {
 public:
  Wider(Builder& b, std::uint64_t n)
      : b_(b),
        n_(n),
        W_(wide_unit(b.p.dtype)),
        wseg_(b.seg / b.elem > ~std::uint64_t{0} / W_ ? ~std::uint64_t{0} : b.seg / b.elem * W_),
        o_tmp_(n * W_),
        o_slot_(up(2 * n * W_, 4 * b.elem)),
        o_acc2_(up(o_slot_ + n * b.elem, 4)) {}

  Region acc(std::uint64_t off, std::uint64_t k) { return grow({BufferId::scratch, off * W_, k * W_}); }
  Region acc2(std::uint64_t off, std::uint64_t k) { return grow({BufferId::scratch, o_acc2_ + off * W_, k * W_}); }
  Region tmp(std::uint64_t off, std::uint64_t k) { return grow({BufferId::scratch, o_tmp_ + off * W_, k * W_}); }
  Region slot(std::uint64_t off, std::uint64_t k) {
    return grow({BufferId::scratch, o_slot_ + off * b_.elem, k * b_.elem});
  }

  void widen(Region narrow, Region wide) { local(OpKind::widen, narrow, wide); }
  void narrow(Region wide, Region narrow) { local(OpKind::narrow, wide, narrow); }
  // f32 partial sums on the wire, in messages of as many elements as the call's type's.
  void send(int peer, Region wide) {
    for (std::uint64_t o = 0; o < wide.bytes; o += wseg_) push(OpKind::send, peer, sub(wide, o, wseg_), {});
  }
  void recv_reduce(int peer, Region own, Region dst) {
    for (std::uint64_t o = 0; o < dst.bytes; o += wseg_)
      push(OpKind::recv_reduce, peer, sub(own, o, wseg_), sub(dst, o, wseg_), Arith::f32);
  }
  // dst (f32) = own (f32; may be dst) (op) the peer's own data, sent in the call's type: it is
  // received into `slot` and widened, segment by segment as the sender's Builder splits it.
  void recv_narrow(int peer, Region slot, Region tmp, Region own, Region dst) {
    const std::uint64_t E = b_.elem;
    for (std::uint64_t o = 0; o < slot.bytes; o += b_.seg) {
      const std::uint64_t len = std::min(b_.seg, slot.bytes - o), wo = o / E * W_, wl = len / E * W_;
      const Region s = sub(slot, o, len), d = sub(dst, wo, wl);
      push(OpKind::recv, peer, {}, s);
      if (own == dst) {
        const Region t = sub(tmp, wo, wl);
        local(OpKind::widen, s, t);
        push(OpKind::reduce, -1, t, d, Arith::f32);
      } else {
        local(OpKind::widen, s, d);
        push(OpKind::reduce, -1, sub(own, wo, wl), d, Arith::f32);
      }
    }
  }

 private:
  static std::uint64_t up(std::uint64_t x, std::uint64_t m) { return (x + m - 1) / m * m; }
  static Region sub(Region r, std::uint64_t off, std::uint64_t max) {
    return {r.buf, r.offset + off, std::min(max, r.bytes - off)};
  }
  Region grow(Region r) {
    if (r.bytes) b_.s.scratch_bytes = std::max(b_.s.scratch_bytes, r.offset + r.bytes);
    return r;
  }
  void local(OpKind k, Region src, Region dst) {
    if (src.bytes || dst.bytes) push(k, -1, src, dst);
  }
  void push(OpKind k, int peer, Region src, Region dst, Arith a = Arith::call) {
    Op op;
    op.kind = k;
    op.peer = peer;
    op.src = src;
    op.dst = dst;
    op.arith = a;
    b_.s.ops.push_back(op);
  }

  Builder& b_;
  const std::uint64_t n_, W_, wseg_, o_tmp_, o_slot_, o_acc2_;
};

// Pipelined ring (algorithms.cpp's allreduce_ring): step 0 sends this rank's chunk as it is,
// the next p - 2 steps f32 partials; the rank completing chunk r + 1 rounds it once; the
// allgather circulates the rounded chunks.
void widen_ring(Builder& b) {
  const int p = b.nranks, r = b.rank;
  const int next = mod(r + 1, p), prev = mod(r - 1, p);
  Wider w(b, b.p.count);
  auto chunk = [&](int c) { return part(b.p.count, static_cast<std::uint64_t>(p), static_cast<std::uint64_t>(c)); };
  for (int step = 0; step < p - 1; ++step) {
    const Part cs = chunk(mod(r - step, p)), cr = chunk(mod(r - step - 1, p));
    if (step == 0) b.send(next, b.in(cs.begin, cs.size));
    else w.send(next, w.acc(cs.begin, cs.size));
    const Region acc = w.acc(cr.begin, cr.size);
    w.widen(b.in(cr.begin, cr.size), acc);
    if (step == 0) w.recv_narrow(prev, w.slot(cr.begin, cr.size), w.tmp(cr.begin, cr.size), acc, acc);
    else w.recv_reduce(prev, acc, acc);
  }
  const Part mine = chunk(mod(r + 1, p));
  w.narrow(w.acc(mine.begin, mine.size), b.out(mine.begin, mine.size));
  for (int step = 0; step < p - 1; ++step) {  // allgather, in the call's type
    const Part cs = chunk(mod(r + 1 - step, p)), cr = chunk(mod(r - step, p));
    b.send(next, b.out(cs.begin, cs.size));
    b.recv(prev, b.out(cr.begin, cr.size));
  }
}

// Reduce-scatter ring (reduce_scatter_ring): the partials alternate between two shard-sized f32
// slots; the last step's is this rank's shard, rounded once into the output.
void widen_reduce_scatter_ring(Builder& b) {
  const int p = b.nranks, r = b.rank;
  const int next = mod(r + 1, p), prev = mod(r - 1, p);
  const std::uint64_t n = b.p.count;
  Wider w(b, 2 * n);  // acc: two slots of n units
  auto shard = [&](int c) { return static_cast<std::uint64_t>(c) * n; };
  auto partial = [&](int step) { return w.acc(static_cast<std::uint64_t>(step % 2) * n, n); };
  for (int step = 0; step < p - 1; ++step) {
    const int cs = mod(r - step - 1, p), cr = mod(r - step - 2, p);
    if (step == 0) b.send(next, b.in(shard(cs), n));
    else w.send(next, partial(step - 1));
    const Region acc = partial(step);
    w.widen(b.in(shard(cr), n), acc);
    if (step == 0) w.recv_narrow(prev, w.slot(0, n), w.tmp(0, n), acc, acc);
    else w.recv_reduce(prev, acc, acc);
    if (step == p - 2) w.narrow(acc, b.out(0, n));
  }
}

// Recursive doubling (allreduce_recursive_doubling): a rank's first exchange sends its input as
// it is (an absorbing rank of the fold has already added its neighbour's: f32), later ones f32;
// every rank rounds its f32 sum (the same on all: f32 adds commute) once at the end.
void widen_recursive_doubling(Builder& b) {
  const int P = b.nranks, r = b.rank;
  const std::uint64_t n = b.p.count;
  const Fold f = fold(P, r);
  if (sit_out(b, f)) return;
  Wider w(b, n);
  int sw = 0;
  auto target = [&] { return sw++ % 2 == 0 ? w.acc(0, n) : w.acc2(0, n); };
  Region cur{};
  bool fresh = true;
  if (f.absorbs) {
    cur = target();
    w.widen(b.in(0, n), cur);
    w.recv_narrow(r - 1, w.slot(0, n), w.tmp(0, n), cur, cur);
    fresh = false;
  }
  for (int mask = 1; mask < f.p2; mask <<= 1) {
    const int partner = f.real(f.newrank ^ mask);
    const bool partner_fresh = mask == 1 && !fold(P, partner).absorbs;
    const Region next = target();
    if (fresh) b.send(partner, b.in(0, n));
    else w.send(partner, cur);
    Region own = cur;
    if (fresh) {
      w.widen(b.in(0, n), next);
      own = next;
    }
    if (partner_fresh) w.recv_narrow(partner, w.slot(0, n), w.tmp(0, n), own, next);
    else w.recv_reduce(partner, own, next);
    cur = next;
    fresh = false;
  }
  w.narrow(cur, b.out(0, n));
  if (f.absorbs) b.send(r - 1, b.out(0, n));
}

// Rabenseifner (allreduce_rabenseifner): the first halving step sends the input as it is, the
// others f32 halves; new rank i rounds its block once, then the recursive-doubling allgather
// moves the rounded blocks.
void widen_rabenseifner(Builder& b) {
  const int P = b.nranks, r = b.rank;
  const std::uint64_t n = b.p.count;
  const Fold f = fold(P, r);
  if (sit_out(b, f)) return;
  Wider w(b, n);
  bool fresh = true;
  if (f.absorbs) {
    w.widen(b.in(0, n), w.acc(0, n));
    w.recv_narrow(r - 1, w.slot(0, n), w.tmp(0, n), w.acc(0, n), w.acc(0, n));
    fresh = false;
  }
  const auto P2 = static_cast<std::uint64_t>(f.p2);
  auto blocks = [&](int first, int count) {
    return parts(n, P2, static_cast<std::uint64_t>(first), static_cast<std::uint64_t>(count));
  };
  int lo = 0;
  for (int mask = f.p2 / 2; mask >= 1; mask >>= 1) {
    const int partner = f.real(f.newrank ^ mask);
    const bool partner_fresh = mask == f.p2 / 2 && !fold(P, partner).absorbs;
    const bool keep_low = (f.newrank & mask) == 0;
    const Part keep = blocks(keep_low ? lo : lo + mask, mask);
    const Part give = blocks(keep_low ? lo + mask : lo, mask);
    if (fresh) b.send(partner, b.in(give.begin, give.size));
    else w.send(partner, w.acc(give.begin, give.size));
    const Region acc = w.acc(keep.begin, keep.size);
    if (fresh) w.widen(b.in(keep.begin, keep.size), acc);
    if (partner_fresh) w.recv_narrow(partner, w.slot(keep.begin, keep.size), w.tmp(keep.begin, keep.size), acc, acc);
    else w.recv_reduce(partner, acc, acc);
    fresh = false;
    if (!keep_low) lo += mask;
  }
  const Part mine = blocks(f.newrank, 1);
  w.narrow(w.acc(mine.begin, mine.size), b.out(mine.begin, mine.size));
  rabenseifner_allgather(b, f);  // in the call's type
}

}  // namespace

void widen_sum(Builder& b) {
  if (b.p.coll == Collective::reduce_scatter) return widen_reduce_scatter_ring(b);
  switch (b.p.algo) {
    case Algorithm::recursive_doubling:
      return widen_recursive_doubling(b);
    case Algorithm::rabenseifner:
      return widen_rabenseifner(b);
    default:
      return widen_ring(b);
  }
}

}  // namespace inc::coll::detail
