#include "testbed/spec.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "inc/types.hpp"
#include "sim/config.hpp"
#include "src/proto/packet.hpp"

namespace inc::testbed {

namespace {

[[noreturn]] void fail(const std::string& where, const std::string& what) {
  throw Error(Error::Kind::config, where.empty() ? what : fmt::format("{}: {}", where, what));
}

std::string lower(std::string_view s) {
  std::string out;
  for (char c : s) out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  return out;
}

// Splits "2.5gbit" into 2.5 and "gbit"; false if there is no leading number.
bool split_number(std::string_view s, double& v, std::string& unit) {
  std::size_t i = 0;
  while (i < s.size() && (std::isdigit(static_cast<unsigned char>(s[i])) || s[i] == '.')) ++i;
  if (i == 0) return false;
  try {
    std::size_t used = 0;
    v = std::stod(std::string(s.substr(0, i)), &used);
    if (used != i) return false;
  } catch (const std::exception&) {
    return false;
  }
  unit = lower(s.substr(i));
  while (!unit.empty() && unit.front() == ' ') unit.erase(unit.begin());
  return true;
}

}  // namespace

const char* name(Shaper s) { return s == Shaper::tbf ? "tbf" : "htb"; }

std::uint64_t parse_rate(std::string_view s) {
  const std::string l = lower(s);
  if (l == "none" || l == "unshaped" || l == "0") return 0;
  double v = 0;
  std::string unit;
  if (!split_number(s, v, unit))
    fail("", fmt::format("'{}' is not a rate (e.g. 1gbit, 500mbit, none)", s));
  if (unit.size() > 2 && unit.compare(unit.size() - 2, 2, "/s") == 0) unit.resize(unit.size() - 2);
  double mult = 0;
  if (unit == "bit") mult = 1;
  else if (unit == "kbit") mult = 1e3;
  else if (unit == "mbit") mult = 1e6;
  else if (unit == "gbit") mult = 1e9;
  else if (unit == "tbit") mult = 1e12;
  else if (unit.size() >= 3 && unit.compare(unit.size() - 3, 3, "bps") == 0)
    fail("", fmt::format("'{}': write rates in bits (kbit, mbit, gbit); in tc 'bps' means bytes "
                         "per second, a common source of 8x mistakes",
                         s));
  else
    fail("", fmt::format("'{}': unknown rate unit '{}' (bit, kbit, mbit, gbit, tbit)", s, unit));
  const double bps = v * mult;
  if (!(bps >= 8e3) || bps > 4e11)
    fail("", fmt::format("'{}' is out of range (8kbit .. 400gbit, or none)", s));
  return static_cast<std::uint64_t>(std::llround(bps));
}

std::string format_rate(std::uint64_t bps) {
  if (bps == 0) return "unshaped";
  const char* units[] = {"bit/s", "kbit/s", "Mbit/s", "Gbit/s", "Tbit/s"};
  double v = static_cast<double>(bps);
  int u = 0;
  while (v >= 1000 && u < 4) {
    v /= 1000;
    ++u;
  }
  return fmt::format("{:g} {}", std::round(v * 1000) / 1000, units[u]);
}

Amount parse_amount(std::string_view s) {
  const std::string l = lower(s);
  Amount a;
  if (l == "auto") return a;
  double v = 0;
  std::string unit;
  if (!split_number(s, v, unit))
    fail("", fmt::format("'{}' is not a size or a time (e.g. auto, 4ms, 512KiB)", s));
  double t = -1;
  if (unit == "s") t = v;
  else if (unit == "ms") t = v * 1e-3;
  else if (unit == "us" || unit == "\xc2\xb5s") t = v * 1e-6;
  if (t >= 0) {
    if (!(t > 0) || t > 10) fail("", fmt::format("'{}' is out of range (0 < time <= 10s)", s));
    a.kind = Amount::Kind::time;
    a.seconds = t;
    return a;
  }
  try {
    a.bytes = sim::parse_size(s);
  } catch (const std::invalid_argument& e) {
    fail("", fmt::format("{} (or a time: 4ms, 250us)", e.what()));
  }
  if (a.bytes == 0 || a.bytes > (1ull << 30))
    fail("", fmt::format("'{}' is out of range (1 B .. 1 GiB)", s));
  a.kind = Amount::Kind::bytes;
  return a;
}

std::string format_bytes(std::uint64_t b) {
  if (b < 10 * 1024) return fmt::format("{} B", b);
  if (b < 10 * 1024 * 1024) return fmt::format("{:.0f} KiB", static_cast<double>(b) / 1024);
  return fmt::format("{:.1f} MiB", static_cast<double>(b) / (1024.0 * 1024));
}

int Spec::hosts() const {
  return std::accumulate(leaves.begin(), leaves.end(), 0,
                         [](int n, const LeafSpec& l) { return n + l.hosts; });
}

std::uint64_t Spec::queue_bytes(std::uint64_t bps) const {
  if (bps == 0) return 0;
  switch (queue.kind) {
    case Amount::Kind::bytes: return queue.bytes;
    case Amount::Kind::time: return static_cast<std::uint64_t>(static_cast<double>(bps) / 8 * queue.seconds);
    case Amount::Kind::automatic: break;
  }
  return std::max<std::uint64_t>(
      static_cast<std::uint64_t>(static_cast<double>(bps) / 8 * kAutoQueueSeconds),
      std::uint64_t{kAutoQueueFrames} * frame_bytes());
}

std::uint64_t Spec::burst_bytes(std::uint64_t bps) const {
  if (bps == 0) return 0;
  switch (burst.kind) {
    case Amount::Kind::bytes: return burst.bytes;
    case Amount::Kind::time: return static_cast<std::uint64_t>(static_cast<double>(bps) / 8 * burst.seconds);
    case Amount::Kind::automatic: break;
  }
  return std::max<std::uint64_t>(
      static_cast<std::uint64_t>(static_cast<double>(bps) / 8 * kAutoBurstSeconds),
      std::uint64_t{kMaxGsoBytes} + frame_bytes());
}

int slot_elements_for_mtu(int mtu) {
  const int room = (mtu - kUdpIpHeaderBytes - kSwitchHeaderBytes) / 4;
  int e = 1;
  while (e * 2 <= room && e * 2 <= 16358) e *= 2;
  return room >= 1 ? e : 0;
}

void SpecInput::merge(const SpecInput& o) {
  auto take = [](auto& dst, const auto& src) {
    if (src) dst = src;
  };
  take(hosts, o.hosts);
  take(ranks_per_host, o.ranks_per_host);
  take(leaves, o.leaves);
  take(mtu, o.mtu);
  take(switch_port, o.switch_port);
  take(metrics_port, o.metrics_port);
  take(slot_elements, o.slot_elements);
  take(job_slots, o.job_slots);
  take(link, o.link);
  take(uplink, o.uplink);
  take(shaper, o.shaper);
  take(queue, o.queue);
  take(burst, o.burst);
  take(prefix, o.prefix);
  take(tcp_cc, o.tcp_cc);
  take(oversubscription, o.oversubscription);
  take(with_switch, o.with_switch);
  take(auth, o.auth);
  take(multicast, o.multicast);
  take(controller, o.controller);
  take(switch_args, o.switch_args);
  if (!o.leaf_tables.empty()) leaf_tables = o.leaf_tables;
  for (const auto& [k, v] : o.where) where[k] = v;
  // Flags that redefine the tree replace the file's [[leaf]] tables.
  if ((o.hosts || o.leaves) && o.leaf_tables.empty()) leaf_tables.clear();
}

SpecInput parse_spec_text(std::string_view text, const std::string& file) {
  toml::table root = sim::parse_toml_text(text, file);
  sim::TableReader r(root, file, "");
  SpecInput in;
  auto at = [&](const sim::TableReader& t, std::string_view key) {
    return fmt::format("{}:{}: key '{}'", file, t.line_of(key), t.qualified(key));
  };
  auto int_key = [&](sim::TableReader& t, std::string_view key, std::optional<int>& out, int lo,
                     int hi) {
    if (!t.has(key)) return;
    out = static_cast<int>(t.get_int(key, 0, lo, hi));
    in.where[std::string(key)] = at(t, key);
  };
  // Rates, sizes and times (top level): strings ("1gbit", "4ms"), checked here where the line
  // is known; a bare integer is a number of bytes (queue, burst).
  auto text_key = [&](std::string_view key, std::optional<std::string>& out, bool rate) {
    if (!r.has(key)) return;
    const toml::node* n = root.get(key);
    if (n && n->is_integer() && !rate)
      out = std::to_string(r.get_int(key, 0, 1, INT64_MAX));
    else
      out = r.get_string(key, "");
    try {
      if (rate) parse_rate(*out);
      else parse_amount(*out);
    } catch (const Error& e) {
      r.fail(key, e.what());
    }
    in.where[std::string(key)] = at(r, key);
  };
  int_key(r, "hosts", in.hosts, 1, kMaxHosts);
  int_key(r, "ranks_per_host", in.ranks_per_host, 1, kMaxRanksPerHost);
  int_key(r, "leaves", in.leaves, 1, kMaxLeaves);
  int_key(r, "mtu", in.mtu, 576, 65535);
  int_key(r, "switch_port", in.switch_port, 1, 65535);
  int_key(r, "metrics_port", in.metrics_port, 0, 65535);
  int_key(r, "slot_elements", in.slot_elements, 1, 16358);
  int_key(r, "job_slots", in.job_slots, 1, 65535);
  text_key("link", in.link, true);
  text_key("uplink", in.uplink, true);
  text_key("queue", in.queue, false);
  text_key("burst", in.burst, false);
  if (r.has("shaper")) {
    in.shaper = r.get_string("shaper", "", {"tbf", "htb"});
    in.where["shaper"] = at(r, "shaper");
  }
  if (r.has("prefix")) {
    in.prefix = r.get_string("prefix", "");
    in.where["prefix"] = at(r, "prefix");
  }
  if (r.has("tcp_cc")) {
    in.tcp_cc = r.get_string("tcp_cc", "");
    in.where["tcp_cc"] = at(r, "tcp_cc");
  }
  if (r.has("oversubscription")) {
    in.oversubscription = r.get_double("oversubscription", 1, 0.01, 1000);
    in.where["oversubscription"] = at(r, "oversubscription");
  }
  if (r.has("switch")) {
    in.with_switch = r.get_bool("switch", true);
    in.where["switch"] = at(r, "switch");
  }
  if (r.has("auth")) {
    in.auth = r.get_bool("auth", true);
    in.where["auth"] = at(r, "auth");
  }
  if (r.has("multicast")) {
    in.multicast = r.get_bool("multicast", false);
    in.where["multicast"] = at(r, "multicast");
  }
  if (r.has("controller")) {
    in.controller = r.get_bool("controller", false);
    in.where["controller"] = at(r, "controller");
  }
  if (r.has("switch_args")) {
    in.switch_args = r.get_string_list("switch_args");
    in.where["switch_args"] = at(r, "switch_args");
  }
  int k = 0;
  for (const toml::table* t : r.sub_array("leaf")) {
    sim::TableReader lr(*t, file, fmt::format("leaf[{}]", k));
    SpecInput::Leaf leaf;
    leaf.where = fmt::format("{}:{}: [[leaf]] #{}", file, t->source().begin.line, k + 1);
    if (!lr.has("hosts")) lr.fail("hosts", "missing value (required in every [[leaf]])");
    leaf.hosts = static_cast<int>(lr.get_int("hosts", 0, 1, kMaxHosts));
    if (lr.has("link")) {
      leaf.link = lr.get_string("link", "");
      leaf.where = at(lr, "link");
    }
    if (lr.has("uplink")) leaf.uplink = lr.get_string("uplink", "");
    // Rates are checked here, where the line is known.
    for (const char* key : {"link", "uplink"}) {
      const auto& v = std::string_view(key) == "link" ? leaf.link : leaf.uplink;
      if (!v) continue;
      try {
        parse_rate(*v);
      } catch (const Error& e) {
        lr.fail(key, e.what());
      }
    }
    lr.finish();
    in.leaf_tables.push_back(std::move(leaf));
    ++k;
  }
  r.finish();
  return in;
}

SpecInput load_spec_file(const std::string& path) {
  return parse_spec_text(sim::read_text_file(path), path);
}

Spec build_spec(const SpecInput& in) {
  Spec s;
  auto where = [&](const std::string& key, const std::string& flag) {
    auto it = in.where.find(key);
    return it != in.where.end() ? it->second : flag;
  };
  // Parses a value, prefixing errors with its origin.
  auto rate = [&](const std::string& v, const std::string& origin) {
    try {
      return parse_rate(v);
    } catch (const Error& e) {
      fail(origin, e.what());
    }
  };
  auto amount = [&](const std::optional<std::string>& v, const std::string& key) {
    if (!v) return Amount{};
    try {
      return parse_amount(*v);
    } catch (const Error& e) {
      fail(where(key, "--" + key), e.what());
    }
  };
  s.ranks_per_host = in.ranks_per_host.value_or(1);
  s.mtu = in.mtu.value_or(9000);
  s.switch_port = in.switch_port.value_or(7710);
  s.metrics_port = in.metrics_port.value_or(9100);
  s.job_slots = in.job_slots.value_or(32);
  s.with_switch = in.with_switch.value_or(true);
  s.auth = in.auth.value_or(true);
  s.controller = in.controller.value_or(false);
  // Multicast results are the default wherever the network can replicate them correctly: with a
  // switch (with the controller, the switches whose members are hosts give each job a group).
  s.multicast = in.multicast.value_or(s.with_switch);
  if (in.switch_args) s.switch_args = *in.switch_args;
  if (in.shaper) {
    if (*in.shaper == "tbf") s.shaper = Shaper::tbf;
    else if (*in.shaper == "htb") s.shaper = Shaper::htb;
    else fail(where("shaper", "--shaper"), fmt::format("'{}' is not tbf or htb", *in.shaper));
  }
  if (in.prefix) {
    const std::string& p = *in.prefix;
    bool ok = !p.empty() && p.size() <= 12 && std::islower(static_cast<unsigned char>(p[0]));
    for (char c : p) ok = ok && (std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)));
    if (!ok) fail(where("prefix", "--prefix"), fmt::format("'{}' must be 1-12 characters a-z0-9, starting with a letter", p));
    s.prefix = p;
  }
  if (in.tcp_cc) {  // a kernel congestion-control name (TCP_CA_NAME_MAX 16 with the NUL), or inherit
    const std::string& c = *in.tcp_cc;
    bool ok = !c.empty() && c.size() <= 15;
    for (char ch : c) ok = ok && (std::islower(static_cast<unsigned char>(ch)) || std::isdigit(static_cast<unsigned char>(ch)) || ch == '_');
    if (!ok) fail(where("tcp_cc", "--tcp-cc"), fmt::format("'{}' is not a congestion control name (reno, cubic, bbr, ...) or inherit", c));
    s.tcp_cc = c == "inherit" ? std::string() : c;
  }
  s.queue = amount(in.queue, "queue");
  s.burst = amount(in.burst, "burst");
  if (s.ranks_per_host < 1 || s.ranks_per_host > kMaxRanksPerHost)
    fail(where("ranks_per_host", "--ranks-per-host"), fmt::format("{} is out of range (1..{})", s.ranks_per_host, kMaxRanksPerHost));
  if (s.mtu < 576 || s.mtu > 65535)
    fail(where("mtu", "--mtu"), fmt::format("{} is out of range (576..65535)", s.mtu));
  if (s.job_slots < 1 || s.job_slots > 65535)
    fail(where("job_slots", "--job-slots"), fmt::format("{} is out of range (1..65535)", s.job_slots));
  if (s.switch_port < 1 || s.switch_port > 65535)
    fail(where("switch_port", "--switch-port"), fmt::format("{} is out of range (1..65535)", s.switch_port));
  if (s.metrics_port < 0 || s.metrics_port > 65535)
    fail(where("metrics_port", "--metrics-port"), fmt::format("{} is out of range (0..65535, 0 = none)", s.metrics_port));

  const std::string link_origin = where("link", "--link");
  const std::uint64_t link = rate(in.link.value_or(std::string(kDefaultLink)), link_origin);
  // The tree: [[leaf]] tables, or --hosts split evenly over --leaves.
  std::vector<int> per_leaf;
  std::vector<std::optional<std::string>> leaf_link, leaf_uplink;
  std::vector<std::string> leaf_where;
  if (!in.leaf_tables.empty()) {
    int total = 0;
    for (const auto& l : in.leaf_tables) {
      per_leaf.push_back(*l.hosts);
      total += *l.hosts;
      leaf_link.push_back(l.link);
      leaf_uplink.push_back(l.uplink);
      leaf_where.push_back(l.where);
    }
    if (in.hosts && *in.hosts != total)
      fail(where("hosts", "--hosts"), fmt::format("{} hosts, but the [[leaf]] tables hold {}", *in.hosts, total));
    if (in.leaves && *in.leaves != static_cast<int>(per_leaf.size()))
      fail(where("leaves", "--leaves"), fmt::format("{} leaves, but there are {} [[leaf]] tables", *in.leaves, per_leaf.size()));
  } else {
    const int hosts = in.hosts.value_or(4);
    const int leaves = in.leaves.value_or(1);
    if (hosts < 1 || hosts > kMaxHosts)
      fail(where("hosts", "--hosts"), fmt::format("{} is out of range (1..{})", hosts, kMaxHosts));
    if (leaves < 1 || leaves > kMaxLeaves)
      fail(where("leaves", "--leaves"), fmt::format("{} is out of range (1..{})", leaves, kMaxLeaves));
    if (leaves > hosts)
      fail(where("leaves", "--leaves"), fmt::format("{} leaves for {} hosts: every leaf needs a host", leaves, hosts));
    for (int k = 0; k < leaves; ++k) per_leaf.push_back(hosts * (k + 1) / leaves - hosts * k / leaves);
    leaf_link.assign(per_leaf.size(), std::nullopt);
    leaf_uplink.assign(per_leaf.size(), std::nullopt);
    leaf_where.assign(per_leaf.size(), "");
  }
  if (std::accumulate(per_leaf.begin(), per_leaf.end(), 0) > kMaxHosts)
    fail(where("hosts", "--hosts"), fmt::format("more than {} hosts", kMaxHosts));
  const bool two = per_leaf.size() > 1;
  if (!two && (in.uplink || in.oversubscription))
    fail(in.uplink ? where("uplink", "--uplink") : where("oversubscription", "--oversubscription"),
         "uplinks exist only in a two-level tree (--leaves 2 or more)");
  if (in.uplink && in.oversubscription)
    fail(where("oversubscription", "--oversubscription"), "give either the uplink rate or the oversubscription, not both");
  const std::uint64_t uplink = in.uplink ? rate(*in.uplink, where("uplink", "--uplink")) : 0;
  const double over = in.oversubscription.value_or(1.0);
  for (std::size_t k = 0; k < per_leaf.size(); ++k) {
    LeafSpec l;
    l.hosts = per_leaf[k];
    l.link_bps = leaf_link[k] ? rate(*leaf_link[k], leaf_where[k]) : link;
    if (leaf_uplink[k]) l.uplink_bps = rate(*leaf_uplink[k], leaf_where[k]);
    else if (in.uplink) l.uplink_bps = uplink;
    else if (two) l.uplink_bps = static_cast<std::uint64_t>(static_cast<double>(l.link_bps) * l.hosts / over);
    if (two && l.uplink_bps != 0 && l.uplink_bps < 8000)
      fail(where("oversubscription", "--oversubscription"), "the resulting uplink rate is below 8kbit");
    s.leaves.push_back(l);
  }

  // Switch fan-in: one switch aggregates at most proto::kMaxMembers (ranks, or leaf switches).
  if (s.with_switch) {
    constexpr int kFanIn = int(proto::kMaxMembers);
    if (!two && s.world_size() > kFanIn)
      fail(where("hosts", "--hosts"),
           fmt::format("{} ranks on one switch: a switch aggregates at most {} members; use a "
                       "two-level tree (--leaves)", s.world_size(), kFanIn));
    for (std::size_t k = 0; two && k < s.leaves.size(); ++k)
      if (s.leaves[k].hosts * s.ranks_per_host > kFanIn)
        fail(where("hosts", "--hosts"),
             fmt::format("leaf {} has {} ranks: a switch aggregates at most {} members; use more leaves",
                         k, s.leaves[k].hosts * s.ranks_per_host, kFanIn));
  }
  // Multicast: each leaf's group is flooded by its bridge to its hosts (all hold members); in a
  // two-level tree a filter on the leaf's uplink keeps the group off the uplink (plan.cpp).
  if (s.multicast && !s.with_switch)
    fail(where("multicast", "--multicast"), "multicast results need a switch (not with --no-switch)");
  if (s.controller && (!s.with_switch || !s.auth))
    fail(where("controller", "--controller"),
         "the controller builds switch trees and keys every job: not with --no-switch or --no-auth");
  // Slot size: from the MTU, so that one chunk is one unfragmented datagram.
  if (in.slot_elements) {
    s.slot_elements = *in.slot_elements;
    s.slot_elements_given = true;
    if (s.slot_elements < 1 || s.slot_elements > 16358)
      fail(where("slot_elements", "--slot-elements"), fmt::format("{} is out of range (1..16358)", s.slot_elements));
  } else {
    s.slot_elements = slot_elements_for_mtu(s.mtu);
  }
  // A queue or bucket smaller than one frame would drop every full-size packet.
  for (const auto& l : s.leaves)
    for (std::uint64_t bps : {l.link_bps, l.uplink_bps}) {
      if (bps == 0) continue;
      if (s.queue_bytes(bps) < s.frame_bytes())
        fail(where("queue", "--queue"),
             fmt::format("{} at {} holds less than one frame ({} B at MTU {})",
                         format_bytes(s.queue_bytes(bps)), format_rate(bps), s.frame_bytes(), s.mtu));
      if (s.burst_bytes(bps) < s.frame_bytes())
        fail(where("burst", "--burst"),
             fmt::format("{} at {} is less than one frame ({} B at MTU {}): full-size packets "
                         "could never pass", format_bytes(s.burst_bytes(bps)), format_rate(bps),
                         s.frame_bytes(), s.mtu));
    }
  return s;
}

}  // namespace inc::testbed
