// The edge engine (`inc edge`): one process per host standing for the NIC. It serves every rank
// of its host and every job on it. Each rank connects over a Unix socket, shows its job's
// token, and gets a proxy: a thread of the engine with the rank's own coll::Engine, whose TCP
// mesh joins the proxies of the job's other ranks (on this engine or on other hosts' engines).
// The proxy runs the same schedules as the host runtime over the rank's registered shared
// memory, so the application's thread spends no CPU between posting and completion.
//
// Isolation: a job is a session (job id + token + the uid of its first rank, by SO_PEERCRED);
// a rank joins a session only with the same uid and token, and only once per rank. A proxy
// resolves buffers only in its own connection's registrations: no descriptor can name memory of
// another rank, let alone another job, and no job's memory is mapped into another job's process.
// A rank that disconnects (or dies) loses its proxy: its collectives fail on its peers with a
// closed connection, its registrations are unmapped and its rings and eventfds closed.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "edge/handler.hpp"
#include "transport/socket.hpp"

namespace inc::edge {

struct EngineConfig {
  std::string socket_path;  // Unix socket the ranks connect to (created 0666; see docs/EDGE.md)
  // Deadline for a connection's hello (the rank's own INC_TIMEOUT applies from then on).
  std::chrono::milliseconds hello_timeout{std::chrono::seconds(10)};
  bool verbose = false;  // one line per connection and refusal on stderr
  // The handlers a job may name (its conversion handler) and that apply every message.
  std::shared_ptr<const HandlerRegistry> handlers;  // null: HandlerRegistry::with_builtins()
};

struct EngineStats {
  std::uint64_t connections = 0, refused = 0, sessions = 0;
  std::uint64_t collectives = 0, failed = 0, protocol_errors = 0;
  // Now: ranks attached, and bytes of rank memory (rings and registrations) mapped.
  std::uint64_t attached = 0, mapped_bytes = 0;
  // Handler invocations (sPIN entry points) over every message, and messages converted.
  std::uint64_t handler_headers = 0, handler_payloads = 0, handler_completions = 0, converted_messages = 0;
  std::uint64_t deposited = 0;  // plain receives placed by the transport, no handler (HandlerChain::deposits)
  // Message bytes (on the wire) the proxies received into and sent from host memory over every
  // completed collective: the engine's memory traffic (docs/EDGE.md, "Memory traffic").
  std::uint64_t bytes_received = 0, bytes_sent = 0;
};

class EdgeEngine {
 public:
  // Binds the socket (removing a stale socket file of a dead engine; refusing if one answers).
  explicit EdgeEngine(EngineConfig cfg);
  ~EdgeEngine();  // stops every proxy
  EdgeEngine(const EdgeEngine&) = delete;
  EdgeEngine& operator=(const EdgeEngine&) = delete;

  // Accept and serve until `stop` is set (checked every 100 ms).
  void run(const std::atomic<bool>& stop);
  EngineStats stats() const;
  const std::string& socket_path() const { return cfg_.socket_path; }

 private:
  friend class RankProxy;
  struct Session {
    std::uint32_t uid = 0;
    std::array<std::uint8_t, 32> token{};
    std::string handler;  // the job's conversion handler: every rank must name the same
    std::map<int, int> ranks;  // rank -> 1 while attached
  };
  // Admission of (job, rank) with this token and uid: "" or why not.
  std::string admit(std::uint64_t job, int rank, const std::uint8_t (&token)[32], std::uint32_t uid,
                    const std::string& handler);
  void leave(std::uint64_t job, int rank);
  void log(const std::string& line);
  void reap(bool all);

  EngineConfig cfg_;
  transport::Fd listen_;
  mutable std::mutex mu_;
  std::map<std::uint64_t, Session> sessions_;
  EngineStats stats_;
  HandlerCounts handler_counts_;
  std::atomic<bool> stopping_{false};
  struct Worker {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
    int sock = -1;  // shut down on stop, to wake the proxy
  };
  std::list<Worker> workers_;
};

}  // namespace inc::edge
