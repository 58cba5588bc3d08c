// libFuzzer target for the switch's packet handling (and the worker's, on the same bytes).
//
// Job 3 is keyed: whatever the bytes, no member joins it, nothing is aggregated or answered
// (nobody here holds its key; the fuzzer cannot forge a tag).
// Input: a sequence of records [mode:1][len:2 LE][bytes:len]. mode & 3 picks the sender
// (a joined member, the parent switch, a stranger, a controller); mode & 4 "repairs" the
// header (magic, version, job, epoch of a live job, slot of the chunk) so that mutations reach
// the deep aggregation paths instead of dying at the first check. After every packet:
//  * every packet the switch emits decodes cleanly and fits a datagram,
//  * counters stay consistent (packets_in counts every input, drops <= packets_in);
// a record of one byte is no packet: it asks the switch to resize job 1 or 2 live (its resize
// and the joins, results and drains that follow are fuzzed too);
// the same packets also go to a lane of a multi-lane daemon (external control), whose control
// events the harness answers as the daemon does.
// Built with clang -fsanitize=fuzzer when INC_FUZZ=ON (fuzz/CMakeLists.txt); the same file is
// linked with standalone_main.cpp under gcc so CI runs a corpus + random inputs every time.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "src/proto/auth.hpp"
#include "src/proto/packet.hpp"
#include "src/switch/dataplane.hpp"
#include "src/switch/worker.hpp"

