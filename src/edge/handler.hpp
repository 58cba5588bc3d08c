// sPIN-style packet handlers of the edge engine (docs/EDGE.md, "Handlers"). Every payload that
// arrives for a receive op of a schedule the engine runs goes through a chain of handlers, chunk
// by chunk as the transport delivers it: an optional conversion handler (the job's: the format
// on the wire, e.g. int8 with a per-block scale) and then the handler that applies it (`reduce`
// into place for a receive-reduce step, `forward` into place for a plain receive, whose data the
// schedule's next send forwards). Each handler has the three sPIN entry points: header (once per
// message, before its payload), payload (per chunk), completion (after the last chunk).
//
// Handlers are stateless objects (one per name, shared by every message and thread); a message's
// state lives in its Context. A registry holds them by name: `inc edge` builds one with the
// built-ins, and a program embedding the engine can add its own (examples/edge/).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "coll/recv_hook.hpp"

namespace inc::edge {

// A piece of a message's data as one handler passes it to the next. `offset` is in bytes of
// that stage's format (wire bytes for the first handler, the collective's type after a
// conversion); `data` is aligned to an element of that format.
struct Chunk {
  std::uint64_t offset = 0;
  const std::byte* data = nullptr;
  std::size_t bytes = 0;
};

class ChainProcessor;

// One handler's view of one message: the header (the receive op), its private state, and the
// way to pass chunks on to the next handler of the chain.
class Context {
 public:
  const coll::RecvMessage& msg() const { return msg_; }
  // The next handler's payload entry point; it must consume the whole chunk (a conversion
  // handler passes on whole elements). Throws inc::Error if there is no next handler.
  void emit(const Chunk& c);
  // Per message, per handler: what the handler keeps between its calls (sPIN's handler memory).
  std::vector<std::byte> scratch;
  std::uint64_t word = 0;

 private:
  friend class ChainProcessor;
  Context(const coll::RecvMessage& m, ChainProcessor& p, std::size_t stage) : msg_(m), proc_(p), stage_(stage) {}
  const coll::RecvMessage& msg_;
  ChainProcessor& proc_;
  std::size_t stage_;
};

class Handler {
 public:
  enum class Role { convert, apply };
  virtual ~Handler() = default;
  virtual std::string_view name() const = 0;
  virtual std::string_view summary() const = 0;  // one line, for `inc edge --list-handlers`
  virtual Role role() const = 0;

  // Conversion handlers: whether they convert this collective's messages (others pass through
  // unconverted), the bytes on the wire for `bytes` bytes of the collective's type, and the
  // sender's side (fill wire[0, wire_bytes) from src[0, bytes)).
  virtual bool converts(const coll::CollectiveParams&) const { return false; }
  virtual std::uint64_t wire_bytes(const coll::CollectiveParams&, std::uint64_t bytes) const { return bytes; }
  virtual void encode(const coll::CollectiveParams&, const std::byte* src, std::uint64_t bytes, std::byte* wire) const;

  // The sPIN entry points. payload returns the bytes of `c` it consumed from the front (whole
  // units of its format; the rest comes again with more bytes); it must consume everything when
  // the chunk reaches the end of the message. Any of them may throw inc::Error: the collective
  // fails with it.
  virtual void header(Context&) const {}
  virtual std::size_t payload(Context& ctx, const Chunk& c) const = 0;
  virtual void completion(Context&) const {}
  // Bytes a payload chunk's data is aligned to (the transport aligns what it hands over).
  virtual std::size_t alignment(const coll::RecvMessage&) const { return 1; }
};

class HandlerRegistry {
 public:
  // reduce, forward, bf16, f16, int8 (handlers.cpp); e4m3, e5m2, mxfp8, mxfp8e5m2, mxfp6e2m3,
  // mxfp6e3m2, mxfp4, mxint8, bfp16 (handlers_ocp.cpp).
  static HandlerRegistry with_builtins();
  // Throws inc::Error(invalid_argument) for an empty or taken name.
  void add(std::unique_ptr<Handler> h);
  // Throws inc::Error(config) naming the known handlers.
  const Handler& get(std::string_view name) const;
  std::vector<std::string> names() const;

 private:
  std::map<std::string, std::shared_ptr<const Handler>, std::less<>> by_name_;
};

// The OCP formats (fp8 E4M3/E5M2, MXFP8/6/4, MXINT8) and block floating point as conversion
// handlers (handlers_ocp.cpp).
void add_ocp_handlers(HandlerRegistry& r);

// How often the handlers ran (engine-wide, any thread): a test and `inc edge` show them.
struct HandlerCounts {
  std::atomic<std::uint64_t> headers{0}, payloads{0}, completions{0}, converted_messages{0};
  std::atomic<std::uint64_t> deposited{0};  // messages placed by the transport without a handler
};

// The RecvHook a rank's proxy installs in its coll::Engine: `convert` (a conversion handler, or
// null for none) then `reduce` / `forward` (apply handlers) for every receive op.
class HandlerChain : public coll::RecvHook {
 public:
  HandlerChain(const HandlerRegistry& reg, std::string_view convert, HandlerCounts* counts = nullptr,
               std::string_view reduce = "reduce", std::string_view forward = "forward");
  bool converts(const coll::CollectiveParams& p) const override;
  std::uint64_t wire_bytes(const coll::CollectiveParams& p, std::uint64_t bytes) const override;
  void encode(const coll::CollectiveParams& p, const std::byte* src, std::uint64_t bytes, std::byte* wire) const override;
  std::unique_ptr<coll::MessageProcessor> open(const coll::RecvMessage& m) override;
  // A plain receive of an unconverted collective whose apply handler is the built-in `forward`:
  // deposited into place by the transport (one copy fewer; counted in HandlerCounts::deposited).
  bool deposits(const coll::RecvMessage& m) override;

 private:
  const Handler* convert_ = nullptr;
  const Handler* reduce_;
  const Handler* forward_;
  HandlerCounts* counts_;
};

// One message through its stages (made by HandlerChain::open; public for the handlers' tests).
class ChainProcessor : public coll::MessageProcessor {
 public:
  ChainProcessor(const coll::RecvMessage& m, std::vector<const Handler*> stages, HandlerCounts* counts);
  std::size_t consume(std::uint64_t offset, const std::byte* data, std::size_t n) override;
  std::size_t alignment() const override;
  void finish() override;

 private:
  friend class Context;
  std::size_t run(std::size_t stage, const Chunk& c);
  coll::RecvMessage msg_;
  std::vector<const Handler*> stages_;
  std::vector<Context> ctx_;
  HandlerCounts* counts_;
  std::uint64_t consumed_ = 0;
  bool finished_ = false;
};

}  // namespace inc::edge
