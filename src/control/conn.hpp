// A sealed control connection (src/proto/control.hpp) over TCP: the client side, blocking with
// deadlines (jobs, switches, `inc controller status`), and the byte-level session both sides
// share (handshake, framing), which the controller's event loop drives without blocking.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "src/proto/control.hpp"

namespace inc::control {

// The cluster's control secret: the first key of a key file ("ID HEX64", mode 600, read with
// auth::load_key_file, so it is refused when others may read it). Throws with the reason.
proto::auth::Key load_control_key(const std::string& path);

// The state of one connection's session above TCP: hello exchange, then sealed frames.
// Feed it bytes (in), take bytes to write (out); messages come out of take().
class Session {
 public:
  Session(const proto::auth::Key& secret, bool client, proto::ctl::Role role);
  // Bytes to send (the hello at first, then sealed frames).
  std::vector<std::byte>& out() { return out_; }
  // Bytes received. False (and why()) if the peer broke the protocol: the connection must close.
  bool in(std::span<const std::byte> bytes);
  // The next message received, if any.
  std::optional<proto::ctl::Message> take();
  void send(const proto::ctl::Message& m);  // queued until the handshake is done
  bool established() const { return rx_.has_value(); }
  proto::ctl::Role peer_role() const { return peer_role_; }
  const std::string& why() const { return why_; }

 private:
  bool fail(std::string why);
  proto::auth::Key secret_{};
  bool client_;
  proto::ctl::Role role_, peer_role_ = proto::ctl::Role::job;
  proto::ctl::Nonce mine_{};
  std::optional<proto::ctl::Sealer> tx_, rx_;
  std::vector<std::byte> buf_, out_;
  std::vector<proto::ctl::Message> queued_, inbox_;
  std::string why_;
};

// A blocking client connection with deadlines.
class Client {
 public:
  // Connects and completes the handshake within `timeout`; throws std::runtime_error naming
  // the address and the reason.
  Client(const std::string& addr, const proto::auth::Key& secret, proto::ctl::Role role,
         std::chrono::milliseconds timeout);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  void send(const proto::ctl::Message& m, std::chrono::milliseconds timeout);
  // The next message, or nullopt when `timeout` passes first. Throws when the connection broke.
  std::optional<proto::ctl::Message> recv(std::chrono::milliseconds timeout);
  // One request, one answer (whatever comes next) within `timeout`; throws on time-out.
  proto::ctl::Message call(const proto::ctl::Message& m, std::chrono::milliseconds timeout);
  int fd() const { return fd_; }

 private:
  void flush(std::chrono::steady_clock::time_point deadline);
  std::string addr_;
  int fd_ = -1;
  Session s_;
};

}  // namespace inc::control
