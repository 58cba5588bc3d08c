// The Core-INC switch data plane as a sans-IO state machine: it takes a packet (and the time,
// for idle-job expiry) and queues the packets to send in its Outbox. It never touches a socket
// or a clock, so the UDP daemon, the simulated network in the tests and the performance
// simulator all run this same code (ENGINEERING.md section 1).
//
// Aggregator memory is a fixed SlotPool: `slots` slots of `slot_elems` 4-byte cells, each slot
// with two copies (SwitchML's shadow copy). A job owns a set of slots (a contiguous range when
// one is free; its slot table maps job slot s to a pool slot). Chunk c of a
// job's stream lives in slot (c mod S) and copy ((c / S) mod 2), where S is the job's slot
// count. Each copy remembers the chunk it holds, so the switch checks, rather than trusts, the
// worker discipline; see docs/PROTOCOL.md ("exactly once").
#pragma once

#include <algorithm>
#include <array>
#include <optional>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "src/proto/auth.hpp"
#include "src/proto/packet.hpp"
#include "src/switch/common.hpp"

namespace inc::sw {

struct SwitchConfig {
  std::uint32_t slots = 1024;      // slots in the pool
  std::uint32_t slot_elems = 256;  // 4-byte cells per slot copy (payload of one chunk)
  std::uint32_t caps = proto::cap::all;
  std::uint64_t incarnation = 1;   // distinct per start of the switch: epochs derive from it
  Endpoint parent{};               // parent switch (hierarchy); invalid = this switch is a root
  // admit/release packets must be sealed under this key (docs/PROTOCOL.md "Control plane");
  // none = control packets refused.
  std::optional<proto::auth::Key> control_key{};
  Nanos idle_timeout = 0;          // release dynamically admitted jobs idle this long (0: never)
  std::uint16_t lanes = 1;         // lanes of the daemon this data plane belongs to
  std::uint16_t lane = 0;          // this data plane's lane (< lanes); its parent is the parent's lane
  // Lanes of one daemon keep identical job tables: the daemon decides admission, release and
  // expiry for all of them. Set, the data plane checks the key of admit/release packets and
  // hands them over (control_events()) instead of applying them, reports "every member left"
  // of a dynamic job instead of releasing it, and never expires jobs on its own.
  bool external_control = false;
  // Authentication of keyed jobs (docs/PROTOCOL.md "Authentication"): this lane's sender
  // instance (random per lane and start: the driver draws it) and the first sequence number
  // (the wall clock in ns). Inputs, as time is, to keep the data plane sans-IO.
  proto::auth::Instance auth_instance{};
  std::uint64_t auth_seq_base = 0;
};

struct JobSpec {
  std::uint32_t job = 0;
  std::uint16_t members = 0;  // members attached to this switch (workers or child switches)
  std::uint32_t slots = 0;    // slots of the job, the same at every switch of its tree
  std::uint16_t parent_member = proto::kNoMember;  // member id at the parent; none = root
  // The job's key: every packet of the job is sealed and checked with it. None: the job is
  // unauthenticated (anyone who reaches the switch can join, forge and read; PROTOCOL.md).
  std::optional<proto::auth::Key> key{};
  // Multicast results (docs/PROTOCOL.md, "Multicast results"): an IPv4 group endpoint the
  // members joined; a result every member gets alike goes there once instead of once per
  // member. Invalid: unicast only. Announced in the join_ack (JoinInfo.group: the address; the
  // port is the switch's lane-0 port, which the driver puts here).
  Endpoint multicast{};
  friend bool operator==(const JobSpec&, const JobSpec&) = default;
};

struct TrafficCounters {
  std::uint64_t packets_in = 0, packets_out = 0, bytes_in = 0, bytes_out = 0;
  std::uint64_t aggregations = 0;    // chunks whose members all contributed here
  std::uint64_t results = 0;         // chunks completed (root) or whose parent result arrived
  std::uint64_t retransmissions = 0; // data packets flagged as retransmissions (not probes)
  std::uint64_t probes = 0;          // header-only probes (a question, never a contribution)
  std::uint64_t duplicates = 0;      // contributions already counted (never added twice)
  std::uint64_t results_resent = 0;  // results sent again to a member that missed them
  std::uint64_t results_multicast = 0;  // results sent once to the job's group (not per member)
  std::uint64_t upstream_resent = 0; // partial aggregates sent to the parent again
  std::uint64_t gaps_signalled = 0;  // `missing` nacks: a member's packet lost before a later one
  std::uint64_t drops = 0;
};

struct SwitchCounters : TrafficCounters {
  std::array<std::uint64_t, proto::kNumReasons> drops_by_reason{};
  std::uint64_t jobs_admitted = 0, jobs_released = 0, jobs_expired = 0, jobs_failed = 0;
  std::uint64_t job_resets = 0;
  std::uint64_t job_resizes = 0;  // live resizes completed (every member moved)
};

struct JobSnapshot {
  JobSpec spec;
  bool dynamic = false;
  Nanos last_active = 0;          // time of the job's last packet (driver's clock)
  std::uint32_t epoch = 0;
  std::uint32_t slot_base = 0;    // its first slot in the pool
  std::uint32_t busy_copies = 0;  // copies holding an aggregation in progress
  std::uint32_t resize_to = 0;    // a live resize in progress to this many slots (0: none)
  std::uint16_t joined = 0;
  bool parent_joined = false;
  bool failed = false;
  proto::Reason fail_reason = proto::Reason::ok;
  TrafficCounters counters;
};

// One lane of a multi-lane daemon, as published with the snapshot.
struct LaneSnapshot {
  std::uint16_t lane = 0;
  Endpoint endpoint{};
  SwitchCounters counters;
  std::uint32_t slots_total = 0, slots_allocated = 0;
  double cpu_seconds = 0;  // CPU time of the lane's thread
};

struct SwitchSnapshot {
  SwitchCounters counters;
  std::uint32_t slots_total = 0, slots_allocated = 0, slot_elems = 0;
  std::uint64_t incarnation = 0;
  double cpu_seconds = 0;          // CPU time of the thread(s) running the data plane (driver)
  std::vector<JobSnapshot> jobs;
  std::vector<LaneSnapshot> lanes;  // filled by a multi-lane daemon (empty for one data plane)
  // Testing (--fault-*): what the injector did to the datagrams this switch sent.
  bool faults_enabled = false;
  FaultTally faults_injected;
};

// A control packet (or event) the data plane leaves to its daemon (SwitchConfig::external_control).
struct ControlEvent {
  enum class Kind : std::uint8_t { admit, release, all_left };
  Kind kind = Kind::admit;
  JobSpec spec;       // admit: the job asked for; release/all_left: spec.job
  proto::Header req;  // the request to answer (admit/release)
  Endpoint from{};    // the controller (admit/release)
};

class SwitchDataPlane {
 public:
  explicit SwitchDataPlane(const SwitchConfig& cfg);

