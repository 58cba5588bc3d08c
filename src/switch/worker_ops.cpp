// WorkerOp builders: how each collective maps to segments of the job's chunk stream.
#include "src/switch/worker.hpp"

namespace inc::sw {

std::string_view name(WorkerErrorKind k) noexcept {
  constexpr std::string_view names[] = {"none",     "invalid",     "timeout",   "switch_restarted",
                                        "job_failed", "rejected", "unsupported", "nonfinite",
                                        "protocol"};
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

}  // namespace inc::sw
