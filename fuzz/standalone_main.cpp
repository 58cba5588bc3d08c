// A plain driver for the libFuzzer targets, so gcc builds and CI exercise them without clang:
//   switch_packet_fuzz_driver [--random N] [--seed S] [--write-seeds DIR] [FILE|DIR ...]
// Runs every file given (a corpus), then N generated inputs: random bytes and sequences of
// valid packets with random mutations. Prints the seed; any invariant failure aborts.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "src/proto/auth.hpp"
#include "src/proto/packet.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

void record(std::vector<std::uint8_t>& in, std::uint8_t mode, const std::vector<std::byte>& p) {
  in.push_back(mode);
  in.push_back(std::uint8_t(p.size()));
  in.push_back(std::uint8_t(p.size() >> 8));
  for (auto b : p) in.push_back(std::uint8_t(b));
}

// A plausible packet of any type, with a valid header and payload shape.
std::vector<std::byte> valid_packet(std::mt19937_64& rng) {
  using namespace inc::proto;
  Header h;
  h.type = PacketType(1 + rng() % kMaxPacketType);
  h.job = 1 + std::uint32_t(rng() % 2);
  h.member = std::uint16_t(rng() % 3);
  h.chunk = std::uint32_t(rng() % 24);
  h.slot = std::uint16_t(h.chunk % (h.job == 1 ? 4 : 2));
  std::size_t payload = 0;
  switch (h.type) {
    case PacketType::data:
    case PacketType::result: {
      // Every element type; the ones with an accumulator type also with sum_widen, the
      // accumulator types (f16w, bf16w, i8w, u8w, e4m3w, e5m2w, i4w, mx*w) with sum_widen only,
      // MX blocks with sum or sum_widen.
      h.elem = ElemType(rng() % (kMaxElemType + 1));
      h.op = h.elem == ElemType::none                                  ? WireOp::none
             : h.elem == ElemType::raw                                 ? WireOp::copy
             : narrow_of(h.elem) != h.elem                             ? WireOp::sum_widen
             : widened(h.elem) != ElemType::none && rng() % 2 == 0     ? WireOp::sum_widen
             : is_mx(h.elem)                                           ? WireOp::sum
                                                                       : WireOp(1 + rng() % 3);
      h.count = h.elem == ElemType::none ? 0 : std::uint16_t(1 + rng() % 10);
      h.flags = std::uint8_t(rng() % 8) & (h.type == PacketType::data ? 7 : 4);
      payload = h.count * elem_size(h.elem);
      break;
    }
    case PacketType::join_ack: h.elem = ElemType::raw; h.count = kJoinInfoBytes; payload = kJoinInfoBytes; break;
    case PacketType::pending: h.elem = ElemType::raw; h.count = kPendingBytes; payload = kPendingBytes; break;
    case PacketType::admit: h.elem = ElemType::raw; h.count = kAdmitInfoBytes; payload = kAdmitInfoBytes; break;
    case PacketType::release: h.elem = ElemType::raw; h.count = kReleaseInfoBytes; payload = kReleaseInfoBytes; break;
    case PacketType::nack: h.reason = Reason(1 + rng() % (kNumReasons - 1)); h.aux = std::uint32_t(rng() % 16); break;
    default: break;
  }
  std::vector<std::byte> p(kHeaderBytes + payload);
  encode_header(h, p.data());
  for (std::size_t i = kHeaderBytes; i < p.size(); ++i) p[i] = std::byte(rng());
  if (h.type == PacketType::admit || h.type == PacketType::release)
    if (rng() % 2) store_u64(p.data() + kHeaderBytes, 0);  // the reserved fields right, sometimes
  if (h.type == PacketType::join_ack && rng() % 2) {  // a well-formed JoinInfo (v2: lanes)
    const auto lanes = std::uint16_t(1 + rng() % 4);
    write_join_info({std::uint32_t(1 + rng() % 4), std::uint32_t(1 + rng() % 16), 3, cap::all,
                     lanes, std::uint16_t(rng() % lanes), 0},
                    p.data() + kHeaderBytes);
  }
  if (h.type == PacketType::admit) {
    store_u32(p.data() + kHeaderBytes + 8, std::uint32_t(rng() % 20));
    store_u16(p.data() + kHeaderBytes + 12, std::uint16_t(rng() % 70));
    store_u16(p.data() + kHeaderBytes + 14, std::uint16_t(rng() % 2 ? 0xFFFF : rng() % 3));
    if (rng() % 2) store_u64(p.data() + kHeaderBytes + 16, 0);
  }
  // Control packets sealed under the harness's control key (all bytes 0x5E), sometimes, with a
  // sequence number near the harness's clock (0 at the start): fresh, or replayed later.
  if ((h.type == PacketType::admit || h.type == PacketType::release) && rng() % 2) {
    auth::Key key;
    key.fill(0x5E);
    auth::Instance inst{};
    inst[0] = std::uint8_t(rng() % 4);
    p.resize(p.size() + auth::kTrailerBytes);
    auth::seal(auth::Mac(key, inst), 1 + rng() % 1000000, p.data(), p.size() - auth::kTrailerBytes);
  }
  return p;
}