  // Admit a job (from configuration, or from an admit control packet when dynamic).
  proto::Reason admit(const JobSpec& spec, Nanos now, bool dynamic = false);
  bool release(std::uint32_t job);
  // Live resize of a running job to `slots` (docs/PROTOCOL.md "Live resize"): the job keeps its
  // slots and mapping until every member drained its chunk stream up to a boundary the switch
  // announces in its results, then joined again; then the job moves to `slots` (in place, or
  // elsewhere in the pool; a grow that does not fit keeps the old size) with a new epoch.
  // One-lane data planes and leaves' lanes only (unsupported on a root lane of several: resize_lanes
  // gives its lanes one boundary). A job nobody joined moves at once. A
  // leaf takes the boundary from its parent's results and the new size from the parent's
  // answer to its join once its members drained (docs/PROTOCOL.md "Live resize of a tree").
  proto::Reason resize(std::uint32_t job, std::uint32_t slots);
  // A live resize on a switch with several lanes (docs/PROTOCOL.md "Live resize of lanes"), in
  // three steps that resize_lanes (src/switch/lanes_resize.hpp) runs over the lanes:
  // prepare_lane_resize on every lane (the checks; a grow reserves its slots here, so that every
  // lane takes the same size or none does; the job then waits for a boundary), pick_boundary on
  // lane 0 (K from lane 0's members, as resize() does; nullopt when nobody joined lane 0: every
  // lane then moves at its next join), take_boundary on the others. cancel_lane_resize takes a
  // prepare back (before any boundary was announced).
  struct LanePrepare {
    proto::Reason r = proto::Reason::ok;
    bool noop = false;    // already that size, no resize under way: nothing was changed
    bool anyone = false;  // some member joined this lane
    // A leaf's lane: it follows its parent's lane (boundary and size), as resize() does on a
    // one-lane leaf; nothing to pick or take (docs/PROTOCOL.md "Live resize of a tree of lanes").
    bool leaf = false;
  };
  LanePrepare prepare_lane_resize(std::uint32_t job, std::uint32_t slots);
  void cancel_lane_resize(std::uint32_t job);
  std::optional<std::uint32_t> pick_boundary(std::uint32_t job);
  void take_boundary(std::uint32_t job, std::optional<std::uint32_t> at);
  bool resize_pending(std::uint32_t job) const {
    auto it = jobs_.find(job);
    return it != jobs_.end() && it->second.resizing;
  }
  bool expire(std::uint32_t job);  // release after idling (counted as expired)
  bool has_job(std::uint32_t job) const { return jobs_.count(job) != 0; }
  // Members of `job` joined and not left (0 if the job is unknown).
  std::uint16_t joined_members(std::uint32_t job) const;
  // Every member of `job` joined and then left (false if the job is unknown).
  bool departed(std::uint32_t job) const;

