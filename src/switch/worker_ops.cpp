// WorkerOp builders (how each collective maps to segments of the job's chunk stream), the
// cursor that cuts an op into chunks, and the chunk payloads sent.
#include <algorithm>
#include <cstring>

#include "src/switch/arith.hpp"
#include "src/switch/worker.hpp"
#include "src/switch/worker_internal.hpp"

namespace inc::sw {

using namespace detail;
using proto::Header;
using proto::PacketType;

std::string_view name(WorkerErrorKind k) noexcept {
  constexpr std::string_view names[] = {"none",     "invalid",     "timeout",   "switch_restarted",
                                        "job_failed", "rejected", "unsupported", "nonfinite",
                                        "protocol", "mismatch"};
  return names[static_cast<unsigned>(k)];
}

// ---- op builders ------------------------------------------------------------------------------

WorkerOp WorkerOp::allreduce(NumKind k, ReduceKind op, std::span<const std::byte> in,
                             std::span<std::byte> out, std::uint64_t count, std::uint32_t nranks) {
  WorkerOp w;
  w.label = "allreduce";
  w.kind = k;
  w.op = op;
  w.contributors = nranks;
  if (count) w.segments.push_back({count, in, out});
  return w;
}

WorkerOp WorkerOp::reduce_scatter(NumKind k, ReduceKind op, std::span<const std::byte> in,
                                  std::span<std::byte> out, std::uint64_t count,
                                  std::uint32_t nranks, std::uint32_t rank) {
  WorkerOp w;
  w.label = "reduce_scatter";
  w.kind = k;
  w.op = op;
  w.contributors = nranks;
  const std::size_t bytes = count * elem_bytes(k);
  if (count)
    for (std::uint32_t r = 0; r < nranks; ++r)
      w.segments.push_back({count, in.empty() ? in : in.subspan(r * bytes, bytes),
                            r == rank ? out : std::span<std::byte>{}});
  return w;
}

WorkerOp WorkerOp::reduce(NumKind k, ReduceKind op, std::span<const std::byte> in,
                          std::span<std::byte> out, std::uint64_t count, std::uint32_t nranks,
                          bool is_root) {
  WorkerOp w = allreduce(k, op, in, is_root ? out : std::span<std::byte>{}, count, nranks);
  w.label = "reduce";
  return w;
}

WorkerOp WorkerOp::allgather(std::span<const std::byte> in, std::span<std::byte> out,
                             std::uint64_t bytes, std::uint32_t nranks, std::uint32_t rank) {
  WorkerOp w;
  w.label = "allgather";
  w.kind = NumKind::raw;
  w.op = ReduceKind::sum;
  w.contributors = 1;
  if (bytes)
    for (std::uint32_t r = 0; r < nranks; ++r)
      w.segments.push_back(
          {bytes, r == rank ? in : std::span<const std::byte>{}, out.subspan(r * bytes, bytes)});
  return w;
}

WorkerOp WorkerOp::broadcast(std::span<std::byte> buf, bool is_root) {
  WorkerOp w;
  w.label = "broadcast";
  w.kind = NumKind::raw;
  w.contributors = 1;
  if (!buf.empty())
    w.segments.push_back({buf.size(), is_root ? std::span<const std::byte>(buf) : std::span<const std::byte>{},
                          is_root ? std::span<std::byte>{} : buf});
  return w;
}

WorkerOp WorkerOp::barrier() {
  WorkerOp w;
  w.label = "barrier";
  w.kind = NumKind::raw;
  w.sync = true;
  return w;
}

// ---- cutting ops into chunks -----------------------------------------------------------------

bool WorkerProtocol::next_chunk(Op& op, Chunk& c) {
  const auto& segs = op.w.segments;
  while (op.seg < segs.size() && op.off >= segs[op.seg].elems) {
    ++op.seg;
    op.off = 0;
  }
  if (op.seg >= segs.size()) {
    if (!op.sync_left) return false;
    c = Chunk{};
    c.sync = true;
    c.want = true;
    return true;
  }
  const Segment& s = segs[op.seg];
  const std::uint64_t E = chunk_elems(op.w.kind);
  c = Chunk{};
  c.seg = op.seg;
  c.off = op.off;
  c.group = op.group;
  c.has_in = !s.in.empty();
  if (op.w.kind == NumKind::fx32 && op.group_left == 0) {
    const std::uint64_t blocks = (s.elems - op.off + E - 1) / E;
    c.exponent = true;
    c.n = std::uint32_t(std::min<std::uint64_t>(blocks, E));
    c.want = true;
    return true;
  }
  c.n = std::uint32_t(std::min<std::uint64_t>(E, s.elems - op.off));
  c.want = !s.out.empty();
  return true;
}

void WorkerProtocol::advance_cursor(Op& op, const Chunk& c) {
  if (c.sync) {
    op.sync_left = false;
    return;
  }
  if (c.exponent) {
    op.group_left = c.n;
    op.groups[op.group].outstanding = c.n;
    return;
  }
  op.off += c.n;
  if (op.w.kind == NumKind::fx32 && --op.group_left == 0) ++op.group;
}

// ---- chunk payloads ---------------------------------------------------------------------------

bool WorkerProtocol::carries_f32(const Op& op, const Chunk& c) const {
  if (op.w.kind != NumKind::fx32 || c.exponent || c.sync) return false;
  auto it = op.groups.find(c.group);
  if (it == op.groups.end() || !it->second.ready) return false;
  const std::uint64_t E = chunk_elems(NumKind::fx32);
  const auto& exps = it->second.exps;
  const std::size_t b = static_cast<std::size_t>((c.off / E) % E);
  return b < exps.size() && exps[b] == kFxNonFinite;
}

void WorkerProtocol::send_chunk(Entry& e, Tx tx) {
  const bool retransmit = tx != Tx::first;
  Op& op = *op_by_id(e.op);
  const Chunk& c = e.c;
  const NumKind kind = op.w.kind;
  Header h;
  h.type = PacketType::data;
  h.member = cfg_.member;
  h.job = cfg_.job;
  const Lane& lane = lanes_[lane_of_chunk(e.chunk)];
  h.epoch = lane.epoch;
  h.chunk = wire_chunk(e.chunk);
  h.slot = std::uint16_t(h.chunk % info_.slots);
  if (retransmit) h.flags |= proto::flag::retransmit;
  // A probe asks the switch about the chunk without carrying it (docs/PROTOCOL.md, "Probes"):
  // a bare header, whatever the chunk holds. It asks for the result's payload only once the
  // switch said the chunk is complete and the result it sent then has not come (e.fetch):
  // otherwise a chunk completed while its result is on the way would cost that result twice.
  if (tx == Tx::probe) h.flags |= proto::flag::probe;
  if (c.want && (tx != Tx::probe || e.fetch)) h.flags |= proto::flag::want_result;
  std::size_t payload = 0;
  std::byte* p = nullptr;
  std::span<const std::byte> ref;  // a payload sent from the op's input, not copied
  if (c.has_in && !c.sync && tx != Tx::probe) {
    const Segment& seg = op.w.segments[c.seg];
    const bool as_f32 = carries_f32(op, c);
    h.elem = as_f32 ? ElemType::f32 : wire_elem(kind);
    h.op = as_f32 ? WireOp::sum : wire_op(kind, op.w.op, c.exponent);
    h.count = std::uint16_t(c.n);
    payload = std::size_t(c.n) * proto::elem_size(h.elem);
    const std::uint64_t E = chunk_elems(kind);
    const bool staged = c.exponent || (kind == NumKind::fx32 && !as_f32);
    // Payloads sent as they are in the input are referenced (the outbox reads them when the
    // driver sends); fx32 values and block exponents are computed, so they are staged in the
    // outbox's arena. A retransmission reads the input again: it is the op's until it completes.
    p = out_.reserve(proto::kHeaderBytes + (staged ? payload : 0) + auth_room());
    std::byte* dst = p + proto::kHeaderBytes;
    if (!staged) {
      ref = seg.in.subspan(c.off * WorkerOp::elem_bytes(kind), payload);
    } else if (c.exponent) {
      for (std::uint32_t b = 0; b < c.n; ++b) {
        const std::uint64_t first = c.off + b * E;
        const std::uint64_t len = std::min<std::uint64_t>(E, seg.elems - first);
        fscratch_.resize(len);
        std::memcpy(fscratch_.data(), seg.in.data() + first * 4, len * 4);
        proto::store_u32(dst + 4 * b, std::uint32_t(fx32_block_exponent(fscratch_.data(), len)));
      }
    } else if (kind == NumKind::fx32 && !as_f32) {
      const Group& g = op.groups.at(c.group);
      const std::int32_t ex = g.exps[(c.off / E) % E];
      fscratch_.resize(c.n);
      std::memcpy(fscratch_.data(), seg.in.data() + c.off * 4, std::size_t(c.n) * 4);
      scratch_.resize(c.n);
      fx32_encode(fscratch_.data(), c.n, ex, op.headroom, scratch_.data());
      std::memcpy(dst, scratch_.data(), payload);
    }
  } else {
    p = out_.reserve(proto::kHeaderBytes + auth_room());
  }
  proto::encode_header(h, p);
  if (!ref.empty()) {
    // Sealed over header + the referenced input; the trailer follows it on the wire.
    if (sealer_) sealer_->seal_parts(p, proto::kHeaderBytes, ref, p + proto::kHeaderBytes);
    out_.commit_ref(lane.ep, proto::kHeaderBytes, ref, e.chunk, auth_room());
    e.ref_gen = out_.generation();
  } else {
    commit(lane.ep, proto::kHeaderBytes + payload);
  }
  count_tx(rep_, proto::kHeaderBytes + payload, retransmit, tx == Tx::probe);
  count_tx(op.rep, proto::kHeaderBytes + payload, retransmit, tx == Tx::probe);
}

}  // namespace inc::sw
