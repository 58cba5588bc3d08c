// INC: the collective library's public C++ API.
//
//   auto comm = inc::Communicator::init();          // rank/size/store from the environment
//   comm.allreduce(send, recv, n, inc::DataType::f32, inc::ReduceOp::sum);
//   auto req = comm.iallgather(send, recv, n, inc::DataType::bf16);
//   ...overlap...
//   req.wait();
//   auto tp = comm.split(/*color=*/rank / 4, /*key=*/rank);   // a tensor-parallel group
//
// Every call either completes or throws inc::Error before its deadline (INC_TIMEOUT), with a
// message that names the collective, the peer and what was expected.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "inc/types.hpp"

namespace inc {

namespace detail {
struct CommState;
struct RequestState;
struct Call;
}  // namespace detail

// Explicit options; any field left at its default is taken from the environment
// (INC_RANK / INC_WORLD_SIZE / INC_STORE, or what mpirun, Slurm and torchrun set).
struct Options {
  int rank = -1;
  int world_size = -1;
  std::string store;           // "host:port" of the rendezvous store
  int host_store = -1;         // 1: this process hosts the store; 0: connect; -1: environment
  std::string algo;            // INC_ALGO: "auto", "ring", "rd", "rabenseifner", ...
  std::chrono::milliseconds timeout{0};  // INC_TIMEOUT (seconds); default 60 s
  std::uint64_t segment_bytes = 0;       // INC_SEGMENT_BYTES; 0 = per-algorithm default
  std::string listen_host;               // INC_HOST: address peers reach this rank at
  // INC_OFFLOAD: "edge" posts every collective to this host's Edge-INC engine (`inc edge`,
  // docs/EDGE.md) at INC_EDGE (edge_socket); "host" or empty: the calling threads run them.
  std::string offload;
  std::string edge_socket;  // INC_EDGE; default $TMPDIR/inc-edge.sock
  // INC_EDGE_HANDLER: the engine's conversion handler for this job's messages on the wire
  // ("bf16", "f16", "int8": lossy, see docs/EDGE.md "Handlers"); empty: none.
  std::string edge_handler;
};

// Per-call options.
struct CallOptions {
  std::string algo;  // overrides the communicator's algorithm for this call ("" = keep)
  // f16/bf16/fp8/MX sums: where the accumulator is kept (see Accumulate in types.hpp), in the
  // network and on the hosts; automatic = the communicator's default (INC_ACCUMULATE, else
  // widen in the switch and narrow on the hosts). `reproducible`:
  // f32/f16/bf16 sums with the same bits on every path (switch or host algorithm).
  Accumulate accumulate = Accumulate::automatic;
};

// How a collective ran: algorithm, in the network or on the hosts, and why.
struct Report {
  Collective coll = Collective::allreduce;
  std::uint64_t seq = 0;          // per-communicator sequence number
  std::string algorithm;          // "ring", "recursive_doubling", ..., "inc"
  bool in_network = false;        // true when a Core-INC switch aggregated the data
  std::string reason;             // why this algorithm / path was chosen
  std::uint64_t bytes_sent = 0;   // payload bytes this rank sent / received (in the network:
  std::uint64_t bytes_received = 0;  // its datagrams to and from the switch, headers included)
  double seconds = 0;             // from start to completion as seen by this rank
  // In-network i32/i8/u8 sums wrapped around somewhere in the tree (i8/u8 under widen: exactly
  // when a total left the type's range; narrow or i32: when any partial sum did).
  bool overflow = false;
  // Reductions of f16/bf16/fp8/MX (and in the network i8/u8) sums: the accumulator policy that
  // ran, in the network, on the host algorithms or on the Edge-INC engine (automatic when it did
  // not apply: other types or operations; `reproducible` on every path that ran one), and the
  // bytes per element on this rank's link to the switch (0 off the switch path; see `hops`).
  // `reason` says where rounding happened.
  Accumulate accumulate = Accumulate::automatic;
  std::uint32_t link_bytes_per_element = 0;
  // Accumulate::reproducible sums (on any path; the same counts on every rank): blocks of 256
  // elements whose values span more than the exact 62-bit window (rounded once when encoded:
  // still the same bits on every path, but not the correctly rounded sum), and blocks holding
  // NaN or an infinity on some rank (every element of such a block is NaN).
  std::uint64_t inexact_blocks = 0;
  std::uint64_t nonfinite_blocks = 0;
  // Numeric events of this call's sums (docs/NUMERICS.md, "Overflow and saturation counts"):
  // elements of adds whose exact result did not fit the type (an integer wrapped, a float
  // overflowed to infinity). In the network: every hop's adds in the whole tree (the same count
  // on every rank); on the hosts: the adds this rank computed (the ranks' counts sum to the
  // call's). `events_counted` is false when a path that ran cannot count (a switch without the
  // capability, u32 sums in the switch's i32 cells). The Edge-INC engine counts its proxy's adds.
  std::uint64_t overflow_events = 0;
  bool events_counted = true;
  std::uint64_t nonfinite_inputs = 0;  // elements of this rank's input that were NaN or infinite
  // Sums: per hop, the width of what it carries and its bytes per element, from the policy
  // and the tree (docs/NUMERICS.md, "Per-hop numerics"); empty for other collectives/ops.
  std::vector<NumericsHop> hops;
  std::uint64_t retransmissions = 0;  // packets this rank sent again (in-network path)
  // In the network: the part of bytes_sent that was not a first transmission (data sent again
  // after a loss or a time-out, and header-only probes); bytes_sent - bytes_resent is what the
  // protocol sends when nothing is lost or late.
  std::uint64_t bytes_resent = 0;
  // The segmentation this call actually used: point-to-point messages this rank sent, and
  // switch operations it took part in; each carries at most the segment size
  // (Options::segment_bytes / INC_SEGMENT_BYTES, else the algorithm's default).
  std::uint64_t messages_sent = 0;
  std::uint64_t switch_operations = 0;
  // Automatic selection with a tuning file (INC_TUNING, written by `inc tune`): every path it
  // weighed and its predicted time in microseconds, cheapest (the chosen one) first. Empty when
  // the algorithm was given, or no tuning applied (`reason` says why).
  std::vector<std::pair<std::string, double>> predicted_us;
  // "edge" when this host's Edge-INC engine ran the collective (`reason` names the engine);
  // empty when the calling threads did (with INC_OFFLOAD=edge, `reason` says why).
  std::string offload;
  // With offload "edge": the engine's conversion handler on the wire (INC_EDGE_HANDLER /
  // Options::edge_handler; docs/EDGE.md), empty for none. A lossy one rounds what it converts.
  std::string wire_handler;
};

struct TrafficStats {
  std::uint64_t bytes_sent = 0;  // including message headers
  std::uint64_t bytes_received = 0;
  std::uint64_t payload_sent = 0;
  std::uint64_t payload_received = 0;
  std::uint64_t messages_sent = 0;
  std::uint64_t messages_received = 0;
};

// A non-blocking collective in flight (on the hosts or through the switch alike). The buffers
// must stay valid until wait() returns or test() returns true. There is no progress thread:
// every collective of the job advances inside any wait() or test().
class Request {
 public:
  Request() = default;
  void wait();        // throws inc::Error
  bool test();        // non-blocking progress; true when complete; throws on failure
  bool valid() const noexcept { return static_cast<bool>(state_); }
  // This call's own report (algorithm, path, why, bytes, time); complete once wait() returned
  // or test() returned true (before that, an empty report: `algorithm` is empty). Unlike
  // Communicator::last_report() it does not depend on what else completed meanwhile.
  Report report() const;