  // external_control: requests and events for the daemon, in arrival order; the daemon clears
  // them and answers a request with answer_control (admit_ack/release_ack, or a nack).
  std::vector<ControlEvent>& control_events() { return control_; }
  void answer_control(const ControlEvent& e, proto::Reason r);

  void on_packet(std::span<const std::byte> bytes, Endpoint from, Nanos now);
  void on_tick(Nanos now);
  // The wall clock minus the `now` the driver passes (ns), for the freshness of control
  // packets (their sequence numbers are the sender's wall clock); the driver keeps it current.
  void set_wall_offset(std::int64_t wall_minus_now) { wall_offset_ = wall_minus_now; }

  Outbox& outbox() { return out_; }
  const SwitchCounters& counters() const { return c_; }
  SwitchSnapshot snapshot() const;
  const SwitchConfig& config() const { return cfg_; }
  // The epoch workers of `job` must carry (0 if not admitted); for tests and tools.
  std::uint32_t job_epoch(std::uint32_t job) const;

 private:
  struct Member {
    Endpoint ep{};
    bool joined = false;
    bool left = false;
    std::uint32_t join_nonce = 0;  // echoed in the join_ack (chunk field)
    // The chunk after the newest one of its data seen here (its stream starts at 0 with the
    // job's epoch): chunks it skipped are its losses (signal_gaps).
    std::uint32_t next_chunk = 0;
    bool moved = false;  // a live resize: drained up to its boundary and joined again
  };
  struct Copy {
    std::uint32_t seq = 0;      // chunk held (or last held) by this copy
    std::uint64_t contrib = 0;  // members whose contribution was added
    std::uint64_t want = 0;     // members that want the result payload
    // Members told their contribution to this use is missing (`missing` nack), once each; from
    // the previous use's completion on it counts for the next use (signals before it opens).
    std::uint64_t signalled = 0;
    std::uint16_t n = 0;        // popcount(contrib)
    std::uint16_t count = 0;    // elements held
    proto::ElemType elem = proto::ElemType::none;
    proto::WireOp op = proto::WireOp::none;
    std::uint8_t st = 0;        // kComplete | kHasData | kOverflow | kAwaitParent
    // Numeric events of this chunk here and below (src/numerics/events.hpp: elements whose sum
    // wrapped or overflowed), the children's included; a leaf takes its parent's total with the
    // result. Saturates at proto::kMaxEvents; travels in aux (docs/PROTOCOL.md, "Arithmetic").
    std::uint32_t events = 0;
    // The copy's place in its job (job slot x 2 + copy): where a job of more than 64 members
    // keeps the rest of this copy's member sets (Job::wide).
    std::uint32_t local = 0;
  };
  // A copy's member sets. Members 0..63 are bits of the copy's own words (contrib, want,
  // signalled): a job of up to 64 members pays nothing more. A larger job gets, at admission,
  // ceil(members / 64) - 1 more words per set and copy (Job::wide), so a slot costs memory in
  // proportion to the job's fan-in, not to kMaxMembers.
  enum Set : std::uint32_t { kContrib = 0, kWant = 1, kSignalled = 2 };
  static constexpr std::uint8_t kComplete = 1, kHasData = 2, kOverflow = 4, kAwaitParent = 8;
  // What authenticates one peer of a keyed job (a member, or the parent): the MAC of its last
  // instance and its replay window. Never reset with the job: sequence numbers only grow.
  struct PeerAuth {
    std::optional<proto::auth::Mac> mac;
    proto::auth::ReplayWindow window;
  };
  struct Job {
    JobSpec spec;
    std::optional<proto::auth::Mac> mac;  // keyed: this lane's sender MAC under the job key
    std::vector<PeerAuth> member_auth;
    PeerAuth parent_auth;
    bool dynamic = false;
    std::uint32_t epoch = 0;
    std::uint32_t session = 0;
    bool session_set = false;
    // Its slots in the pool: job slot s is pool slot slot_of[s] (a contiguous run when one was
    // free at admission; any free slots else, as after live resizes).
    std::vector<std::uint32_t> slot_of;
    std::vector<Member> members;
    bool parent_joined = false;
    std::uint32_t parent_epoch = 0;
    std::uint32_t parent_join_nonce = 0;  // our join attempt at the parent
    proto::JoinInfo parent_info{};
    bool failed = false;
    proto::Reason fail_reason = proto::Reason::ok;
    Nanos last_active = 0;
    TrafficCounters c;
    // Live resize (resize()): the target, and the lane chunk where the current mapping ends.
    bool resizing = false;
    std::uint32_t resize_to = 0, resize_at = 0;
    // A leaf learns resize_at from its parent's results (false until then; a root knows it at
    // once); `rejoining`: its members moved, it joined the parent again and awaits the answer.
    bool resize_known = false;
    bool rejoining = false;
    // Several lanes: a grow's slots, reserved at prepare_lane_resize (taken at the move), and
    // `resize_lazy`: nobody had joined, the job moves at its next join on this lane.
    std::vector<std::uint32_t> reserved;
    bool resize_lazy = false;
    std::uint32_t prev_epoch = 0;  // the epoch before the last resize: its packets are late
    // The lane chunk where the current epoch's stream starts (0, or the boundary of the last
    // live resize): in the join_acks' aux, so that a leaf's lane that never saw the boundary
    // in a result learns it from its parent's answer (follow_parent).
    std::uint32_t stream_start = 0;
    // Members 64.. of every copy's sets: per copy (Copy::local) kContrib, kWant, kSignalled,
    // wide_words words each (wide_words = ceil(members / 64) - 1; sized by init_copies).
    std::uint32_t wide_words = 0;
    std::vector<std::uint64_t> wide;
    bool has_parent() const { return spec.parent_member != proto::kNoMember; }
  };
  static std::uint64_t& word0(Copy& cp, Set s) {
    return s == kContrib ? cp.contrib : s == kWant ? cp.want : cp.signalled;
  }
  static std::uint64_t word0(const Copy& cp, Set s) {
    return s == kContrib ? cp.contrib : s == kWant ? cp.want : cp.signalled;
  }
  // Word w (>= 1) of set s of copy cp.
  static std::uint64_t* wide_of(Job& j, const Copy& cp, Set s) {
    return j.wide.data() + (std::size_t(cp.local) * 3 + s) * j.wide_words;
  }
  static const std::uint64_t* wide_of(const Job& j, const Copy& cp, Set s) {
    return j.wide.data() + (std::size_t(cp.local) * 3 + s) * j.wide_words;
  }
  static bool has(const Job& j, const Copy& cp, Set s, std::uint16_t m) {
    if (m < 64) return (word0(cp, s) >> m) & 1;
    return (wide_of(j, cp, s)[m / 64 - 1] >> (m % 64)) & 1;
  }
  static void add(Job& j, Copy& cp, Set s, std::uint16_t m) {
    if (m < 64) word0(cp, s) |= std::uint64_t(1) << m;
    else wide_of(j, cp, s)[m / 64 - 1] |= std::uint64_t(1) << (m % 64);
  }
  static void clear(Job& j, Copy& cp, Set s) {
    word0(cp, s) = 0;
    if (j.wide_words) std::fill_n(wide_of(j, cp, s), j.wide_words, 0);
  }
  // Whether set s holds every member of the job, or none.
  static bool full(const Job& j, const Copy& cp, Set s) {
    const std::uint32_t n = j.spec.members;
    if (word0(cp, s) != (n >= 64 ? ~0ull : (1ull << n) - 1)) return false;
    const std::uint64_t* w = wide_of(j, cp, s);
    for (std::uint32_t i = 0; i < j.wide_words; ++i) {
      const std::uint32_t left = n - 64 * (i + 1);  // members in this word and after
      if (w[i] != (left >= 64 ? ~0ull : (1ull << left) - 1)) return false;
    }
    return true;
  }
  static bool empty(const Job& j, const Copy& cp, Set s) {
    const std::uint64_t* w = wide_of(j, cp, s);
    return word0(cp, s) == 0 && std::all_of(w, w + j.wide_words, [](std::uint64_t x) { return x == 0; });
  }

