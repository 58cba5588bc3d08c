// The executor's hook for a layer that processes messages itself (the edge engine's sPIN-style
// packet handlers, src/edge/handler.hpp): it may change what goes on the wire for a send op
// (a conversion: bf16 on the wire for f32 data, int8 with a scale) and processes the payload of
// every receive op as it arrives, instead of the executor's own copy / reduce into place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "coll/schedule.hpp"
#include "transport/tcp_mesh.hpp"

namespace inc::coll {

// One arriving message of a schedule's receive op: what a header handler sees.
struct RecvMessage {
  const CollectiveParams* params = nullptr;
  OpKind kind = OpKind::recv;  // recv (deliver into dst) or recv_reduce (dst = operand (op) it)
  int peer = -1;               // comm rank of the sender
  std::byte* dst = nullptr;
  const std::byte* operand = nullptr;  // recv_reduce
  std::uint64_t bytes = 0;             // of dst, in the collective's type
  std::uint64_t wire_bytes = 0;        // of the payload on the wire
  // The op's arithmetic (arithmetic() below: the call's type and op, or the f32 partial sums of
  // a wide accumulator on the hosts, or the i32 limbs of a reproducible sum), and the
  // collective's count of numeric events, to which a reduce handler adds those of its adds.
  Arith arith = Arith::call;
  std::uint64_t* events = nullptr;
};

// The type and op a recv_reduce message is reduced in (and the type a plain receive carries).
inline OpArithmetic arithmetic(const RecvMessage& m) noexcept {
  Op o;
  o.arith = m.arith;
  return arithmetic(o, m.params->dtype, m.params->op);
}

// A consumer of one message's payload; finish() runs when the last byte was consumed.
class MessageProcessor : public transport::PayloadConsumer {
 public:
  virtual void finish() = 0;
};

class RecvHook {
 public:
  virtual ~RecvHook() = default;
  // Whether send ops of this collective go on the wire converted (encode() below); if not, the
  // executor sends the schedule's bytes as they are.
  virtual bool converts(const CollectiveParams& p) const = 0;
  // Payload bytes on the wire for `bytes` bytes of the collective's type (a pure function of
  // its arguments: sender and receiver must agree).
  virtual std::uint64_t wire_bytes(const CollectiveParams& p, std::uint64_t bytes) const = 0;
  // Fill wire[0, wire_bytes(p, bytes)) from src[0, bytes) for a send op.
  virtual void encode(const CollectiveParams& p, const std::byte* src, std::uint64_t bytes, std::byte* wire) const = 0;
  // A processor for one message (throws inc::Error to refuse it).
  virtual std::unique_ptr<MessageProcessor> open(const RecvMessage& m) = 0;
  // Whether this message needs no handler: the transport deposits its payload into dst itself
  // (read straight from the socket into place, as a NIC DMAs a message that has no payload
  // handler), and open() is not called for it.
  virtual bool deposits(const RecvMessage&) { return false; }
};

}  // namespace inc::coll
