// The authentication trailer (src/proto/auth.hpp): sealing, every tampered byte refused, the
// replay window, key files.
#include "src/proto/auth.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "src/proto/packet.hpp"

namespace inc::proto::auth {
namespace {

std::vector<std::byte> sealed_data(Sealer& s, std::size_t payload) {
  Header h;
  h.type = PacketType::data;
  h.elem = ElemType::i32;
  h.op = WireOp::sum;
  h.job = 9;
  h.epoch = 3;
  h.count = std::uint16_t(payload / 4);
  std::vector<std::byte> b(kHeaderBytes + payload + kTrailerBytes);
  encode_header(h, b.data());
  for (std::size_t i = 0; i < payload; ++i) b[kHeaderBytes + i] = std::byte(i * 7);
  b.resize(s.seal(b.data(), kHeaderBytes + payload));
  return b;
}

TEST(Auth, SealedPacketsDecodeAndOpenOnce) {
  const Key k = random_key();
  Sealer s(k, random_instance(), 100);
  auto b = sealed_data(s, 64);
  ASSERT_EQ(b.size(), kHeaderBytes + 64 + kTrailerBytes);
  PacketView v;
  ASSERT_EQ(decode(b, v), Reason::ok);
  EXPECT_TRUE(v.sealed);
  EXPECT_EQ(v.payload.size(), 64u);
  std::optional<Mac> cache;
  ReplayWindow w;
  EXPECT_EQ(open(k, cache, w, b), Verdict::ok);
  EXPECT_EQ(open(k, cache, w, b), Verdict::replayed);  // the same datagram again
  std::optional<Mac> other;
  EXPECT_EQ(open(random_key(), other, w, sealed_data(s, 64)), Verdict::bad_tag);  // wrong key
  // The trailer alone is too short for a header.
  std::vector<std::byte> shorty(b.begin(), b.begin() + kHeaderBytes + 8);
  EXPECT_EQ(decode(shorty, v), Reason::too_short);
}

TEST(Auth, EveryTamperedBitIsRefused) {
  const Key k = random_key();
  Sealer s(k, random_instance(), 1);
  const auto good = sealed_data(s, 32);
  for (std::size_t i = 0; i < good.size(); ++i) {
    if (i == 6) continue;  // flags: clearing auth changes the packet's shape (decode refuses)
    for (int bit = 0; bit < 8; ++bit) {
      auto b = good;
      b[i] ^= std::byte(1 << bit);
      std::optional<Mac> cache;
      ReplayWindow w;
      PacketView v;
      if (decode(b, v) != Reason::ok || !v.sealed) continue;
      EXPECT_EQ(open(k, cache, w, b), Verdict::bad_tag) << "byte " << i << " bit " << bit;
    }
  }
}

TEST(Auth, ReplayWindowTakesReorderingOnceAndRefusesOld) {
  ReplayWindow w;
  EXPECT_TRUE(w.accept(5000));
  EXPECT_TRUE(w.accept(4990));   // late but within the window
  EXPECT_FALSE(w.accept(4990));  // once
  EXPECT_TRUE(w.accept(6000));
  EXPECT_FALSE(w.accept(6000));
  EXPECT_TRUE(w.accept(5001));
  EXPECT_FALSE(w.accept(6000 - 1024));  // older than the window
  EXPECT_TRUE(w.accept(6000 - 1023));
  EXPECT_TRUE(w.accept(100000));        // a jump clears the window
  EXPECT_FALSE(w.accept(6000));
  EXPECT_TRUE(w.accept(99999));
  for (std::uint64_t s = 100001; s < 103000; ++s) ASSERT_TRUE(w.accept(s));
  EXPECT_FALSE(w.accept(102000));
  EXPECT_EQ(w.highest(), 102999u);
}

TEST(Auth, InstancesGiveIndependentTags) {
  const Key k = random_key();
  Sealer a(k, random_instance(), 7), b(k, random_instance(), 7);
  auto pa = sealed_data(a, 16), pb = sealed_data(b, 16);
  ASSERT_EQ(pa.size(), pb.size());
  EXPECT_NE(std::vector<std::byte>(pa.end() - 16, pa.end()), std::vector<std::byte>(pb.end() - 16, pb.end()));
  std::optional<Mac> cache;
  ReplayWindow w;
  EXPECT_EQ(open(k, cache, w, pa), Verdict::ok);
  EXPECT_EQ(open(k, cache, w, pb), Verdict::replayed);  // one window per sender slot: same seq
}

// Control packets: many short-lived senders, sequence numbers on the wall clock.
TEST(Auth, ControlReplayRefusesStaleAndReplayedAndForgetsOnlyStaleSenders) {
  const Key k = random_key();
  const std::uint64_t wall = 1'800'000'000'000'000'000ull;
  ControlReplay r;
  auto packet = [&](const Instance& inst, std::uint64_t seq) {
    Sealer s(k, inst, seq);
    Header h;
    h.type = PacketType::release;
    h.elem = ElemType::raw;
    h.count = kReleaseInfoBytes;
    std::vector<std::byte> b(kHeaderBytes + kReleaseInfoBytes + kTrailerBytes);
    encode_header(h, b.data());
    b.resize(s.seal(b.data(), kHeaderBytes + kReleaseInfoBytes));
    return b;
  };
  const Instance a = random_instance();
  const auto p = packet(a, wall + 5);
  EXPECT_EQ(r.open(k, p, wall), Verdict::ok);
  EXPECT_EQ(r.open(k, p, wall + 1), Verdict::replayed);
  EXPECT_EQ(r.open(random_key(), p, wall), Verdict::bad_tag);
  EXPECT_EQ(r.open(k, packet(a, wall - kControlFreshnessNs - 1), wall), Verdict::stale);
  EXPECT_EQ(r.open(k, packet(a, wall + kControlFreshnessNs + 1), wall), Verdict::stale);
  EXPECT_EQ(r.open(k, packet(a, wall + kControlFreshnessNs), wall), Verdict::ok);  // the edge
  // The table of recent senders is bounded; a full one refuses new senders (busy) until its
  // senders are stale, and only then forgets them.
  for (std::size_t i = 1; i < ControlReplay::kMaxSenders; ++i)
    ASSERT_EQ(r.open(k, packet(random_instance(), wall + 10 + i), wall), Verdict::ok);
  EXPECT_EQ(r.senders(), ControlReplay::kMaxSenders);
  EXPECT_EQ(r.open(k, packet(random_instance(), wall + 9), wall), Verdict::busy);
  const std::uint64_t later = wall + 2 * kControlFreshnessNs + 100000;
  EXPECT_EQ(r.open(k, packet(random_instance(), later), later), Verdict::ok);
  EXPECT_EQ(r.senders(), 1u);
  EXPECT_EQ(r.open(k, p, later), Verdict::stale);  // forgotten, and still refused
}

TEST(Auth, KeyFiles) {
  std::string err;
  const std::string k1(64, 'a'), k2 = "00112233445566778899aabbccddeeff00112233445566778899AABBCCDDEEFF";
  auto ok = parse_key_file("# keys\n7 " + k1 + "\n\n  8 " + k2 + "  # second\n", "f", err);
  ASSERT_TRUE(ok) << err;
  ASSERT_EQ(ok->size(), 2u);
  EXPECT_EQ((*ok)[1].job, 8u);
  EXPECT_EQ(key_hex((*ok)[1].key), "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff");
  struct Bad {
    std::string text, msg;
  } bad[] = {{"7\n", "f:1: want 'JOB KEY'"},
             {"7 " + k1 + " x\n", "f:1: want 'JOB KEY'"},
             {"\n0 " + k1, "f:2: '0' is not a job id"},
             {"7 abc", "f:1: the key of job 7 is not 64 hex digits"},
             {"7 " + std::string(63, 'a') + "g", "f:1: the key of job 7 is not 64 hex digits"},
             {"7 " + k1 + "\n7 " + k2, "f:2: job 7 has two keys"}};
  for (const auto& b : bad) {
    EXPECT_FALSE(parse_key_file(b.text, "f", err)) << b.text;
    EXPECT_EQ(err.rfind(b.msg, 0), 0u) << err;
  }
  char path[] = "/tmp/inc_keyXXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string text = "5 " + k1 + "\n";
  ASSERT_EQ(write(fd, text.data(), text.size()), ssize_t(text.size()));
  close(fd);
  ASSERT_EQ(chmod(path, 0600), 0);
  auto loaded = load_key_file(path, err);
  ASSERT_TRUE(loaded) << err;
  EXPECT_EQ(loaded->at(0).job, 5u);
  ASSERT_EQ(chmod(path, 0644), 0);
  EXPECT_FALSE(load_key_file(path, err));
  EXPECT_NE(err.find("readable by group or others"), std::string::npos) << err;
  unlink(path);
  EXPECT_FALSE(load_key_file(path, err));
}

}  // namespace
}  // namespace inc::proto::auth
