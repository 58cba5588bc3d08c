// inc testbed without root: rates, sizes, the topology file and the flags, with the errors a
// user sees (file:line for files, the flag for flags).
#include <gtest/gtest.h>

#include <string>

#include "inc/types.hpp"
#include "testbed/spec.hpp"

using namespace inc::testbed;

namespace {

// The message of the inc::Error that `fn` throws ("" if none).
template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const inc::Error& e) {
    return e.what();
  }
  return "";
}

bool has(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

Spec from_text(const std::string& text) { return build_spec(parse_spec_text(text, "tb.toml")); }

}  // namespace

TEST(TestbedSpec, Rates) {
  EXPECT_EQ(parse_rate("1gbit"), 1'000'000'000u);
  EXPECT_EQ(parse_rate("500mbit"), 500'000'000u);
  EXPECT_EQ(parse_rate("2.5Gbit"), 2'500'000'000u);
  EXPECT_EQ(parse_rate("100kbit/s"), 100'000u);
  EXPECT_EQ(parse_rate("none"), 0u);
  EXPECT_EQ(parse_rate("0"), 0u);
  EXPECT_TRUE(has(error_of([] { parse_rate("1gbps"); }), "bytes per second"));
  EXPECT_TRUE(has(error_of([] { parse_rate("fast"); }), "not a rate"));
  EXPECT_TRUE(has(error_of([] { parse_rate("1furlong"); }), "unknown rate unit"));
  EXPECT_TRUE(has(error_of([] { parse_rate("1bit"); }), "out of range"));
  EXPECT_EQ(format_rate(1'000'000'000), "1 Gbit/s");
  EXPECT_EQ(format_rate(2'500'000'000), "2.5 Gbit/s");
  EXPECT_EQ(format_rate(0), "unshaped");
}

TEST(TestbedSpec, Amounts) {
  EXPECT_EQ(parse_amount("auto").kind, Amount::Kind::automatic);
  Amount t = parse_amount("4ms");
  EXPECT_EQ(t.kind, Amount::Kind::time);
  EXPECT_DOUBLE_EQ(t.seconds, 0.004);
  EXPECT_DOUBLE_EQ(parse_amount("250us").seconds, 250e-6);
  Amount b = parse_amount("512KiB");
  EXPECT_EQ(b.kind, Amount::Kind::bytes);
  EXPECT_EQ(b.bytes, 512u * 1024);
  EXPECT_EQ(parse_amount("100000").bytes, 100000u);
  EXPECT_TRUE(has(error_of([] { parse_amount("lots"); }), "not a size or a time"));
  EXPECT_TRUE(has(error_of([] { parse_amount("0ms"); }), "out of range"));
}

TEST(TestbedSpec, SlotElementsFitTheMtu) {
  // IP + UDP (28) + switch header (32) + 4 x elements <= MTU, a power of two.
  EXPECT_EQ(slot_elements_for_mtu(9000), 2048);
  EXPECT_EQ(slot_elements_for_mtu(1500), 256);
  EXPECT_EQ(slot_elements_for_mtu(65535), 8192);
  for (int mtu : {576, 1500, 4000, 9000, 65535})
    EXPECT_LE(28 + 32 + 4 * slot_elements_for_mtu(mtu), mtu) << mtu;
}

TEST(TestbedSpec, DefaultsAndDerivedValues) {
  Spec s = build_spec(SpecInput{});
  EXPECT_EQ(s.hosts(), 4);
  EXPECT_EQ(s.ranks_per_host, 1);
  EXPECT_FALSE(s.two_level());
  EXPECT_EQ(s.leaves[0].link_bps, 1'000'000'000u);
  EXPECT_EQ(s.mtu, 9000);
  EXPECT_EQ(s.slot_elements, 2048);
  EXPECT_EQ(s.shaper, Shaper::tbf);
  EXPECT_TRUE(s.with_switch);
  // Auto queue: 4 ms at 1 Gbit/s = 500 KB (more than 32 frames); burst 1 ms = 125 KB.
  EXPECT_EQ(s.queue_bytes(1'000'000'000), 500'000u);
  EXPECT_EQ(s.burst_bytes(1'000'000'000), 125'000u);
  // At 100 Mbit/s the floors apply: 32 frames of 9014 bytes; 64 KiB (a GSO packet) + a frame.
  EXPECT_EQ(s.queue_bytes(100'000'000), 32u * 9014);
  EXPECT_EQ(s.burst_bytes(100'000'000), 65536u + 9014);
  EXPECT_EQ(s.queue_bytes(0), 0u);
}

TEST(TestbedSpec, TwoLevelsFromFlags) {
  SpecInput in;
  in.hosts = 7;
  in.leaves = 2;
  in.link = "1gbit";
  in.oversubscription = 2.0;
  Spec s = build_spec(in);
  ASSERT_EQ(s.leaves.size(), 2u);
  EXPECT_EQ(s.leaves[0].hosts + s.leaves[1].hosts, 7);
  EXPECT_LE(std::abs(s.leaves[0].hosts - s.leaves[1].hosts), 1);
  // uplink = hosts under the leaf x link / oversubscription
  for (const auto& l : s.leaves) EXPECT_EQ(l.uplink_bps, static_cast<std::uint64_t>(l.hosts) * 500'000'000u);
  in.oversubscription.reset();
  in.uplink = "3gbit";
  s = build_spec(in);
  for (const auto& l : s.leaves) EXPECT_EQ(l.uplink_bps, 3'000'000'000u);
}

TEST(TestbedSpec, FlagErrorsNameTheFlag) {
  SpecInput in;
  in.hosts = 100;
  in.where["hosts"] = "--hosts";
  EXPECT_EQ(error_of([&] { build_spec(in); }), "");  // a switch takes up to 1024 members
  in.hosts = 129;
  in.ranks_per_host = 8;
  EXPECT_TRUE(has(error_of([&] { build_spec(in); }), "--hosts: 1032 ranks on one switch: a switch aggregates at most 1024"));
  in.leaves = 4;
  EXPECT_EQ(error_of([&] { build_spec(in); }), "");
  in = SpecInput{};
  in.uplink = "1gbit";
  in.where["uplink"] = "--uplink";
  EXPECT_TRUE(has(error_of([&] { build_spec(in); }), "--uplink: uplinks exist only in a two-level tree"));
  in = SpecInput{};
  in.link = "100mbit";
  in.queue = "100us";  // 1250 bytes: less than a frame
  in.where["queue"] = "--queue";
  EXPECT_TRUE(has(error_of([&] { build_spec(in); }), "--queue: 1250 B at 100 Mbit/s holds less than one frame"));
  in = SpecInput{};
  in.leaves = 5;
  in.hosts = 4;
  EXPECT_TRUE(has(error_of([&] { build_spec(in); }), "every leaf needs a host"));
  in = SpecInput{};
  in.prefix = "Bad-Prefix";
  EXPECT_TRUE(has(error_of([&] { build_spec(in); }), "a-z0-9"));
  // Without a switch, one bridge takes any number of ranks.
  in = SpecInput{};
  in.hosts = 100;
  in.with_switch = false;
  EXPECT_EQ(build_spec(in).world_size(), 100);
}

TEST(TestbedSpec, File) {
  Spec s = from_text(R"(# a two-level tree, 2:1 oversubscribed
ranks_per_host = 2
link = "1gbit"
shaper = "htb"
mtu = 1500
queue = "2ms"
switch_args = ["--batch", "64"]

[[leaf]]
hosts = 3

[[leaf]]
hosts = 2
link = "500mbit"
uplink = "250mbit"
)");
  ASSERT_EQ(s.leaves.size(), 2u);
  EXPECT_EQ(s.leaves[0].hosts, 3);
  EXPECT_EQ(s.leaves[0].link_bps, 1'000'000'000u);
  EXPECT_EQ(s.leaves[0].uplink_bps, 3'000'000'000u);  // default: non-blocking
  EXPECT_EQ(s.leaves[1].link_bps, 500'000'000u);
  EXPECT_EQ(s.leaves[1].uplink_bps, 250'000'000u);
  EXPECT_EQ(s.world_size(), 10);
  EXPECT_EQ(s.shaper, Shaper::htb);
  EXPECT_EQ(s.slot_elements, 256);
  EXPECT_EQ(s.queue_bytes(1'000'000'000), 250'000u);
  EXPECT_EQ(s.switch_args, (std::vector<std::string>{"--batch", "64"}));
}

TEST(TestbedSpec, FileErrorsNameFileAndLine) {
  EXPECT_EQ(error_of([] { from_text("hosts = 4\nlink = \"1gbps\"\n"); }).substr(0, 24),
            "tb.toml:2: key 'link': '");
  EXPECT_TRUE(has(error_of([] { from_text("hosts = 4\n\nhostz = 3\n"); }), "tb.toml:3: key 'hostz': unknown key"));
  EXPECT_TRUE(has(error_of([] { from_text("hosts = [\n"); }), "tb.toml:1: TOML syntax error"));
  EXPECT_TRUE(has(error_of([] { from_text("hosts = 999\n"); }), "tb.toml:1: key 'hosts': 999 is out of range"));
  EXPECT_TRUE(has(error_of([] { from_text("shaper = \"cbq\"\n"); }), "tb.toml:1: key 'shaper': 'cbq' is not one of: tbf, htb"));
  EXPECT_TRUE(has(error_of([] { from_text("[[leaf]]\nhosts = 2\n[[leaf]]\nlink = \"1gbit\"\n"); }),
                  "tb.toml:3: key 'leaf[1].hosts': missing value"));
  EXPECT_TRUE(has(error_of([] { from_text("[[leaf]]\nhosts = 2\nuplink = \"x\"\n"); }),
                  "tb.toml:3: key 'leaf[0].uplink'"));
  EXPECT_TRUE(has(error_of([] { from_text("hosts = 5\n[[leaf]]\nhosts = 2\n[[leaf]]\nhosts = 2\n"); }),
                  "tb.toml:1: key 'hosts': 5 hosts, but the [[leaf]] tables hold 4"));
  EXPECT_TRUE(has(error_of([] { from_text("queue = \"1ms\"\nlink = \"10mbit\"\n"); }),
                  "tb.toml:1: key 'queue': 1250 B at 10 Mbit/s holds less than one frame"));
  EXPECT_TRUE(has(error_of([] { load_spec_file("/nonexistent/tb.toml"); }), "/nonexistent/tb.toml: cannot open file"));
}

TEST(TestbedSpec, FlagsOverrideTheFile) {
  SpecInput file = parse_spec_text("hosts = 8\nleaves = 2\nlink = \"1gbit\"\n", "tb.toml");
  SpecInput flags;
  flags.link = "2gbit";
  flags.where["link"] = "--link";
  file.merge(flags);
  Spec s = build_spec(file);
  EXPECT_EQ(s.hosts(), 8);
  EXPECT_EQ(s.leaves[0].link_bps, 2'000'000'000u);
  // --hosts/--leaves on the command line replace the file's [[leaf]] tables.
  SpecInput tree = parse_spec_text("[[leaf]]\nhosts = 3\n[[leaf]]\nhosts = 3\n", "tb.toml");
  SpecInput h;
  h.hosts = 4;
  tree.merge(h);
  s = build_spec(tree);
  EXPECT_EQ(s.hosts(), 4);
  EXPECT_FALSE(s.two_level());
}

TEST(TestbedSpec, TcpCongestionControl) {
  // Default reno (a loss-based algorithm, as Linux's default cubic), not whatever the machine has.
  EXPECT_EQ(build_spec(SpecInput{}).tcp_cc, "reno");
  EXPECT_EQ(from_text("tcp_cc = \"bbr\"\n").tcp_cc, "bbr");
  EXPECT_EQ(from_text("tcp_cc = \"inherit\"\n").tcp_cc, "");  // leave the namespaces' default
  SpecInput flags;
  flags.tcp_cc = "Cubic!";
  flags.where["tcp_cc"] = "--tcp-cc";
  EXPECT_TRUE(has(error_of([&] { build_spec(flags); }), "--tcp-cc: 'Cubic!' is not a congestion control name"));
  EXPECT_TRUE(has(error_of([] { from_text("tcp_cc = \"\"\n"); }), "tb.toml:1: key 'tcp_cc': '' is not"));
  EXPECT_TRUE(has(error_of([] { from_text("tcp_cc = \"averyveryverylongname\"\n"); }), "is not a congestion control name"));
}
