#include "edge/shm.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "inc/types.hpp"

namespace inc::edge {

SharedRegion::~SharedRegion() {
  if (base_) ::munmap(base_, bytes_);
}

SharedRegion& SharedRegion::operator=(SharedRegion&& o) noexcept {
  if (this != &o) {
    if (base_) ::munmap(base_, bytes_);
    fd_ = std::move(o.fd_);
    base_ = o.base_;
    bytes_ = o.bytes_;
    o.base_ = nullptr;
    o.bytes_ = 0;
  }
  return *this;
}

SharedRegion SharedRegion::create(std::uint64_t bytes, const char* name) {
  SharedRegion r;
  r.fd_.reset(::memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!r.fd_) throw Error(Error::Kind::internal, fmt::format("memfd_create: {}", std::strerror(errno)));
  if (::ftruncate(r.fd_.get(), static_cast<off_t>(bytes)) != 0)
    throw Error(Error::Kind::internal, fmt::format("ftruncate memfd to {} B: {}", bytes, std::strerror(errno)));
  if (::fcntl(r.fd_.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
    throw Error(Error::Kind::internal, fmt::format("sealing memfd: {}", std::strerror(errno)));
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, r.fd_.get(), 0);
  if (p == MAP_FAILED) throw Error(Error::Kind::internal, fmt::format("mmap {} B: {}", bytes, std::strerror(errno)));
  r.base_ = static_cast<std::byte*>(p);
  r.bytes_ = bytes;
  return r;
}

SharedRegion SharedRegion::map(int fd, std::uint64_t bytes) {
  SharedRegion r;
  r.fd_.reset(fd);
  const int seals = ::fcntl(fd, F_GET_SEALS);
  constexpr int kNeed = F_SEAL_SHRINK | F_SEAL_GROW;
  if (seals < 0 || (seals & kNeed) != kNeed)
    throw Error(Error::Kind::invalid_argument,
                "the region is not a memfd sealed against shrinking and growing (the engine would "
                "fault on a truncated mapping)");
  struct stat st{};
  if (::fstat(fd, &st) != 0 || bytes == 0 || static_cast<std::uint64_t>(st.st_size) < bytes)
    throw Error(Error::Kind::invalid_argument,
                fmt::format("the region has {} B, {} B were announced", static_cast<long long>(st.st_size), bytes));
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) throw Error(Error::Kind::internal, fmt::format("mmap {} B: {}", bytes, std::strerror(errno)));
  r.base_ = static_cast<std::byte*>(p);
  r.bytes_ = bytes;
  return r;
}

bool send_msg(int sock, const void* data, std::size_t n, std::span<const int> fds) {
  iovec iov{const_cast<void*>(data), n};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  alignas(cmsghdr) char ctl[CMSG_SPACE(4 * sizeof(int))] = {};
  if (!fds.empty()) {
    m.msg_control = ctl;
    m.msg_controllen = CMSG_SPACE(fds.size() * sizeof(int));
    cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(fds.size() * sizeof(int));
    std::memcpy(CMSG_DATA(c), fds.data(), fds.size() * sizeof(int));
  }
  for (;;) {
    ssize_t r = ::sendmsg(sock, &m, MSG_NOSIGNAL);
    if (r == static_cast<ssize_t>(n)) return true;
    if (r < 0 && errno == EINTR) continue;
    return false;
  }
}

long recv_msg(int sock, void* data, std::size_t cap, std::vector<transport::Fd>& fds) {
  iovec iov{data, cap};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  alignas(cmsghdr) char ctl[CMSG_SPACE(4 * sizeof(int))] = {};
  m.msg_control = ctl;
  m.msg_controllen = sizeof ctl;
  ssize_t r;
  do r = ::recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
  while (r < 0 && errno == EINTR);
  if (r < 0) return -1;
  // Take every descriptor (so none leaks), even from a message that is then refused.
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      const std::size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (std::size_t i = 0; i < k; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        fds.emplace_back(fd);
      }
    }
  if (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {  // larger than any message of the protocol
    errno = EMSGSIZE;
    return -2;
  }
  return static_cast<long>(r);
}

void signal_eventfd(int fd) {
  std::uint64_t one = 1;
  while (::write(fd, &one, sizeof one) < 0 && errno == EINTR) {
  }
}

void drain_eventfd(int fd) {
  std::uint64_t v;
  while (::read(fd, &v, sizeof v) < 0 && errno == EINTR) {
  }
}

}  // namespace inc::edge
