#include "testbed/counters.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "inc/types.hpp"
#include "testbed/system.hpp"

namespace inc::testbed {

namespace {

using json = nlohmann::json;

std::uint64_t u64(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_unsigned() ? it->get<std::uint64_t>()
         : it != j.end() && it->is_number_integer() && it->get<long long>() >= 0
             ? static_cast<std::uint64_t>(it->get<long long>())
             : 0;
}

json parse_array(const std::string& text, const char* what) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_array())
    throw Error(Error::Kind::internal, fmt::format("cannot parse the JSON output of {}", what));
  return j;
}

}  // namespace

std::map<std::string, QdiscStats> parse_tc_json(const std::string& text) {
  std::map<std::string, QdiscStats> out;
  for (const json& q : parse_array(text, "tc -s -j qdisc show")) {
    if (!q.is_object() || !q.contains("dev") || !q["dev"].is_string()) continue;
    QdiscStats& s = out[q["dev"].get<std::string>()];
    if (q.value("kind", "") == "clsact") s.filtered = u64(q, "drops");
    if (!q.value("root", false)) continue;
    s.kind = q.value("kind", "");
    s.bytes = u64(q, "bytes");
    s.packets = u64(q, "packets");
    s.drops = u64(q, "drops");
    s.overlimits = u64(q, "overlimits");
  }
  return out;
}

std::map<std::string, LinkStats> parse_link_json(const std::string& text) {
  std::map<std::string, LinkStats> out;
  for (const json& l : parse_array(text, "ip -s -j link show")) {
    if (!l.is_object() || !l.contains("ifname") || !l.contains("stats64")) continue;
    const json& st = l["stats64"];
    LinkStats s;
    if (st.contains("tx")) {
      s.tx_bytes = u64(st["tx"], "bytes");
      s.tx_packets = u64(st["tx"], "packets");
      s.tx_dropped = u64(st["tx"], "dropped");
    }
    if (st.contains("rx")) s.rx_dropped = u64(st["rx"], "dropped");
    out[l["ifname"].get<std::string>()] = s;
  }
  return out;
}

std::vector<DirectionCounters> collect_counters(const Plan& p, std::vector<std::string>& errors) {
  std::map<std::string, std::map<std::string, QdiscStats>> qd;
  std::map<std::string, std::map<std::string, LinkStats>> ln;
  for (const auto& ns : p.namespaces) {
    try {
      qd[ns] = parse_tc_json(check_command({"tc", "-n", ns, "-s", "-j", "qdisc", "show"}));
      ln[ns] = parse_link_json(check_command({"ip", "-n", ns, "-s", "-j", "link", "show"}));
    } catch (const Error& e) {
      errors.push_back(e.what());
    }
  }
  std::vector<DirectionCounters> out;
  for (const auto& l : p.links)
    for (const Direction* d : {&l.up, &l.down}) {
      DirectionCounters c;
      c.link = l.name;
      c.dir = d == &l.up ? "up" : "down";
      c.bps = d->bps;
      const LinkStats tx = ln[d->ns][d->dev];
      const auto q = qd[d->ns].find(d->dev);
      if (q != qd[d->ns].end()) c.filtered = q->second.filtered;
      if (d->bps != 0 && q != qd[d->ns].end() && !q->second.kind.empty()) {
        c.bytes = q->second.bytes;
        c.packets = q->second.packets;
        c.queue_drops = q->second.drops;
        c.overlimits = q->second.overlimits;
      } else {
        c.bytes = tx.tx_bytes;
        c.packets = tx.tx_packets;
      }
      c.queue_drops += tx.tx_dropped;
      c.rx_drops = ln[d->peer_ns][d->peer_dev].rx_dropped;
      out.push_back(c);
    }
  return out;
}

std::string render_counters(const std::vector<DirectionCounters>& cs) {
  std::string o = fmt::format("{:<14} {:<5} {:>14} {:>12} {:>10} {:>10} {:>11} {:>9}\n", "link", "dir",
                              "rate", "bytes", "packets", "q-drops", "overlimits", "rx-drops");
  std::uint64_t qd = 0, rd = 0;
  for (const auto& c : cs) {
    o += fmt::format("{:<14} {:<5} {:>14} {:>12} {:>10} {:>10} {:>11} {:>9}\n", c.link, c.dir,
                     format_rate(c.bps), c.bytes, c.packets, c.queue_drops,
                     c.bps ? std::to_string(c.overlimits) : "-", c.rx_drops);
    qd += c.queue_drops;
    rd += c.rx_drops;
  }
  o += fmt::format("drops: {} at senders (shaper queue full), {} at receivers\n", qd, rd);
  std::string kept;
  std::uint64_t total = 0;
  for (const auto& c : cs)
    if (c.filtered) {
      kept += fmt::format("{}{} {} {}", kept.empty() ? "" : ", ", c.link, c.dir, c.filtered);
      total += c.filtered;
    }
  if (total)
    o += fmt::format("multicast kept off the uplinks by their filters: {} packets ({}; a GSO batch "
                     "of datagrams counts once)\n", total, kept);
  return o;
}

}  // namespace inc::testbed