std::vector<std::uint8_t> generate(std::mt19937_64& rng) {
  std::vector<std::uint8_t> in;
  if (rng() % 8 == 0) {  // pure noise
    in.resize(rng() % 512);
    for (auto& b : in) b = std::uint8_t(rng());
    return in;
  }
  const int n = 1 + int(rng() % 60);
  for (int k = 0; k < n; ++k) {
    auto p = valid_packet(rng);
    if (rng() % 4 == 0 && !p.empty()) {  // mutate a few bytes
      for (int m = 0; m < 1 + int(rng() % 3); ++m) p[rng() % p.size()] = std::byte(rng());
    }
    if (rng() % 16 == 0) p.resize(rng() % (p.size() + 8));
    std::uint8_t mode = std::uint8_t(rng());
    if (rng() % 2) mode = std::uint8_t((mode & ~3) | 0 | 4 | 8);  // member, repaired, right epoch
    record(in, mode, p);
  }
  return in;
}

void run_file(const std::filesystem::path& p, std::size_t& count) {
  std::ifstream f(p, std::ios::binary);
  std::vector<std::uint8_t> d((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(d.data(), d.size());
  ++count;
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t seed = 1, random_runs = 0;
  std::string write_seeds;
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--random" && i + 1 < argc) random_runs = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--seed" && i + 1 < argc) seed = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--write-seeds" && i + 1 < argc) write_seeds = argv[++i];
    else paths.push_back(a);
  }
  std::mt19937_64 rng(seed);
  if (!write_seeds.empty()) {
    std::filesystem::create_directories(write_seeds);
    for (int k = 0; k < 64; ++k) {
      auto in = generate(rng);
      std::ofstream(write_seeds + "/seed-" + std::to_string(k), std::ios::binary)
          .write(reinterpret_cast<const char*>(in.data()), std::streamsize(in.size()));
    }
    std::printf("wrote 64 seed inputs to %s\n", write_seeds.c_str());
    return 0;
  }
  std::size_t files = 0;
  for (const auto& p : paths) {
    if (std::filesystem::is_directory(p)) {
      for (const auto& e : std::filesystem::directory_iterator(p))
        if (e.is_regular_file()) run_file(e.path(), files);
    } else {
      run_file(p, files);
    }
  }
  std::printf("fuzz driver: seed %llu, %zu corpus inputs, %llu generated inputs\n",
              (unsigned long long)seed, files, (unsigned long long)random_runs);
  std::fflush(stdout);
  for (std::uint64_t k = 0; k < random_runs; ++k) {
    auto in = generate(rng);
    LLVMFuzzerTestOneInput(in.data(), in.size());
  }
  std::printf("%llu passed, 0 failed\n", (unsigned long long)(files + random_runs));
  return 0;
}
