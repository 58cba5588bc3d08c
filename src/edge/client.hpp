// The rank's side of the edge engine (engine.hpp): connects to the host's engine, registers
// shared memory, posts collectives into the submission ring and reaps completions. The library
// (src/api) uses it for INC_OFFLOAD=edge; it knows nothing about environments.
//
// Buffers: memory from alloc() is registered with the engine and used in place (zero copy,
// like RDMA-registered memory). Any other buffer is staged: copied into a registered staging
// region when the collective is posted, and the result copied out when it completes (in the
// wait()/test() that reaps it), as NCCL does with unregistered buffers.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "coll/schedule.hpp"
#include "edge/shm.hpp"
#include "edge/wire.hpp"

namespace inc::edge {

struct ClientConfig {
  std::string socket_path;
  std::uint64_t job = 0;           // names the job's session at the engine
  std::uint8_t token[32] = {};     // the job's secret
  int rank = 0, world = 1;
  std::chrono::milliseconds timeout{60000};  // INC_TIMEOUT
  std::uint64_t mesh_tag = 0;
  std::string store;        // "host:port"
  std::string prefix;       // store key prefix for the engines' mesh
  std::string listen_host;  // where this rank's proxy listens
  std::string handler;      // conversion handler for the job's messages ("" = none; INC_EDGE_HANDLER)
};

// One collective posted to the engine.
struct EdgeOp {
  std::uint64_t uid = 0;
  bool done = false;
  std::optional<Error> error;
  Completion result;
  std::chrono::steady_clock::time_point deadline;
  // Staging: the region indices in use, and where the result goes when it completes.
  std::vector<std::uint32_t> staged;
  std::byte* copy_to = nullptr;
  const std::byte* copy_from = nullptr;
  std::uint64_t copy_bytes = 0;
};

class EdgeClient {
 public:
  // Opens the connection (no hello yet): throws inc::Error(config) if no engine answers.
  explicit EdgeClient(ClientConfig cfg);
  ~EdgeClient();
  EdgeClient(const EdgeClient&) = delete;
  EdgeClient& operator=(const EdgeClient&) = delete;

  // Hello: the engine admits the rank to its job's session and connects the job's proxies
  // (every rank of the job must do this at the same time). Throws inc::Error naming the refusal.
  void attach();
  void add_comm(std::uint32_t comm_id, const std::vector<int>& members);

  // Post a collective (buffers as the host executor takes them). Never waits for peers.
  std::shared_ptr<EdgeOp> start(std::uint32_t comm_id, const coll::CollectiveParams& p, const void* input,
                                void* output);
  void wait(EdgeOp& op);  // throws the collective's error
  bool test(EdgeOp& op);  // true once done (throws its error)

  // Registered memory (zero copy). free() of memory still used by a posted collective is the
  // caller's error, as with any buffer of a non-blocking call.
  void* alloc(std::size_t bytes);
  void free(void* p);

  const std::string& path() const { return cfg_.socket_path; }
  const std::string& handler() const { return cfg_.handler; }

 private:
  struct Reg {
    SharedRegion mem;
    bool user = false;  // from alloc()
    bool in_use = false;
  };
  void send_control(const void* msg, std::size_t n, int fd, const char* what);
  void await_reply(const char* what);
  std::uint32_t register_region(SharedRegion mem, bool user);
  BufRef place(const void* p, std::uint64_t bytes, bool copy_in, EdgeOp& op, std::byte** staged);
  void post_backlog();
  void reap();  // drain the completion ring
  void finish(EdgeOp& op, const Completion& c);
  void fail_everything(const Error& e);
  void check_socket();
  void progress(EdgeOp& op, int timeout_ms);

  ClientConfig cfg_;
  std::mutex mu_;
  transport::Fd sock_, doorbell_, completion_;
  SharedRegion rings_;
  SpscRing sq_, cq_;
  std::map<std::uint32_t, Reg> regs_;
  std::uint32_t next_reg_ = 1;
  std::map<std::uint64_t, std::shared_ptr<EdgeOp>> inflight_;
  std::deque<Descriptor> backlog_;  // posted while the submission ring was full
  std::uint64_t next_uid_ = 1;
  std::optional<Error> dead_;  // the engine is gone: every call fails with this
};

}  // namespace inc::edge
