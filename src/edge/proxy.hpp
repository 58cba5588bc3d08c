// One rank's proxy inside the edge engine (engine.hpp): a thread that owns the rank's
// connection, its mapped rings and registrations, and a coll::Engine whose mesh joins the
// proxies of the job's other ranks.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <string>

#include "coll/executor.hpp"
#include "edge/engine.hpp"
#include "edge/shm.hpp"
#include "edge/wire.hpp"

namespace inc::edge {

class RankProxy {
 public:
  RankProxy(EdgeEngine& owner, transport::Fd sock, std::uint32_t peer_uid);
  ~RankProxy();
  // Hello, admission, the job's mesh; then serve until the rank disconnects or the engine stops.
  void run();

 private:
  struct CommInfo {
    int size = 0, rank = 0;
  };
  struct Active {
    std::uint64_t uid;
    std::shared_ptr<coll::CollOp> op;
    coll::CollectiveParams params;
    std::byte* output;
  };
  bool handshake();
  bool reply(bool ok, Error::Kind kind, const std::string& msg);
  void refuse(const std::string& why);
  void serve_control();
  void add_comm(const AddComm& m);
  void protocol_error(const std::string& why);
  std::byte* resolve(const BufRef& ref, std::uint64_t bytes, const char* what);
  void start(const Descriptor& d);
  coll::CollectiveParams check(const Descriptor& d, std::byte*& in, std::byte*& out);
  bool take_descriptors();  // true if it took any
  bool finish_done();  // true if a collective completed
  void complete(std::uint64_t uid, const coll::CollOp* op, const Error* err,
                const coll::CollectiveParams* p = nullptr);
  void flush_completions();
  static std::uint64_t rings_bytes();
  void count_mapped(std::uint64_t bytes);

  EdgeEngine& owner_;
  transport::Fd sock_;
  std::uint32_t peer_uid_;
  bool admitted_ = false;
  std::uint64_t job_ = 0;
  int rank_ = 0, world_ = 0;
  std::chrono::milliseconds timeout_{0};
  // Declared before engine_: destroyed after it (the engine may point into them until then).
  SharedRegion rings_;
  std::map<std::uint32_t, SharedRegion> regs_;
  transport::Fd doorbell_, completion_;
  SpscRing sq_, cq_;
  std::shared_ptr<HandlerChain> chain_;  // the engine's receive hook (its conversion handler)
  std::unique_ptr<coll::Engine> engine_;
  std::map<std::uint32_t, CommInfo> comms_;
  std::list<Active> active_;
  std::deque<Completion> pending_;  // completions the ring had no room for yet
  bool control_ready_ = false;
  bool closed_ = false;
  std::string closed_why_;
};

}  // namespace inc::edge
