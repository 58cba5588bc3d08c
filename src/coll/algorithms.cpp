// The host collective algorithms, each one rank's ops. Written so that the schedules
//  * read the first operand from the input (no up-front copy) when out of place,
//  * never wait, in a receive, for a send to the same peer in the same step (they also run
//    under rendezvous sends; see schedule.hpp),
//  * skip empty transfers identically on both ends (counts smaller than the rank count).
// docs/ALGORITHMS.md describes each algorithm with its steps and bytes.
#include <bit>
#include <vector>

#include "coll/algorithms_internal.hpp"

namespace inc::coll::detail {

// ---------------------------------------------------------------------------------------------
// Builder

Builder::Builder(const CollectiveParams& params, RankSchedule& sched, std::uint64_t default_segment)
    : p(params),
      s(sched),
      nranks(params.nranks),
      rank(params.rank),
      elem(size_of(params.dtype)),
      seg([&] {
        const std::uint64_t e = size_of(params.dtype);
        const std::uint64_t want = params.segment_bytes ? params.segment_bytes : default_segment;
        return std::max(e, want / e * e);
      }()) {}

Region Builder::in(std::uint64_t off, std::uint64_t n) const {
  if (!p.in_place) return {BufferId::input, off * elem, n * elem};
  const std::uint64_t shift =
      p.coll == Collective::allgather ? static_cast<std::uint64_t>(rank) * p.count : 0;
  return {BufferId::output, (shift + off) * elem, n * elem};
}

Region Builder::out(std::uint64_t off, std::uint64_t n) const {
  const std::uint64_t shift = p.in_place && p.coll == Collective::reduce_scatter
                                  ? static_cast<std::uint64_t>(rank) * p.count
                                  : 0;
  return {BufferId::output, (shift + off) * elem, n * elem};
}

Region Builder::scratch(std::uint64_t off, std::uint64_t n) {
  Region r{BufferId::scratch, off * elem, n * elem};
  if (n) s.scratch_bytes = std::max(s.scratch_bytes, r.offset + r.bytes);
  return r;
}

void Builder::push(OpKind k, int peer, Region src, Region dst, bool fence) {
  Op op;
  op.kind = k;
  op.peer = peer;
  op.src = src;
  op.dst = dst;
  op.fence = fence;
  s.ops.push_back(op);
}

namespace {
Region sub(const Region& r, std::uint64_t off, std::uint64_t bytes) {
  return {r.buf, r.offset + off, bytes};
}
}  // namespace

void Builder::send(int peer, Region src) {
  for (std::uint64_t o = 0; o < src.bytes; o += seg)
    push(OpKind::send, peer, sub(src, o, std::min(seg, src.bytes - o)), {});
}

void Builder::recv(int peer, Region dst) {
  for (std::uint64_t o = 0; o < dst.bytes; o += seg)
    push(OpKind::recv, peer, {}, sub(dst, o, std::min(seg, dst.bytes - o)));
}

void Builder::recv_reduce(int peer, Region src, Region dst) {
  for (std::uint64_t o = 0; o < dst.bytes; o += seg) {
    const std::uint64_t n = std::min(seg, dst.bytes - o);
    push(OpKind::recv_reduce, peer, sub(src, o, n), sub(dst, o, n));
  }
}

void Builder::copy(Region src, Region dst) {
  if (src.bytes == 0 || src == dst) return;
  push(OpKind::copy, -1, src, dst);
}

void Builder::fence_send(int peer) { push(OpKind::send, peer, {}, {}, /*fence=*/true); }
void Builder::zero_recv(int peer) { push(OpKind::recv, peer, {}, {}); }

void Builder::inc_reduce(Region src, Region dst) { push(OpKind::inc_reduce, -1, src, dst); }
void Builder::inc_broadcast(int root, Region src, Region dst) {
  push(OpKind::inc_broadcast, root, src, dst);
}
void Builder::inc_gather(Region src, Region dst) { push(OpKind::inc_gather, -1, src, dst); }

// ---------------------------------------------------------------------------------------------
// Allreduce

// Pipelined ring: p chunks; p-1 reduce-scatter steps (send a chunk to the next rank, receive
// and reduce the previous rank's into ours), then p-1 allgather steps that circulate the
// reduced chunks. Segmenting each transfer lets chunk c's segment j move on as soon as it is
// reduced. The first touch of every chunk reads the input, so no copy is needed out of place.
void allreduce_ring(Builder& b) {
  const int p = b.nranks, r = b.rank;
  const int next = mod(r + 1, p), prev = mod(r - 1, p);
  auto chunk = [&](int c) { return part(b.p.count, static_cast<std::uint64_t>(p), static_cast<std::uint64_t>(c)); };
  for (int step = 0; step < p - 1; ++step) {  // reduce-scatter
    const Part cs = chunk(mod(r - step, p)), cr = chunk(mod(r - step - 1, p));
    b.send(next, step == 0 ? b.in(cs.begin, cs.size) : b.out(cs.begin, cs.size));
    b.recv_reduce(prev, b.in(cr.begin, cr.size), b.out(cr.begin, cr.size));
  }
  // Rank r now holds the reduced chunk r+1.
  for (int step = 0; step < p - 1; ++step) {  // allgather
    const Part cs = chunk(mod(r + 1 - step, p)), cr = chunk(mod(r - step, p));
    b.send(next, b.out(cs.begin, cs.size));
    b.recv(prev, b.out(cr.begin, cr.size));
  }
}


// Recursive doubling: log2 p steps exchanging the whole vector with partner rank ^ 2^k.
// To stay correct when a send completes only with its receive, a step never receives into the
// buffer it sends from: the running sum alternates between output and scratch (n bytes),
// arranged to end in output (in place with an odd number of steps: one final copy).
void allreduce_recursive_doubling(Builder& b) {
  const int r = b.rank;
  const std::uint64_t n = b.p.count;
  const Fold f = fold(b.nranks, r);
  if (sit_out(b, f)) return;
  const int steps = std::countr_zero(static_cast<unsigned>(f.p2));
  const int switches = steps + (f.absorbs ? 1 : 0);
  const bool end_in_output = !(b.p.in_place && switches % 2 == 1);
  auto target = [&](int i) {  // buffer written by switch i
    const bool out = ((switches - 1 - i) % 2 == 0) == end_in_output;
    return out ? b.out(0, n) : b.scratch(0, n);
  };
  Region cur = b.in(0, n);
  int sw = 0;
  if (f.absorbs) {
    const Region next = target(sw++);
    b.recv_reduce(r - 1, cur, next);
    cur = next;
  }
  for (int mask = 1; mask < f.p2; mask <<= 1) {
    const int partner = f.real(f.newrank ^ mask);
    const Region next = target(sw++);
    b.send(partner, cur);
    b.recv_reduce(partner, cur, next);
    cur = next;
  }
  b.copy(cur, b.out(0, n));
  if (f.absorbs) b.send(r - 1, b.out(0, n));
}

// Rabenseifner: recursive-halving reduce-scatter (log2 p steps; at each, send the half of the
// current block range the partner keeps and reduce the partner's half into ours), then
// recursive-doubling allgather of the reduced blocks. p2 blocks; new rank i owns block i.
// Sent and received halves are disjoint, so no scratch is needed.
void allreduce_rabenseifner(Builder& b) {
  const int r = b.rank;
  const std::uint64_t n = b.p.count;
  const Fold f = fold(b.nranks, r);
  if (sit_out(b, f)) return;
  bool fresh = true;  // data still only in the input (nothing reduced into output yet)
  if (f.absorbs) {
    b.recv_reduce(r - 1, b.in(0, n), b.out(0, n));
    fresh = false;
  }
  const auto P2 = static_cast<std::uint64_t>(f.p2);
  auto blocks = [&](int first, int count) {
    return parts(n, P2, static_cast<std::uint64_t>(first), static_cast<std::uint64_t>(count));
  };
  int lo = 0;  // the current block range is [lo, lo + 2*mask)
  for (int mask = f.p2 / 2; mask >= 1; mask >>= 1) {  // reduce-scatter by recursive halving
    const int partner = f.real(f.newrank ^ mask);
    const bool keep_low = (f.newrank & mask) == 0;
    const Part keep = blocks(keep_low ? lo : lo + mask, mask);
    const Part give = blocks(keep_low ? lo + mask : lo, mask);
    b.send(partner, fresh ? b.in(give.begin, give.size) : b.out(give.begin, give.size));
    b.recv_reduce(partner, fresh ? b.in(keep.begin, keep.size) : b.out(keep.begin, keep.size),
                  b.out(keep.begin, keep.size));
    fresh = false;
    if (!keep_low) lo += mask;
  }
  rabenseifner_allgather(b, f);
}

void rabenseifner_allgather(Builder& b, const Fold& f) {
  const std::uint64_t n = b.p.count, P2 = static_cast<std::uint64_t>(f.p2);
  auto blocks = [&](int first, int count) {
    return parts(n, P2, static_cast<std::uint64_t>(first), static_cast<std::uint64_t>(count));
  };
  for (int mask = 1; mask < f.p2; mask <<= 1) {  // allgather by recursive doubling
    const int partner = f.real(f.newrank ^ mask);
    const Part mine = blocks(f.newrank / mask * mask, mask);
    const Part theirs = blocks((f.newrank ^ mask) / mask * mask, mask);
    b.send(partner, b.out(mine.begin, mine.size));
    b.recv(partner, b.out(theirs.begin, theirs.size));
  }
  if (f.absorbs) b.send(b.rank - 1, b.out(0, n));
}

// ---------------------------------------------------------------------------------------------
// Reduce-scatter

// Ring: p-1 steps; at step s rank r sends its partial of shard r-s-1 and reduces the previous
// rank's partial of shard r-s-2 into its own, so that the last step completes shard r.
// Out of place the partials alternate between two shard-sized scratch slots (the input is
// read-only); in place they accumulate in the input layout of the one buffer.
void reduce_scatter_ring(Builder& b) {
  const int p = b.nranks, r = b.rank;
  const int next = mod(r + 1, p), prev = mod(r - 1, p);
  const std::uint64_t n = b.p.count;
  auto shard = [&](int c) { return static_cast<std::uint64_t>(c) * n; };
  auto partial = [&](int step, int c) {  // where this rank's partial of shard c lives
    return b.p.in_place ? b.in(shard(c), n) : b.scratch(static_cast<std::uint64_t>(step % 2) * n, n);
  };
  for (int step = 0; step < p - 1; ++step) {
    const int cs = mod(r - step - 1, p), cr = mod(r - step - 2, p);
    b.send(next, step == 0 ? b.in(shard(cs), n) : partial(step - 1, cs));
    const Region dst = step == p - 2 ? b.out(0, n) : partial(step, cr);
    b.recv_reduce(prev, b.in(shard(cr), n), dst);
  }
}

}  // namespace inc::coll::detail

