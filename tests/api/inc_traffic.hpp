#pragma once
// Traffic bounds of in-network calls under loss recovery. A rank whose chunks wait for a slow
// peer sends them again or probes the switch about them (on an oversubscribed machine a
// descheduled rank or switch looks like loss); the Report counts those bytes in `bytes_sent`
// and again in `bytes_resent`. What the protocol itself sent, each chunk once, is the rest.
#include <cstdint>
#include "inc/inc.hpp"

namespace inc_test {

inline std::uint64_t first_transmission_bytes(const inc::Report& r) {
  return r.bytes_sent >= r.bytes_resent ? r.bytes_sent - r.bytes_resent : ~std::uint64_t{0};
}

}  // namespace inc_test
