// libFuzzer target for the rendezvous store's request parser (INC_FUZZ=ON, clang):
//   tests/transport/fuzz_store_server -max_total_time=60
// Each input is sent as raw bytes on a fresh connection to one long-lived StoreServer; the
// server must end that connection by itself (answer what it can, close on garbage or EOF) and
// keep serving a control client. A crash, a hang (libFuzzer -timeout) or a control failure is
// a finding.
#include <sys/socket.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string_view>

#include "transport/store.hpp"

using namespace inc::transport;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static auto* server = new StoreServer("127.0.0.1", 0);
  static auto* control = new StoreClient("127.0.0.1", server->port());
  static std::uint64_t runs = 0;
  auto deadline = deadline_after(std::chrono::seconds(10));
  Fd fd = connect_tcp("127.0.0.1", server->port(), deadline);
  try {
    send_all(fd.get(), std::string_view(reinterpret_cast<const char*>(data), size), deadline,
             "fuzz input");
  } catch (const inc::Error&) {
    return 0;  // closed by the server while sending: fine
  }
  ::shutdown(fd.get(), SHUT_WR);
  std::byte buf[4096];
  for (;;) {
    try {
      recv_all(fd.get(), std::span(buf, 1), deadline, "fuzz reply");
    } catch (const inc::Error& e) {
      if (e.kind() == inc::Error::Kind::peer_failure) break;
      std::fprintf(stderr, "server did not close the connection: %s\n", e.what());
      std::abort();
    }
  }
  if (++runs % 64 == 0 && control->add("fuzz/control", 1) != static_cast<std::int64_t>(runs / 64)) {
    std::fprintf(stderr, "control client saw a wrong counter\n");
    std::abort();
  }
  return 0;
}
