// libFuzzer target for the controller's protocol (src/proto/control.*, src/control/conn.*):
// byte 0 picks the entry point, the rest is untrusted input.
//   even: a message's plaintext: decode either refuses with a reason or accepts, and then the
//         encoding of what it accepted is the input itself (one encoding per message: no field
//         is read loosely)
//   odd:  a byte stream into the server side of a session after a real client's hello:
//         refused with a reason or accepted; nothing else (no exception, no crash); messages
//         taken out of it encode again
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "fuzz/fuzz_check.hpp"
#include "src/control/conn.hpp"
#include "src/proto/control.hpp"

using inc::fuzz::fail;
namespace ctl = inc::proto::ctl;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::span<const std::byte> in(reinterpret_cast<const std::byte*>(data) + 1, size - 1);
  try {
    if ((data[0] & 1) == 0) {
      std::string why;
      auto m = ctl::decode(in, why);
      if (!m) {
        if (why.empty()) fail("refused without a reason");
        return 0;
      }
      auto again = ctl::encode(*m);
      if (again.size() != in.size() || !std::equal(again.begin(), again.end(), in.begin()))
        fail("decode accepted bytes that do not encode back to themselves");
      return 0;
    }
    inc::proto::auth::Key key{};
    key.fill(7);
    inc::control::Session client(key, true, ctl::Role::job), server(key, false, ctl::Role::job);
    if (!server.in(client.out()) || !client.in(server.out())) fail("a real hello was refused");
    // The fuzzer's bytes in two pieces, as TCP may cut them.
    const std::size_t cut = in.empty() ? 0 : data[0] % (in.size() + 1);
    bool ok = server.in(in.first(cut)) && server.in(in.subspan(cut));
    if (!ok && server.why().empty()) fail("a session refused bytes without a reason");
    while (auto m = server.take()) (void)ctl::encode(*m);
  } catch (const std::exception& e) {
    fail("exception from the control protocol", e.what());
  }
  return 0;
}
