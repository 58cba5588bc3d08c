// A TCP key-value rendezvous store in the spirit of torchrun's TCPStore: one process runs a
// StoreServer, every rank talks to it through a StoreClient to exchange addresses, count
// arrivals and publish failures.
//
// Wire protocol (little-endian, one request in flight per connection):
//   frame    = u32 body_length, body                      (body_length <= kMaxFrameBytes)
//   request  = u8 op, fields...                           strings are u32 length + bytes
//     hello    : u32 magic "INCS", u16 version            (must be the first request)
//     set      : key, value
//     set_new  : key, value          -> u8 stored (0 if the key existed: first writer wins)
//     get      : key, u32 timeout_ms -> value, or status timeout when the key is still missing
//     add      : key, i64 delta      -> i64 new value (values are decimal text)
//     check    : u32 n, n keys       -> u8 all exist
//     wait     : u32 n, n keys, u8 any, u32 timeout_ms -> u32 index of a key that exists
//     erase    : key                 -> u8 existed
//   response = u8 status (0 ok, 1 timeout, 2 error), payload (error: a message string)
// Every field is validated (op, lengths, counts, timeouts, no trailing bytes); a malformed
// request closes that client's connection and is counted; the server keeps serving the others.
// Blocking gets and waits are held by the server (no polling), with the timeout enforced there.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "transport/socket.hpp"

namespace inc::transport {

inline constexpr std::uint32_t kStoreMagic = 0x53434e49;  // "INCS"
inline constexpr std::uint16_t kStoreVersion = 1;
inline constexpr std::size_t kMaxStoreKeyBytes = 4096;
inline constexpr std::size_t kMaxStoreValueBytes = 64u << 20;
inline constexpr std::size_t kMaxStoreFrameBytes = kMaxStoreValueBytes + kMaxStoreKeyBytes + 64;
inline constexpr std::uint32_t kMaxStoreKeysPerRequest = 1u << 16;
inline constexpr std::uint32_t kMaxStoreTimeoutMs = 24u * 3600 * 1000;

struct StoreServerStats {
  std::uint64_t connections_accepted = 0;
  std::uint64_t requests = 0;
  std::uint64_t bad_requests = 0;  // malformed requests (each closed its connection)
  std::uint64_t clients = 0;       // currently connected
  std::uint64_t keys = 0;
  std::string last_bad_request;  // why the most recent malformed request was rejected
};

class StoreServer {
 public:
  // Listens on host:port (port 0 = ephemeral; host "" or "0.0.0.0" = all IPv4 interfaces) and
  // starts the serving thread. Throws Error::Kind::network if it cannot bind.
  explicit StoreServer(const std::string& host = "127.0.0.1", int port = 0);
  // Stops the thread and closes every connection; clients blocked in get/wait see
  // Error::Kind::peer_failure.
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  int port() const noexcept { return port_; }
  const std::string& host() const noexcept { return host_; }

  // Local read of a key, for the process hosting the store (e.g. the launcher reading the
  // `abort` key). Thread-safe.
  std::optional<std::string> peek(const std::string& key) const;
  StoreServerStats stats() const;

 private:
  struct Impl;
  std::string host_;
  int port_ = 0;
  std::unique_ptr<Impl> impl_;
};

// One connection to a StoreServer. Calls from several threads are serialised (a blocking get
// holds the connection, so give each thread that waits its own client). After a timeout or a
// broken connection in the middle of a request, every later call fails with the original cause.
class StoreClient {
 public:
  struct Options {
    // Deadline for connecting (retries while nobody listens yet).
    std::chrono::milliseconds connect_timeout{std::chrono::seconds(60)};
    // Deadline for a non-blocking request (set, add, check, ...) to be answered.
    std::chrono::milliseconds request_timeout{std::chrono::seconds(60)};
  };

  StoreClient(const std::string& host, int port, Options opts);
  StoreClient(const std::string& host, int port);
  ~StoreClient();
  StoreClient(StoreClient&&) noexcept;
  StoreClient& operator=(StoreClient&&) noexcept;

  // Values are arbitrary bytes (std::string is used as a byte container).
  void set(std::string_view key, std::string_view value);
  void set(std::string_view key, std::span<const std::byte> value);
  // Stores only if the key does not exist yet; returns whether this call stored it.
  bool set_if_absent(std::string_view key, std::string_view value);
  // Blocks until the key exists; Error::Kind::timeout naming the key, the time waited and the
  // store when `timeout` passes first.
  std::string get(std::string_view key, std::chrono::milliseconds timeout);
  // Non-blocking: the value if the key exists now.
  std::optional<std::string> try_get(std::string_view key);
  // Atomic counter (missing key = 0); returns the new value. Error::Kind::invalid_argument if
  // the key holds something that is not a decimal integer.
  std::int64_t add(std::string_view key, std::int64_t delta);
  // True if every key exists now.
  bool check(std::span<const std::string> keys);
  // Blocks until all keys exist; the timeout error lists the missing keys.
  void wait(std::span<const std::string> keys, std::chrono::milliseconds timeout);
  // Blocks until at least one key exists and returns the index of one that does.
  std::size_t wait_any(std::span<const std::string> keys, std::chrono::milliseconds timeout);
  // Removes a key; returns whether it existed.
  bool erase(std::string_view key);

  // "host:port" of the store, for messages.
  const std::string& address() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The key ranks publish their failure under, and the helpers around it. The first rank to
// publish wins ("rank 3 failed: <message>"); later publishers do not overwrite it.
inline constexpr std::string_view kAbortKey = "abort";
// Returns true if this call's message became the job's abort reason.
bool publish_abort(StoreClient& store, int rank, std::string_view message);
// The abort reason if some rank published one.
std::optional<std::string> poll_abort(StoreClient& store);
// Throws Error::Kind::peer_failure with the abort reason if some rank published one.
void check_abort(StoreClient& store);

// Store-based barrier over `world` ranks. `name` must be unique per barrier instance within
// the job (e.g. "init", "finalize/3"). Waits for everybody or a published abort, whichever
// comes first: Error::Kind::peer_failure with the abort reason, or Error::Kind::timeout saying
// how many ranks arrived.
void barrier(StoreClient& store, std::string_view name, int world, int rank,
             std::chrono::milliseconds timeout);

}  // namespace inc::transport