  // Keyed jobs: the packet is sealed, its tag right and its sequence number fresh (else it is
  // dropped, counted and not answered).
  bool authentic(Job& j, const proto::PacketView& v, std::span<const std::byte> bytes,
                 Endpoint from);
  void handle_join(const proto::PacketView& v, Endpoint from);
  void handle_data(const proto::PacketView& v, Endpoint from);
  void handle_leave(const proto::PacketView& v, Endpoint from);
  void answer_probe(Job& j, const proto::Header& h, Endpoint from, std::uint32_t idx,
                    std::int32_t d);
  // Whether chunk q's copy lacks the contribution of member m (begun without it, or not begun).
  bool lacks(const Job& j, std::uint32_t q, std::uint16_t m) const;
  // Bits i (1..kMissingSpan) of the chunks q - i that lack m's (see proto::kMissingSpan).
  std::uint32_t missing_before(const Job& j, std::uint32_t q, std::uint16_t m) const;
  void signal_gaps(Job& j, const proto::Header& h, Endpoint from, std::uint16_t m,
                   std::size_t bytes);
  void handle_from_parent(const proto::PacketView& v, Endpoint from);
  void handle_control(const proto::PacketView& v, std::span<const std::byte> bytes, Endpoint from,
                      Nanos now);
  // The answer to a control request: sealed under the control key, echoing the request's
  // nonce (chunk); a nack when `r` is not ok.
  void control_answer(Endpoint to, const proto::Header& req, proto::PacketType t, proto::Reason r);

