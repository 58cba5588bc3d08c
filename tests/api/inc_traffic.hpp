#pragma once
// Traffic bounds of in-network calls under loss recovery. A rank whose chunks wait for a slow
// peer sends them again (on an oversubscribed machine a descheduled rank or switch looks like
// loss); the Report counts those packets (`retransmissions`) in `bytes_sent`. What the protocol
// itself sends is at least `bytes_sent` minus one full packet per retransmission.
#include <cstdint>
#include "inc/inc.hpp"
#include "src/proto/packet.hpp"

namespace inc_test {

// One packet of the launcher's switches at most: a slot of 256 four-byte cells (`inc switch`'s
// default --slot-elements), the header and the auth trailer (the launcher keys its jobs).
inline constexpr std::uint64_t kMaxLaunchPacketBytes =
    256 * 4 + inc::proto::kHeaderBytes + inc::proto::kAuthTrailerBytes;

inline std::uint64_t first_transmission_bytes(const inc::Report& r) {
  const std::uint64_t resent = r.retransmissions * kMaxLaunchPacketBytes;
  return r.bytes_sent > resent ? r.bytes_sent - resent : 0;
}

}  // namespace inc_test
