// The controller's protocol (docs/CONTROLLER.md): messages between `inc controller`, the
// switches and the jobs, over TCP, sealed under the cluster's control secret.
//
// A connection starts with one hello each way, in clear:
//   magic "INCc" | version u8 | role u8 | nonce[16]
// Both sides then derive one AES-256-GCM key per direction,
//   HMAC-SHA256(secret, "INC control v1 c2s" | client nonce | server nonce)  (and "s2c"),
// and every message after is a frame
//   length u32 (of what follows) | ciphertext | tag[16]
// sealed with nonce = message counter of its direction (u64) | 0u32 and the length as
// associated data. A frame that fails its tag (forged, altered, replayed from another
// connection, or out of order within this one: the counter is implicit) ends the connection.
// The plaintext is type u8 | fields, little endian; strings are u8 length | bytes; every
// field is bounds-checked, and a message with bytes left over is refused.
//
// Sans-IO: this file encodes and decodes; src/control/conn.* moves the bytes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "src/proto/auth.hpp"

namespace inc::proto::ctl {

inline constexpr std::uint8_t kVersion = 3;  // 2: Resize (type 12); 3: TreeRequest's wait
inline constexpr std::size_t kNonceBytes = 16;
inline constexpr std::size_t kHelloBytes = 4 + 1 + 1 + kNonceBytes;
inline constexpr std::size_t kTagBytes = 16;
inline constexpr std::size_t kMaxFrameBytes = 1u << 20;  // length field bound (DoS)
inline constexpr std::size_t kMaxRanks = 4096;           // ranks of one tree request
inline constexpr std::size_t kMaxJobsPerSwitch = 4096;

enum class Role : std::uint8_t { switch_agent = 1, job = 2, admin = 3 };
using Nonce = std::array<std::uint8_t, kNonceBytes>;

struct Hello {
  std::uint8_t version = kVersion;
  Role role = Role::job;
  Nonce nonce{};
};
std::array<std::byte, kHelloBytes> encode_hello(const Hello& h);
// nullopt + why for a wrong magic, version or role.
std::optional<Hello> decode_hello(std::span<const std::byte> b, std::string& why);

// One direction's sealing state of an established connection.
class Sealer {
 public:
  Sealer(const auth::Key& secret, const Nonce& client, const Nonce& server, bool client_to_server);
  // The whole frame (length, ciphertext, tag) of `plain`.
  std::vector<std::byte> seal(std::span<const std::byte> plain);
  // The plaintext of a frame's body (what follows the length field), or nullopt if its tag
  // fails. Advances the counter only on success.
  std::optional<std::vector<std::byte>> open(std::span<const std::byte> body);
  std::uint64_t counter() const { return counter_; }

 private:
  auth::Key key_{};
  std::uint64_t counter_ = 0;
};

// ---- messages ---------------------------------------------------------------------------------

// A job as a switch holds it (no key: keys never leave the controller and the job's ranks).
struct SwitchJob {
  std::uint32_t job = 0;
  std::uint16_t members = 0;
  std::uint32_t slots = 0;  // per lane
  std::uint16_t parent_member = 0xFFFF;
  friend bool operator==(const SwitchJob&, const SwitchJob&) = default;
};

// switch -> controller, on connecting and then every heartbeat.
struct SwitchState {
  std::string name;
  std::uint32_t ip = 0;
  std::uint16_t port = 0;  // lane 0
  std::uint16_t lanes = 1;
  std::uint32_t slots_per_lane = 0;
  std::uint32_t slot_elems = 0;
  std::uint32_t caps = 0;
  std::uint64_t incarnation = 0;
  std::uint32_t parent_ip = 0;
  std::uint16_t parent_port = 0;
  std::vector<SwitchJob> jobs;         // jobs the controller admitted there
  std::vector<SwitchJob> static_jobs;  // jobs of its own configuration (--job): slots taken
};

// controller -> switch: admit (with the job's data key) or release; switch -> controller: the
// outcome (proto::Reason as u8).
struct Admit {
  std::uint64_t req = 0;
  SwitchJob spec;
  auth::Key key{};
};
struct Release {
  std::uint64_t req = 0;
  std::uint32_t job = 0;
};
struct Outcome {
  std::uint64_t req = 0;
  std::uint32_t job = 0;
  std::uint8_t reason = 0;
};
// controller -> switch: resize a job it admitted, live (docs/CONTROLLER.md "Re-balancing"). The
// switch answers with an Outcome once the job moved to its new slots (or refused the resize);
// its next SwitchState carries the size it ended with.
struct Resize {
  std::uint64_t req = 0;
  std::uint32_t job = 0;
  std::uint32_t slots = 0;  // per lane, 1..65535
};

// job -> controller: a tree for these ranks (host of each rank, as the fabric names hosts).
struct TreeRequest {
  std::uint32_t slots_wanted = 0;  // 0: the controller's default
  std::string label;               // for status and logs ("comm 3 of pid 1234")
  std::vector<std::string> hosts;
  // How long the job waits for its answer (from its INC_TIMEOUT): a newcomer whose slots
  // running jobs still hold waits for them this long (docs/CONTROLLER.md "Re-balancing").
  // 0: the controller's own admission deadline. Encoded last, after the hosts (version 3).
  std::uint32_t wait_ms = 0;
};
inline constexpr std::uint32_t kMaxWaitMs = 86'400'000;  // INC_TIMEOUT's bound (one day)
struct RankAttachment {
  std::string sw;
  std::uint32_t ip = 0;
  std::uint16_t port = 0;
  std::uint16_t member = 0;
};
struct TreeReply {
  bool ok = false;
  std::string why;  // ok: the tree ("root spine, 3 switches, 16 slots of 32 wanted"); else why not
  std::uint32_t job = 0;
  std::uint32_t slots = 0;
  std::uint64_t lease = 0;
  std::uint32_t lease_ms = 0;
  auth::Key key{};
  std::string root;
  std::vector<RankAttachment> ranks;
  // What the job holds at each switch, so that it can re-claim the tree after a restart of
  // the controller (LeaseRenew with claim).
  std::vector<std::pair<std::string, SwitchJob>> tree;
};

// job -> controller: keep the lease (every lease/3); after a controller restart the
// controller does not know the lease: the job re-claims with its tree.
struct LeaseRenew {
  std::uint32_t job = 0;
  std::uint64_t lease = 0;
  std::vector<std::pair<std::string, SwitchJob>> claim;  // empty: a plain renewal
};
struct LeaseReply {
  std::uint32_t job = 0;
  bool known = false;  // false: the lease is gone (expired or never granted): the tree is released
};
struct TreeRelease {
  std::uint32_t job = 0;
  std::uint64_t lease = 0;
};
struct StatusRequest {};
struct StatusReply {
  std::string text;  // the controller's state, JSON
};

enum class MsgType : std::uint8_t {
  switch_state = 1, admit, release, outcome, tree_request, tree_reply, lease_renew, lease_reply,
  tree_release, status_request, status_reply, resize
};
using Message = std::variant<SwitchState, Admit, Release, Outcome, TreeRequest, TreeReply, LeaseRenew,
                             LeaseReply, TreeRelease, StatusRequest, StatusReply, Resize>;

std::vector<std::byte> encode(const Message& m);
// nullopt + why for an unknown type, a field out of bounds or bytes left over.
std::optional<Message> decode(std::span<const std::byte> plain, std::string& why);

}  // namespace inc::proto::ctl