  void complete_local(Job& j, Copy& cp, std::uint32_t idx);
  void forward_up(Job& j, const Copy& cp, std::uint32_t idx, bool resend);
  void replicate(Job& j, const Copy& cp, std::uint32_t idx);
  // `resent`: the stored result again, to one member that asked (aux kResultResent).
  void send_result(Job& j, const Copy& cp, std::uint32_t idx, Endpoint to, bool want,
                   bool resent = false);
  void send_join_ack(Job& j, const Member& m);
  void send_pending(Job& j, const Copy& cp, const proto::Header& req, Endpoint to);
  void nack(Job* j, Endpoint to, const proto::Header& req, proto::Reason r,
            std::uint32_t detail = 0);
  void send_empty(Job* j, Endpoint to, proto::PacketType t, const proto::Header& req);
  // An answer's header: the request's member, job, chunk and slot; the job's epoch (0 if none).
  static proto::Header reply_header(const Job* j, proto::PacketType t, const proto::Header& req);
  std::size_t emit(Job* j, Endpoint to, std::size_t size);
  std::size_t emit_cells(Job* j, Endpoint to, std::uint32_t idx, std::size_t payload);
  void drop(Job* j, proto::Reason r);
  void fail_job(Job& j, proto::Reason r);
  void reset_job(Job& j);
  // Each copy as if it completed the chunk two uses before its first one at or after `first`.
  void init_copies(Job& j, std::uint32_t first = 0);
  // `n` free pool slots for `job` (marked its own), or nullopt if fewer are free.
  std::optional<std::vector<std::uint32_t>> allocate(std::uint32_t n, std::uint32_t job);
  // Why a resize of `j` to `slots` is refused (ok: it is not): unknown job, size, failed.
  proto::Reason resize_refusal(const Job* j, std::uint32_t slots) const;
  // A root's (or lane 0's) boundary: the chunk after the newest seen from any member, plus S.
  std::uint32_t pick_resize_at(Job& j);
  // Every member drained and joined again: move the job to its new slots, answer the joins.
  void finish_resize(Job& j);
  // The job's slot table to `n` slots: a shrink keeps the first, a grow adds free ones (false,
  // nothing changed, when too few are free).
  bool take_slots(Job& j, std::uint32_t n);
  // A grow's reservation (several lanes, a leaf of lanes) not needed any more: free for others.
  void free_reserved(Job& j);
  // Our join at the parent (member parent_member, our session, nonce parent_join_nonce).
  void join_parent(Job& j, std::uint8_t flags);
  // A leaf whose members all drained to the boundary: join the parent again (fresh nonce).
  void rejoin_parent(Job& j);
  // The parent's answer to that join: the tree's new size and epoch; the leaf moves too.
  // `at`: the lane chunk where the parent's new stream starts (its join_ack's aux).
  void follow_parent(Job& j, const proto::JoinInfo& info, std::uint32_t parent_epoch, std::uint32_t at);
  // A leaf's lane told that a resize is under way (a member's flagged join, or its parent's
  // flagged result): it counts its members' joins from now on.
  void start_following(Job& j);
  // Every member drained and joined again: the new epoch and copies, the members' join_acks.
  void move_members(Job& j);
  std::uint32_t new_epoch();
  std::uint32_t slot_bytes() const { return cfg_.slot_elems * 4; }
  std::byte* cells(std::uint32_t idx) {
    return reinterpret_cast<std::byte*>(cells_.data() + std::size_t(idx) * cfg_.slot_elems);
  }
  // The cells of copy idx, to change them: first lets go of queued packets that reference them.
  std::byte* writable_cells(std::uint32_t idx);
  Job* find(std::uint32_t job) {
    auto it = jobs_.find(job);
    return it == jobs_.end() ? nullptr : &it->second;
  }

  SwitchConfig cfg_;
  std::vector<std::uint32_t> cells_;   // slots x 2 copies x slot_elems
  std::vector<Copy> copies_;           // slots x 2
  // Per copy: the outbox generation in which a queued packet last referenced its cells (results
  // and partials are sent from the slot, not copied; see writable_cells). Kept apart from Copy
  // so that resetting a job's copies does not forget a reference still queued.
  std::vector<std::uint64_t> ref_gen_;
  std::vector<std::uint32_t> owner_;   // per slot: job id + 1, or 0 if free (allocation only)
  std::unordered_map<std::uint32_t, Job> jobs_;
  std::uint64_t epochs_issued_ = 0;
  std::uint64_t seq_ = 0;  // this lane's next sequence number (sealed packets)
  Outbox out_;
  SwitchCounters c_;
  Nanos now_ = 0;
  std::vector<ControlEvent> control_;
  // Control packets: this lane's sender MAC under the control key, the senders seen recently.
  std::optional<proto::auth::Mac> control_mac_;
  proto::auth::ControlReplay control_replay_;
  std::int64_t wall_offset_ = 0;
};

}  // namespace inc::sw