 private:
  friend class Communicator;
  explicit Request(std::shared_ptr<detail::RequestState> s) : state_(std::move(s)) {}
  std::shared_ptr<detail::RequestState> state_;
};

template <class T>
constexpr DataType data_type_of() {
  if constexpr (std::is_same_v<T, double>) return DataType::f64;
  else if constexpr (std::is_same_v<T, float>) return DataType::f32;
  else if constexpr (std::is_same_v<T, std::int8_t>) return DataType::i8;
  else if constexpr (std::is_same_v<T, std::uint8_t>) return DataType::u8;
  else if constexpr (std::is_same_v<T, std::int32_t>) return DataType::i32;
  else if constexpr (std::is_same_v<T, std::uint32_t>) return DataType::u32;
  else if constexpr (std::is_same_v<T, std::int64_t>) return DataType::i64;
  else if constexpr (std::is_same_v<T, std::uint64_t>) return DataType::u64;
  else static_assert(sizeof(T) == 0, "no inc::DataType for this C++ type (use the void* API for f16/bf16)");
}

class Communicator {
 public:
  Communicator() = default;  // an empty communicator (valid() == false)

  // Join the job described by `opts` and the environment; blocks until all ranks have joined
  // (deadline: opts.timeout). Throws inc::Error(config) naming a bad variable or value.
  static Communicator init(const Options& opts = {});