namespace inc::coll {

// The rings above only name next = r + 1 and prev = r - 1 and chunks r - step (mod p): rotating
// the rank rotates every peer and chunk. Sizes rotate too, so they must all be equal: the
// Allreduce ring's p chunks are when p divides count; reduce_scatter's shards and allgather's
// blocks always are.
bool rotation_symmetric(const CollectiveParams& p_in) noexcept {
  CollectiveParams p = p_in;
  p.algo = select_algorithm(p);
  if (p.algo != Algorithm::ring || p.nranks < 2 || p.count == 0) return false;
  const Accumulate acc = host_accumulate(p);
  if (acc == Accumulate::wide || acc == Accumulate::widen) return false;  // (not claimed)
  switch (p.coll) {
    case Collective::allreduce:
      return p.count % static_cast<std::uint64_t>(p.nranks) == 0;
    case Collective::reduce_scatter:
    case Collective::allgather:
      return true;
    default:
      return false;
  }
}

}  // namespace inc::coll

namespace inc::coll::detail {

// ---------------------------------------------------------------------------------------------
// Allgather

// Ring: p-1 steps; at step s rank r forwards block r-s to the next rank and receives block
// r-s-1 from the previous one.
void allgather_ring(Builder& b) {
  const int p = b.nranks, r = b.rank;
  const int next = mod(r + 1, p), prev = mod(r - 1, p);
  const std::uint64_t n = b.p.count;
  auto block = [&](int c) { return b.out(static_cast<std::uint64_t>(c) * n, n); };
  b.copy(b.in(0, n), block(r));
  for (int step = 0; step < p - 1; ++step) {
    b.send(next, step == 0 ? b.in(0, n) : block(mod(r - step, p)));
    b.recv(prev, block(mod(r - step - 1, p)));
  }
}

// Recursive doubling for a power of two (log2 p steps, exchanging the aligned group of blocks
// gathered so far with rank ^ 2^k); Bruck otherwise (ceil(log2 p) steps: at step k send the
// first min(2^k, p-2^k) blocks, counted from our own, to rank r-2^k and receive as many from
// rank r+2^k). Bruck's rotated positions are mapped straight to the output, so no final
// rotation is needed; a range that wraps around the end is sent as two messages.
void allgather_recursive_doubling(Builder& b) {
  const int p = b.nranks, r = b.rank;
  const std::uint64_t n = b.p.count;
  auto blocks = [&](int first, int count) {
    return b.out(static_cast<std::uint64_t>(first) * n, static_cast<std::uint64_t>(count) * n);
  };
  b.copy(b.in(0, n), blocks(r, 1));
  if (std::has_single_bit(static_cast<unsigned>(p))) {
    for (int mask = 1; mask < p; mask <<= 1) {
      const int partner = r ^ mask;
      b.send(partner, mask == 1 ? b.in(0, n) : blocks(r / mask * mask, mask));
      b.recv(partner, blocks(partner / mask * mask, mask));
    }
    return;
  }
  // Blocks [first, first+count) modulo p, as at most two contiguous pieces.
  auto pieces = [&](int first, int count, auto&& emit) {
    const int head = std::min(count, p - first);
    emit(blocks(first, head));
    if (count > head) emit(blocks(0, count - head));
  };
  for (int d = 1; d < p; d <<= 1) {
    const int m = std::min(d, p - d);
    const int to = mod(r - d, p), from = mod(r + d, p);
    if (d == 1) {
      b.send(to, b.in(0, n));
    } else {
      pieces(r, m, [&](Region reg) { b.send(to, reg); });
    }
    pieces(mod(r + d, p), m, [&](Region reg) { b.recv(from, reg); });
  }
}

// ---------------------------------------------------------------------------------------------
// Broadcast

// Binomial tree rooted at `root` (relative ranks): receive from the parent (relative rank with
// its lowest set bit cleared), then send to the children from the largest subtree down.
// With segment_bytes set, each segment flows down the tree on its own (pipelined tree).
void broadcast_binomial(Builder& b) {
  const int p = b.nranks, r = b.rank, root = b.p.root;
  const int vr = mod(r - root, p);
  const std::uint64_t n = b.p.count;
  const Region data = b.out(0, n);
  const Region src = vr == 0 ? b.in(0, n) : data;
  std::vector<int> children;
  const int low = vr == 0 ? static_cast<int>(std::bit_ceil(static_cast<unsigned>(p))) : (vr & -vr);
  for (int mask = low >> 1; mask >= 1; mask >>= 1)
    if (vr + mask < p) children.push_back(mod(vr + mask + root, p));
  const int parent = vr == 0 ? -1 : mod((vr & (vr - 1)) + root, p);
  if (vr == 0) b.copy(b.in(0, n), data);
  for (std::uint64_t o = 0; o < data.bytes; o += b.seg) {
    const std::uint64_t len = std::min(b.seg, data.bytes - o);
    if (parent >= 0) b.recv(parent, sub(data, o, len));
    for (int c : children) b.send(c, sub(src, o, len));
  }
}

// Pipelined chain root -> root+1 -> ... -> root-1: each segment is received from the previous
// rank and forwarded to the next, so all links carry different segments at once.
void broadcast_chain(Builder& b) {
  const int p = b.nranks, r = b.rank, root = b.p.root;
  const int vr = mod(r - root, p);
  const std::uint64_t n = b.p.count;
  const Region data = b.out(0, n);
  const Region src = vr == 0 ? b.in(0, n) : data;
  if (vr == 0) b.copy(b.in(0, n), data);
  for (std::uint64_t o = 0; o < data.bytes; o += b.seg) {
    const std::uint64_t len = std::min(b.seg, data.bytes - o);
    if (vr > 0) b.recv(mod(r - 1, p), sub(data, o, len));
    if (vr < p - 1) b.send(mod(r + 1, p), sub(src, o, len));
  }
}

// ---------------------------------------------------------------------------------------------
// Alltoall

// Pairwise exchange for any p: at step k rank r exchanges with peer (k - r) mod p, a symmetric
// pairing (the peer's peer is r) that meets every peer once in p steps; the step where the
// peer is r itself is the local copy. In place, a block is received into one of two scratch
// slots and copied over the block only after it was sent.
void alltoall_pairwise(Builder& b) {
  const int p = b.nranks, r = b.rank;
  const std::uint64_t n = b.p.count;
  auto block_in = [&](int j) { return b.in(static_cast<std::uint64_t>(j) * n, n); };
  auto block_out = [&](int j) { return b.out(static_cast<std::uint64_t>(j) * n, n); };
  int exchanges = 0;
  for (int k = 0; k < p; ++k) {
    const int peer = mod(k - r, p);
    if (peer == r) {
      b.copy(block_in(r), block_out(r));
      continue;
    }
    b.send(peer, block_in(peer));
    if (b.p.in_place) {
      const Region slot = b.scratch(static_cast<std::uint64_t>(exchanges % 2) * n, n);
      b.recv(peer, slot);
      b.copy(slot, block_out(peer));
    } else {
      b.recv(peer, block_out(peer));
    }
    ++exchanges;
  }
}

// ---------------------------------------------------------------------------------------------
// Barrier

// Dissemination: ceil(log2 p) rounds of zero-byte messages; in round k rank r signals r+2^k
// and waits for r-2^k. Each round's send is a fence, so it follows the previous round's
// receive: after the last round every rank has heard, transitively, from every other.
void barrier_dissemination(Builder& b) {
  const int p = b.nranks, r = b.rank;
  for (int d = 1; d < p; d <<= 1) {
    b.fence_send(mod(r + d, p));
    b.zero_recv(mod(r - d, p));
  }
}

// ---------------------------------------------------------------------------------------------
// Core-INC: the collective as a sequence of switch operations of at most `seg` bytes, the same
// sequence on every rank (the k-th inc op of all ranks is one switch operation).
void inc_collective(Builder& b) {
  const int p = b.nranks, r = b.rank;
  const std::uint64_t n = b.p.count;
  const Region none{BufferId::output, 0, 0};
  auto segments = [&](std::uint64_t bytes, auto&& emit) {
    for (std::uint64_t o = 0; o < bytes; o += b.seg) emit(o, std::min(b.seg, bytes - o));
  };
  switch (b.p.coll) {
    case Collective::allreduce: {
      const Region src = b.in(0, n), dst = b.out(0, n);
      segments(dst.bytes, [&](std::uint64_t o, std::uint64_t len) {
        b.inc_reduce(sub(src, o, len), sub(dst, o, len));
      });
      break;
    }
    case Collective::reduce_scatter:
      if (n * static_cast<std::uint64_t>(p) * b.elem <= std::min(b.seg, kIncSmallBytes)) {
        // Small: one switch operation over the whole vector (one chunk rather than one per
        // shard, which costs a round trip each); every rank keeps its own shard.
        const Region all = b.scratch(0, n * static_cast<std::uint64_t>(p));
        b.inc_reduce(b.in(0, n * static_cast<std::uint64_t>(p)), all);
        b.copy(sub(all, static_cast<std::uint64_t>(r) * n * b.elem, n * b.elem), b.out(0, n));
        break;
      }
      // Shard by shard; only the shard's owner receives the aggregate.
      for (int owner = 0; owner < p; ++owner) {
        const Region src = b.in(static_cast<std::uint64_t>(owner) * n, n), dst = b.out(0, n);
        segments(src.bytes, [&](std::uint64_t o, std::uint64_t len) {
          b.inc_reduce(sub(src, o, len), owner == r ? sub(dst, o, len) : none);
        });
      }
      break;
    case Collective::allgather:
      if (n * static_cast<std::uint64_t>(p) * b.elem <= std::min(b.seg, kIncSmallBytes)) {
        // Small: all blocks in one switch operation (in place, this rank's block is both).
        b.inc_gather(b.in(0, n), b.out(0, n * static_cast<std::uint64_t>(p)));
        break;
      }
      // Block by block, from its owner, which copies its own block locally (in place it is
      // already there) rather than receive it back from the switch.
      for (int owner = 0; owner < p; ++owner) {
        const Region src = b.in(0, n), dst = b.out(static_cast<std::uint64_t>(owner) * n, n);
        const bool mine = owner == r;
        if (mine) b.copy(src, dst);
        segments(dst.bytes, [&](std::uint64_t o, std::uint64_t len) {
          b.inc_broadcast(owner, mine ? sub(src, o, len) : none, mine ? none : sub(dst, o, len));
        });
      }
      break;
    case Collective::broadcast: {
      // The root copies locally (nothing in place) and only sends.
      const bool root = r == b.p.root;
      const Region src = b.in(0, n), dst = b.out(0, n);
      if (root) b.copy(src, dst);
      segments(dst.bytes, [&](std::uint64_t o, std::uint64_t len) {
        b.inc_broadcast(b.p.root, root ? sub(src, o, len) : none, root ? none : sub(dst, o, len));
      });
      break;
    }
    case Collective::barrier:
      // One switch operation without data: it completes when every rank has issued it.
      b.inc_reduce(none, none);
      break;
    case Collective::alltoall:
      break;  // not supported by inc (build_schedule rejects it)
  }
}

}  // namespace inc::coll::detail
