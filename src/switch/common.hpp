// Value types shared by the sans-IO state machines and their drivers: endpoints, time and the
// outbox of packets a state machine wants sent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
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
//
// An entry may also reference its payload instead of holding it (commit_ref): the head (the
// packet header) is in the arena, the payload is read from the owner's memory when the driver
// sends it, as a second iovec {header, payload} (docs/ARCHITECTURE.md, "The data path"). This
// saves the copy of every chunk into the arena. The owner must keep those bytes unchanged until
// the outbox is cleared, or call materialize(tag) first, which copies the bytes of its entries
// into the arena: a worker before a result overwrites a buffer it still references, a switch
// before a slot it still references takes its next chunk. generation() (bumped by clear())
// tells an owner whether a reference it queued may still be here.
class Outbox {
 public:
  struct Entry {
    Endpoint to;
    std::uint32_t offset;          // head: `head_size` bytes in the arena at `offset`
    std::uint32_t head_size;
    std::uint32_t ref_size = 0;    // then `ref_size` bytes at `ref`, outside the arena
    const std::byte* ref = nullptr;
    std::uint64_t tag = 0;         // the owner's name for the referenced bytes
    std::uint32_t tail_size = 0;   // then `tail_size` bytes in the arena right after the head
                                   // (the authentication trailer of a referencing entry)
    std::size_t total() const { return std::size_t(head_size) + ref_size + tail_size; }
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
  // Queue the `head` bytes written at the last reserve(), followed by `payload`, which is not
  // copied: it must stay valid and unchanged until clear() or materialize(tag).
  // With `tail`, the `tail` bytes written after the head (at the same reserve) follow the
  // payload on the wire.
  std::size_t commit_ref(Endpoint to, std::size_t head, std::span<const std::byte> payload,
                         std::uint64_t tag, std::size_t tail = 0) {
    const std::size_t i = commit(to, head + tail);
    entries_[i].head_size = std::uint32_t(head);
    entries_[i].tail_size = std::uint32_t(tail);
    if (!payload.empty()) {
      Entry& e = entries_[i];
      e.ref = payload.data();
      e.ref_size = std::uint32_t(payload.size());
      e.tag = tag;
      ++refs_;
    }
    return i;
  }
  // Queue the bytes of an earlier entry again for another destination.
  void repeat(std::size_t entry, Endpoint to) {
    Entry e = entries_[entry];
    e.to = to;
    entries_.push_back(e);
    if (e.ref) ++refs_;
  }
  // The two parts of an entry (the payload part is empty unless it references).
  std::span<const std::byte> head(const Entry& e) const { return {arena_.data() + e.offset, e.head_size}; }
  std::span<const std::byte> payload(const Entry& e) const { return {e.ref, e.ref_size}; }
  std::span<const std::byte> tail(const Entry& e) const {
    return {arena_.data() + e.offset + e.head_size, e.tail_size};
  }
  // The whole datagram in one span: for a referencing entry a copy, valid until the next
  // bytes() of a referencing entry or clear() (simple drivers, the fault injector, tests).
  std::span<const std::byte> bytes(const Entry& e) const {
    if (!e.ref) return {arena_.data() + e.offset, std::size_t(e.head_size) + e.tail_size};
    flat_.resize(e.total());
    std::memcpy(flat_.data(), arena_.data() + e.offset, e.head_size);
    std::memcpy(flat_.data() + e.head_size, e.ref, e.ref_size);
    std::memcpy(flat_.data() + e.head_size + e.ref_size, arena_.data() + e.offset + e.head_size, e.tail_size);
    return {flat_.data(), flat_.size()};
  }
  const std::vector<Entry>& entries() const { return entries_; }
  std::size_t size() const { return entries_.size() - read_; }
  bool empty() const { return read_ >= entries_.size(); }
  // Entries still referencing memory outside the arena.
  std::size_t references() const { return refs_; }
  // Bumped by clear(): a reference queued in an earlier generation has been sent (or dropped).
  std::uint64_t generation() const { return generation_; }
  // Copy the referenced bytes of every entry tagged `tag` into the arena (entries repeated
  // from one share the copy): afterwards the outbox no longer reads the owner's memory.
  void materialize(std::uint64_t tag) { materialize_if([tag](const Entry& e) { return e.tag == tag; }); }
  void materialize_all() { materialize_if([](const Entry&) { return true; }); }
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
    refs_ = 0;
    ++generation_;
  }

 private:
  template <class Pred>
  void materialize_if(Pred&& pred) {
    if (refs_ == 0) return;
    std::uint32_t last_off = 0, last_new = 0;
    const std::byte* last_ref = nullptr;
    for (Entry& e : entries_) {
      if (!e.ref || !pred(e)) continue;
      if (e.ref != last_ref || e.offset != last_off) {  // not a repeat of the previous copy
        last_ref = e.ref;
        last_off = e.offset;
        std::byte* p = reserve(e.total());
        std::memcpy(p, arena_.data() + e.offset, e.head_size);
        std::memcpy(p + e.head_size, e.ref, e.ref_size);
        std::memcpy(p + e.head_size + e.ref_size, arena_.data() + e.offset + e.head_size, e.tail_size);
        last_new = std::uint32_t(used_);
        used_ += e.total();
      }
      e.offset = last_new;
      e.head_size += e.ref_size + e.tail_size;
      e.tail_size = 0;
      e.ref = nullptr;
      e.ref_size = 0;
      --refs_;
    }
  }
  std::vector<std::byte> arena_;
  std::vector<Entry> entries_;
  mutable std::vector<std::byte> flat_;
  std::size_t used_ = 0;
  std::size_t read_ = 0;
  std::size_t refs_ = 0;
  std::uint64_t generation_ = 1;
};

}  // namespace inc::sw
