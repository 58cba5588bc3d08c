// The edge engine's protocol with the ranks of its host (docs/EDGE.md, "Protocol").
//
// Control, over a Unix SEQPACKET socket (one connection per rank, fixed-size messages, file
// descriptors as SCM_RIGHTS): hello (with the rings' memfd and two eventfds), register (a sealed
// memfd), add_comm, each answered by a reply. Data, through shared memory: the rank posts
// Descriptors into the submission ring and writes the doorbell eventfd; the engine posts
// Completions into the completion ring and writes the completion eventfd. Everything the
// engine reads from a rank is checked before use (sizes, indices, registrations, bounds).
#pragma once

#include <chrono>
#include <cstdint>

namespace inc::edge {

inline constexpr std::uint32_t kMagic = 0x45434e49;  // "INCE"
// 2: Descriptor::accumulate (the call's accumulator policy) and the numerics of Completion.
inline constexpr std::uint16_t kVersion = 2;
inline constexpr std::uint32_t kRingEntries = 256;
// Before sleeping on its eventfd, each side polls the ring it consumes for this long (yielding
// the core between looks): the rank's wait() the completions, the proxy, after a collective
// completed, the submissions. A small collective then costs no wake-up on either side of the hop.
inline constexpr std::chrono::microseconds kBusyPoll{50};
// After taking a descriptor the proxy polls its collectives' sockets without sleeping for this
// long, as the host path's wait() does (coll::Engine::wait, 500 us): a small collective's
// messages arrive within it, and each wake-up from epoll costs more than the message.
inline constexpr std::chrono::microseconds kProgressPoll{500};
inline constexpr std::uint32_t kMaxMembers = 4096;
inline constexpr std::uint32_t kMaxRegistrations = 1024;

enum class MsgKind : std::uint16_t { hello = 1, reg = 2, add_comm = 3, reply = 4 };

struct MsgHeader {
  std::uint32_t magic = kMagic;
  std::uint16_t kind = 0;
  std::uint16_t version = kVersion;
};

// Rank -> engine, with 3 fds: the rings' memfd, the doorbell eventfd (rank writes), the
// completion eventfd (engine writes).
struct Hello {
  MsgHeader h{kMagic, static_cast<std::uint16_t>(MsgKind::hello), kVersion};
  std::uint64_t job = 0;           // the job's id (its mesh tag): names the session
  std::uint8_t token[32] = {};     // the job's secret: every rank of a session shows the same one
  std::int32_t rank = 0, world = 0;
  std::uint32_t timeout_ms = 0;    // INC_TIMEOUT: the mesh set-up's and every collective's deadline
  std::uint32_t ring_entries = 0;  // of each ring
  std::uint64_t mesh_tag = 0;      // tag of the engines' mesh for this job
  char store[128] = {};            // "host:port" of the job's rendezvous store
  char prefix[96] = {};            // store key prefix of the engines' mesh addresses
  char listen_host[64] = {};       // where this rank's proxy listens for the job's other proxies
  char handler[32] = {};           // the job's conversion handler ("" = none; handler.hpp)
};

// Rank -> engine, with 1 fd: a sealed memfd of `bytes` bytes, known from now on as `id`.
struct Register {
  MsgHeader h{kMagic, static_cast<std::uint16_t>(MsgKind::reg), kVersion};
  std::uint32_t id = 0;
  std::uint32_t pad = 0;
  std::uint64_t bytes = 0;
};

// Rank -> engine: a communicator (members[i] = world rank of comm rank i).
struct AddComm {
  MsgHeader h{kMagic, static_cast<std::uint16_t>(MsgKind::add_comm), kVersion};
  std::uint32_t comm_id = 0;
  std::uint32_t nmembers = 0;
  std::int32_t members[kMaxMembers] = {};
};

// Engine -> rank, answering each of the above in order.
struct Reply {
  MsgHeader h{kMagic, static_cast<std::uint16_t>(MsgKind::reply), kVersion};
  std::uint32_t ok = 0;
  std::uint32_t error_kind = 0;  // inc::Error::Kind when !ok
  char message[496] = {};
};

// Where a buffer is: a registration and an offset in it. reg 0 = none (null buffer).
struct BufRef {
  std::uint32_t reg = 0;
  std::uint32_t pad = 0;
  std::uint64_t offset = 0;
};

// One collective, in the submission ring. The fields are those of coll::CollectiveParams.
struct Descriptor {
  std::uint64_t uid = 0;  // the rank's name for it, echoed in the completion
  std::uint32_t comm_id = 0;
  std::uint8_t coll = 0, algo = 0, dtype = 0, op = 0;
  std::int32_t nranks = 0, rank = 0, root = 0;
  std::uint32_t in_place = 0;
  std::uint64_t count = 0;
  std::uint64_t segment_bytes = 0;
  BufRef input, output;
  std::uint32_t timeout_ms = 0;
  // The call's accumulator policy (inc::Accumulate, resolved: the call's option, else the
  // communicator's INC_ACCUMULATE): the engine builds the same schedule as the host runtime for
  // it (coll::host_accumulate; widen/wide: src/coll/widened.cpp). Above kNumAccumulate: refused.
  std::uint8_t accumulate = 0;
  // 1: the rank's library could not place the call's buffers in registered memory (its call
  // failed there with that error): the engine refuses the descriptor, and the refusal reaches the
  // peers, who would otherwise wait for this rank (coll::Engine::refuse). 0 in older ranks.
  std::uint8_t unplaced = 0;
  std::uint8_t pad[2] = {};
};

struct Completion {
  std::uint64_t uid = 0;
  std::uint32_t ok = 0;
  std::uint32_t error_kind = 0;
  std::uint8_t algo = 0, coll = 0;
  // The accumulator policy that ran (coll::RunInfo::accumulate: automatic for what is not a
  // host sum), whether the overflow events were counted, and whether the job's conversion
  // handler changed this collective's wire format (then the hops of the policy do not apply).
  std::uint8_t accumulate = 0, events_counted = 0, converted = 0;
  std::uint8_t pad[3] = {};
  std::uint64_t seq = 0;  // the collective's sequence number on its communicator
  std::uint64_t bytes_sent = 0, bytes_received = 0, messages_sent = 0;
  // The numerics of coll::RunInfo (Report::overflow_events, nonfinite_inputs, inexact_blocks,
  // nonfinite_blocks): this rank's proxy's adds, as on the host path.
  std::uint64_t overflow_events = 0, nonfinite_inputs = 0, inexact_blocks = 0, nonfinite_blocks = 0;
  double seconds = 0;  // on the engine, from the descriptor's start to its completion
  char message[408] = {};
};

inline constexpr std::uint32_t kSqEntryBytes = 128;
inline constexpr std::uint32_t kCqEntryBytes = 512;
static_assert(sizeof(Descriptor) <= kSqEntryBytes);
static_assert(sizeof(Completion) <= kCqEntryBytes);

}  // namespace inc::edge
