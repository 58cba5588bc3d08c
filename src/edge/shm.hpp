// Shared memory and descriptor passing between a rank and its host's edge engine: sealed memfd
// regions (the equivalent of RDMA memory registration: the engine maps the rank's pages), a
// lock-free single-producer/single-consumer ring of fixed-size entries inside such a region, and
// messages with file descriptors over a Unix SEQPACKET socket (SCM_RIGHTS).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "transport/socket.hpp"

namespace inc::edge {

// A memfd mapped read-write. The creator seals its size (F_SEAL_SHRINK | F_SEAL_GROW |
// F_SEAL_SEAL) so that the other side's mapping can never turn into SIGBUS; `map` refuses an
// fd whose size is not sealed or smaller than asked.
class SharedRegion {
 public:
  SharedRegion() = default;
  ~SharedRegion();
  SharedRegion(SharedRegion&& o) noexcept { *this = std::move(o); }
  SharedRegion& operator=(SharedRegion&& o) noexcept;
  SharedRegion(const SharedRegion&) = delete;
  SharedRegion& operator=(const SharedRegion&) = delete;

  // Throws inc::Error(system) on failure. `bytes` > 0.
  static SharedRegion create(std::uint64_t bytes, const char* name);
  // Map a region received from a peer. Throws inc::Error(invalid_argument) naming the problem.
  static SharedRegion map(int fd, std::uint64_t bytes);

  std::byte* data() const { return base_; }
  std::uint64_t size() const { return bytes_; }
  int fd() const { return fd_.get(); }

 private:
  transport::Fd fd_;
  std::byte* base_ = nullptr;
  std::uint64_t bytes_ = 0;
};

// Header of a ring in shared memory; `entries` slots of `entry_bytes` follow it (64-aligned).
// Producer: writes slot[tail % entries], then tail (release). Consumer: reads slots below tail
// (acquire), then head (release). Both indices are free-running 64-bit counters. The other side
// may be hostile: a consumer that sees tail - head > entries, or a producer that sees head
// outside [tail - entries, tail], treats it as a protocol error (`ok` false), never indexes with it.
struct RingHeader {
  alignas(64) std::atomic<std::uint64_t> head;
  alignas(64) std::atomic<std::uint64_t> tail;
};
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);
static_assert(sizeof(RingHeader) == 128);

class SpscRing {
 public:
  SpscRing() = default;
  SpscRing(std::byte* base, std::uint32_t entries, std::uint32_t entry_bytes)
      : h_(reinterpret_cast<RingHeader*>(base)), slots_(base + sizeof(RingHeader)),
        entries_(entries), entry_bytes_(entry_bytes) {}
  static std::uint64_t bytes_for(std::uint32_t entries, std::uint32_t entry_bytes) {
    return sizeof(RingHeader) + std::uint64_t{entries} * entry_bytes;
  }
  // Placement-construct the indices (creator only).
  void init() {
    new (&h_->head) std::atomic<std::uint64_t>(0);
    new (&h_->tail) std::atomic<std::uint64_t>(0);
  }
  // Producer. false if the ring is full; `ok` false if the consumer's index is impossible.
  bool push(const void* entry, std::size_t n, bool& ok) {
    const std::uint64_t head = h_->head.load(std::memory_order_acquire);
    ok = head <= tail_ && tail_ - head <= entries_;
    if (!ok || tail_ - head == entries_) return false;
    std::memcpy(slots_ + (tail_ % entries_) * entry_bytes_, entry, std::min<std::size_t>(n, entry_bytes_));
    h_->tail.store(++tail_, std::memory_order_release);
    return true;
  }
  // Consumer: copies the next entry out (the producer may be hostile: never read it twice).
  bool pop(void* entry, std::size_t n, bool& ok) {
    const std::uint64_t tail = h_->tail.load(std::memory_order_acquire);
    ok = tail >= head_ && tail - head_ <= entries_;
    if (!ok || tail == head_) return false;
    std::memcpy(entry, slots_ + (head_ % entries_) * entry_bytes_, std::min<std::size_t>(n, entry_bytes_));
    h_->head.store(++head_, std::memory_order_release);
    return true;
  }
  std::uint32_t entries() const { return entries_; }

 private:
  RingHeader* h_ = nullptr;
  std::byte* slots_ = nullptr;
  std::uint32_t entries_ = 0, entry_bytes_ = 0;
  std::uint64_t head_ = 0, tail_ = 0;  // this side's own copy of its index
};

// One SEQPACKET message with up to 4 file descriptors. send_msg: false if the peer is gone.
// recv_msg: bytes received (0 = the peer closed), received fds appended to `fds` (owned by the
// caller); -1 with errno EAGAIN when nothing is there (non-blocking sockets).
bool send_msg(int sock, const void* data, std::size_t n, std::span<const int> fds = {});
long recv_msg(int sock, void* data, std::size_t cap, std::vector<transport::Fd>& fds);

// An eventfd: signal() adds 1, drain() reads and resets (non-blocking).
void signal_eventfd(int fd);
void drain_eventfd(int fd);

}  // namespace inc::edge