namespace {

using inc::sw::Endpoint;

[[noreturn]] void invariant_failed(const char* what) {
  std::fprintf(stderr, "invariant failed: %s\n", what);
  __builtin_trap();
}

void check_outbox(inc::sw::Outbox& out) {
  for (const auto& e : out.entries()) {
    auto b = out.bytes(e);
    if (b.size() > inc::proto::kMaxPacketBytes) invariant_failed("oversized packet");
    inc::proto::PacketView v;
    if (inc::proto::decode(b, v) != inc::proto::Reason::ok) invariant_failed("switch emitted a malformed packet");
    if (!e.to.valid()) invariant_failed("packet without destination");
  }
  out.clear();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const Endpoint parent = Endpoint::node(100), stranger = Endpoint::node(200),
                 controller = Endpoint::node(300);
  inc::sw::SwitchConfig cfg;
  cfg.slots = 16;
  cfg.slot_elems = 8;
  cfg.incarnation = 7;
  cfg.parent = parent;
  cfg.control_key.emplace();
  cfg.control_key->fill(0x5E);  // as the standalone driver seals control packets
  cfg.idle_timeout = 1000;
  inc::sw::SwitchDataPlane sw(cfg);
  sw.admit({1, 3, 4}, 0);                                 // root job, 3 members
  sw.admit({2, 2, 2, 0}, 0);                              // leaf job under the parent
  inc::proto::auth::Key key{};
  key[0] = 1;
  sw.admit({3, 2, 2, inc::proto::kNoMember, key}, 0);    // keyed: every packet is checked
  const Endpoint members[3] = {Endpoint::node(1), Endpoint::node(2), Endpoint::node(3)};
  for (std::uint16_t m = 0; m < 3; ++m) {
    std::byte b[inc::proto::kHeaderBytes];
    inc::proto::Header h;
    h.type = inc::proto::PacketType::join;
    h.job = 1;
    h.member = m;
    inc::proto::encode_header(h, b);
    sw.on_packet(b, members[m], 0);
    h.job = 2;
    if (m < 2) sw.on_packet(b, members[m], 0);
  }
  check_outbox(sw.outbox());
  // The same switch as a lane of a multi-lane daemon: control packets become events that the
  // harness answers the way the daemon does (admit on the lane, then ack or nack).
  inc::sw::SwitchConfig lane_cfg = cfg;
  lane_cfg.external_control = true;
  lane_cfg.lanes = 2;
  lane_cfg.lane = 1;
  inc::sw::SwitchDataPlane lane(lane_cfg);
  lane.admit({1, 3, 4}, 0);
  auto answer_events = [&](inc::sw::Nanos t) {
    auto events = lane.control_events();
    lane.control_events().clear();
    for (const auto& e : events) {
      inc::proto::Reason r = inc::proto::Reason::ok;
      if (e.kind == inc::sw::ControlEvent::Kind::admit) r = lane.admit(e.spec, t, true);
      else if (e.kind == inc::sw::ControlEvent::Kind::release) lane.release(e.spec.job);
      else if (lane.joined_members(e.spec.job) == 0) lane.release(e.spec.job);
      lane.answer_control(e, r);
    }
    check_outbox(lane.outbox());
  };

  // A worker of job 1 in the middle of an allreduce, fed the same bytes "from the switch".
  inc::sw::WorkerConfig wc;
  wc.job = 1;
  wc.member = 0;
  wc.switch_ep = Endpoint::node(50);
  inc::sw::WorkerProtocol worker(wc);
  std::vector<std::int32_t> in(40, 1), out(40);
  worker.start(inc::sw::WorkerOp::allreduce(inc::sw::NumKind::i32, inc::sw::ReduceKind::sum,
                                           std::as_bytes(std::span(in)),
                                           std::as_writable_bytes(std::span(out)), 40, 3),
               0);
  worker.outbox().clear();

  std::uint64_t fed = 0;
  std::vector<std::byte> pkt;
  inc::sw::Nanos now = 0;
  std::size_t i = 0;
  while (i + 3 <= size) {
    const std::uint8_t mode = data[i];
    std::size_t len = std::size_t(data[i + 1]) | std::size_t(data[i + 2]) << 8;
    i += 3;
    len = std::min(len, size - i);
    pkt.assign(reinterpret_cast<const std::byte*>(data + i), reinterpret_cast<const std::byte*>(data + i + len));
    i += len;
    if (pkt.size() == 1) {  // (never a packet) a live resize of job 1 or 2 to 1..8 slots
      const auto b = std::uint8_t(pkt[0]);
      const auto r = sw.resize((b & 0x80) ? 2 : 1, 1 + (b & 7));
      if (r != inc::proto::Reason::ok && r != inc::proto::Reason::unsupported && r != inc::proto::Reason::job_failed &&
          r != inc::proto::Reason::unknown_job)
        invariant_failed("a resize refused for another reason");
      check_outbox(sw.outbox());
      sw.outbox().clear();
      continue;
    }
    if ((mode & 4) && pkt.size() >= inc::proto::kHeaderBytes) {
      inc::proto::store_u32(pkt.data(), inc::proto::kMagic);
      pkt[4] = std::byte(inc::proto::kVersion);
      const std::uint8_t jb = std::uint8_t(pkt[12]);
      const std::uint32_t job = (jb & 2) ? 3 : (jb & 1) ? 1 : 2;
      inc::proto::store_u32(pkt.data() + 12, job);
      if (mode & 8) inc::proto::store_u32(pkt.data() + 16, sw.job_epoch(job));
      const std::uint32_t chunk = inc::proto::load_u32(pkt.data() + 20) % 64;
      inc::proto::store_u32(pkt.data() + 20, chunk);
      inc::proto::store_u16(pkt.data() + 24, std::uint16_t(chunk % (job == 1 ? 4 : 2)));
      inc::proto::store_u16(pkt.data() + 10, std::uint16_t(std::uint8_t(pkt[10]) % 3));
    }
    const Endpoint from = (mode & 3) == 0   ? members[(mode >> 4) % 3]
                          : (mode & 3) == 1 ? parent
                          : (mode & 3) == 2 ? stranger
                                            : controller;
    now += (mode >> 6) * 400;
    sw.on_packet(pkt, from, now);
    ++fed;
    if (mode & 0x20) sw.on_tick(now);
    check_outbox(sw.outbox());
    lane.on_packet(pkt, from, now);
    if (mode & 0x20) lane.on_tick(now);
    answer_events(now);
    worker.on_packet(pkt, (mode & 1) ? wc.switch_ep : stranger, now);
    worker.on_tick(now);
    check_outbox(worker.outbox());
  }
  const auto& c = sw.counters();
  if (c.packets_in != fed + 5) invariant_failed("packets_in does not count every input");
  if (c.drops > c.packets_in) invariant_failed("more drops than packets");
  // Nothing without the key gets into the keyed job: no member joined, nothing aggregated (the
  // controller, holding the control key, may release it and admit an unkeyed job 3 instead).
  for (const auto& j : sw.snapshot().jobs)
    if (j.spec.job == 3 && j.spec.key && (j.counters.aggregations != 0 || j.joined != 0))
      invariant_failed("an unauthenticated packet joined or contributed to the keyed job");
  return 0;
}