  bool valid() const noexcept { return static_cast<bool>(state_); }
  int rank() const;
  int size() const;

  // Out-of-place when send != recv; in-place when they are the same pointer (for allgather
  // and reduce_scatter, in-place is the NCCL convention: the rank's block of the large buffer).
  Request iallreduce(const void* send, void* recv, std::size_t count, DataType t, ReduceOp op,
                     const CallOptions& o = {});
  // recv_count elements per rank; send holds size() x recv_count.
  Request ireduce_scatter(const void* send, void* recv, std::size_t recv_count, DataType t,
                          ReduceOp op, const CallOptions& o = {});
  // send_count elements per rank; recv holds size() x send_count.
  Request iallgather(const void* send, void* recv, std::size_t send_count, DataType t,
                     const CallOptions& o = {});
  // root's send is copied to every rank's recv (send ignored elsewhere; may equal recv).
  Request ibroadcast(const void* send, void* recv, std::size_t count, DataType t, int root,
                     const CallOptions& o = {});
  // count elements to each peer; both buffers hold size() x count.
  Request ialltoall(const void* send, void* recv, std::size_t count, DataType t,
                    const CallOptions& o = {});
  Request ibarrier(const CallOptions& o = {});

  void allreduce(const void* send, void* recv, std::size_t count, DataType t, ReduceOp op,
                 const CallOptions& o = {}) {
    iallreduce(send, recv, count, t, op, o).wait();
  }
  void reduce_scatter(const void* send, void* recv, std::size_t recv_count, DataType t,
                      ReduceOp op, const CallOptions& o = {}) {
    ireduce_scatter(send, recv, recv_count, t, op, o).wait();
  }
  void allgather(const void* send, void* recv, std::size_t send_count, DataType t,
                 const CallOptions& o = {}) {
    iallgather(send, recv, send_count, t, o).wait();
  }
  void broadcast(void* buf, std::size_t count, DataType t, int root, const CallOptions& o = {}) {
    ibroadcast(buf, buf, count, t, root, o).wait();
  }
  void alltoall(const void* send, void* recv, std::size_t count, DataType t,
                const CallOptions& o = {}) {
    ialltoall(send, recv, count, t, o).wait();
  }
  void barrier(const CallOptions& o = {}) { ibarrier(o).wait(); }

  template <class T>
  void allreduce(std::span<const T> send, std::span<T> recv, ReduceOp op) {
    check_spans(send.size(), recv.size());
    allreduce(send.data(), recv.data(), send.size(), data_type_of<T>(), op);
  }
  template <class T>
  void allreduce(std::span<T> buf, ReduceOp op) {
    allreduce(buf.data(), buf.data(), buf.size(), data_type_of<T>(), op);
  }

  // Ranks with the same color form a new communicator, ordered by (key, rank). Collective
  // over this communicator. color < 0: this rank joins none and gets an empty communicator.
  // Any int color works: the new communicator's id is agreed by its members (the largest of
  // their next unused ids), never derived from the color, so ids cannot collide. Call split
  // and dup of one process from one thread at a time.
  Communicator split(int color, int key) const;
  // A new communicator with the same members in the same order and a new id: its collectives
  // are independent of this one's (a library can keep its traffic apart from the caller's).
  // Collective over this communicator, like split.
  Communicator dup() const;

  // The report of the collective of this communicator that completed most recently on this
  // rank, whichever it was: with several non-blocking calls in flight that is the one whose
  // wait()/test() (or start, for calls that finish at once) saw it complete last, not the one
  // started last. For the report of one particular call use Request::report(). A report with
  // an empty `algorithm` means no collective has completed yet.
  Report last_report() const;
  // Traffic of this process over all communicators sharing its connections.
  TrafficStats traffic() const;

  // Memory registered with this host's Edge-INC engine (INC_OFFLOAD=edge): collectives on
  // buffers inside it run without staging copies (the engine reads and writes it in place).
  // Without an engine, ordinary memory. Freed with free_registered(), before the communicator.
  void* alloc_registered(std::size_t bytes) const;
  void free_registered(void* p) const;
  // True when collectives of this communicator go through the edge engine.
  bool offloaded() const;

 private:
  explicit Communicator(std::shared_ptr<detail::CommState> s) : state_(std::move(s)) {}
  static Request start(const std::shared_ptr<detail::CommState>& st, const detail::Call& c,
                       const CallOptions& o);
  static void check_spans(std::size_t send, std::size_t recv);
  std::shared_ptr<detail::CommState> state_;
};

}  // namespace inc
