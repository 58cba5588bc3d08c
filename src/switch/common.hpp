// Value types shared by the sans-IO state machines and their drivers: endpoints, time and the
// outbox of packets a state machine wants sent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace inc::sw {

// Time is an input (sans-IO): nanoseconds on whatever monotonic clock the driver uses.
using Nanos = std::int64_t;
inline constexpr Nanos kMillisecond = 1'000'000;
inline constexpr Nanos kSecond = 1'000'000'000;

// An opaque peer address. The UDP driver packs IPv4 address + port (tag bit 48 set); the
// simulated network uses small node numbers. id 0 is "no endpoint".
struct Endpoint {
  std::uint64_t id = 0;
  static constexpr std::uint64_t kIpv4Tag = 1ull << 48;
  static Endpoint ipv4(std::uint32_t addr_host_order, std::uint16_t port) {
    return {kIpv4Tag | (std::uint64_t(addr_host_order) << 16) | port};
  }
  static Endpoint node(std::uint32_t n) { return {std::uint64_t(n) + 1}; }
  bool valid() const { return id != 0; }
  bool is_ipv4() const { return (id & kIpv4Tag) != 0; }
  std::uint32_t ipv4_addr() const { return std::uint32_t(id >> 16); }
  std::uint16_t port() const { return std::uint16_t(id); }
  std::string str() const;
  friend bool operator==(const Endpoint&, const Endpoint&) = default;
};

// The fate of one datagram under seeded faults, shared by the simulated network and the UDP
// fault injector so that both draw the same way: possibly duplicated, each copy possibly lost,
// delayed by delay + jitter, and possibly held back further (reordered). Calls deliver(at) for
// every copy that survives. `Faults` has loss, dup, reorder, delay, jitter, reorder_delay.
struct FaultTally {
  std::uint64_t lost = 0, duplicated = 0, reordered = 0;
};
template <class Faults, class Uniform, class Deliver>
void datagram_fates(const Faults& f, Uniform&& uniform, Nanos now, FaultTally& tally,
                    Deliver&& deliver) {
  int copies = 1;
  if (f.dup > 0 && uniform() < f.dup) {
    copies = 2;
    ++tally.duplicated;
  }
  for (int c = 0; c < copies; ++c) {
    if (f.loss > 0 && uniform() < f.loss) {
      ++tally.lost;
      continue;
    }
    Nanos at = now + f.delay + Nanos(uniform() * double(f.jitter));
    if (f.reorder > 0 && uniform() < f.reorder) {
      at += Nanos(uniform() * double(f.reorder_delay));
      ++tally.reordered;
    }
    deliver(at);
  }
}

// Packets a state machine produced, in order. Bytes live in one arena so steady state does not
// allocate; several entries may share the same bytes (switch replication = one encode).
class Outbox {
 public:
  struct Entry {
    Endpoint to;
    std::uint32_t offset;
    std::uint32_t size;
  };
  // Writable space for one packet of at most `max_bytes`; valid until the next reserve/clear.
  std::byte* reserve(std::size_t max_bytes) {
    if (arena_.size() < used_ + max_bytes) arena_.resize(std::max(arena_.size() * 2, used_ + max_bytes));
    return arena_.data() + used_;
  }
  // Queue the `size` bytes written at the last reserve() for `to`; returns the entry index.
  std::size_t commit(Endpoint to, std::size_t size) {
    entries_.push_back({to, std::uint32_t(used_), std::uint32_t(size)});
    used_ += size;
    return entries_.size() - 1;
  }
  // Queue the bytes of an earlier entry again for another destination.
  void repeat(std::size_t entry, Endpoint to) {
    Entry e = entries_[entry];
    e.to = to;
    entries_.push_back(e);
  }
  std::span<const std::byte> bytes(const Entry& e) const { return {arena_.data() + e.offset, e.size}; }
  const std::vector<Entry>& entries() const { return entries_; }
  std::size_t size() const { return entries_.size() - read_; }
  bool empty() const { return read_ >= entries_.size(); }
  // Pop in order (simple drivers); batch drivers iterate entries() and call clear().
  bool pop(Endpoint& to, std::vector<std::byte>& out) {
    if (read_ >= entries_.size()) {
      clear();
      return false;
    }
    const Entry& e = entries_[read_++];
    to = e.to;
    auto b = bytes(e);
    out.assign(b.begin(), b.end());
    if (read_ == entries_.size()) clear();
    return true;
  }
  void clear() {
    entries_.clear();
    used_ = 0;
    read_ = 0;
  }

 private:
  std::vector<std::byte> arena_;
  std::vector<Entry> entries_;
  std::size_t used_ = 0;
  std::size_t read_ = 0;
};

}  // namespace inc::sw
