#include "src/switch/topology.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "src/switch/udp.hpp"

namespace inc::sw {

const TopoSwitch* Topology::find(std::string_view name) const {
  for (const auto& s : switches)
    if (s.name == name) return &s;
  return nullptr;
}
const TopoHost* Topology::find_host(std::string_view name) const {
  for (const auto& h : hosts)
    if (h.name == name) return &h;
  return nullptr;
}
const TopoJob* Topology::find_job(std::uint32_t id) const {
  for (const auto& j : jobs)
    if (j.id == id) return &j;
  return nullptr;
}

std::optional<std::uint32_t> parse_types(std::string_view list) {
  std::uint32_t caps = proto::cap::raw_copy | proto::cap::events;
  while (!list.empty()) {
    auto c = list.find(',');
    std::string_view t = list.substr(0, c);
    if (t == "i32") caps |= proto::cap::i32_sum | proto::cap::i32_minmax;
    else if (t == "f32") caps |= proto::cap::f32_sum | proto::cap::f32_minmax;
    else if (t == "f16" || t == "bf16")  // (one ALU for both 16-bit formats)
      caps |= proto::cap::h16_sum | proto::cap::h16_minmax | proto::cap::h16_widen;
    else if (t == "i8" || t == "u8")  // (one ALU for both 8-bit types)
      caps |= proto::cap::i8_sum | proto::cap::i8_minmax;
    else if (t == "e4m3" || t == "e5m2")  // (one ALU for both fp8 formats)
      caps |= proto::cap::fp8_sum | proto::cap::fp8_minmax;
    else if (t == "i4")
      caps |= proto::cap::i4_sum | proto::cap::i4_minmax;
    else if (t == "mx")  // MX blocks: mxfp8 (e4m3, e5m2), mxint8, mxfp4; mxfp6 (e2m3, e3m2)
      caps |= proto::cap::mx_sum | proto::cap::mx6_sum;
    else if (t == "raw") {}
    else return std::nullopt;
    if (c == std::string_view::npos) break;
    list.remove_prefix(c + 1);
  }
  return caps;
}

namespace {
bool parse_u32(std::string_view s, std::uint32_t& out, std::uint64_t max = 0xFFFFFFFFu) {
  if (s.empty() || s.size() > 10) return false;
  std::uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + std::uint64_t(c - '0');
  }
  if (v > max) return false;
  out = std::uint32_t(v);
  return true;
}
// "0-3,5" -> {0,1,2,3,5}
bool parse_ranks(std::string_view s, std::vector<std::uint32_t>& out) {
  while (!s.empty()) {
    auto c = s.find(',');
    std::string_view item = s.substr(0, c);
    auto d = item.find('-');
    std::uint32_t a, b;
    if (d == std::string_view::npos) {
      if (!parse_u32(item, a, 1u << 20)) return false;
      b = a;
    } else if (!parse_u32(item.substr(0, d), a, 1u << 20) ||
               !parse_u32(item.substr(d + 1), b, 1u << 20) || b < a) {
      return false;
    }
    for (std::uint32_t r = a; r <= b; ++r) out.push_back(r);
    if (c == std::string_view::npos) break;
    s.remove_prefix(c + 1);
  }
  return !out.empty();
}
}  // namespace

std::optional<Topology> parse_topology(std::string_view text, std::string& err) {
  Topology t;
  std::istringstream in{std::string(text)};
  std::string line;
  int n = 0;
  auto fail = [&](const std::string& m) {
    err = "line " + std::to_string(n) + ": " + m;
    return std::nullopt;
  };
  while (std::getline(in, line)) {
    ++n;
    if (auto h = line.find('#'); h != std::string::npos) line.resize(h);
    std::istringstream ls(line);
    std::vector<std::string> w;
    for (std::string x; ls >> x;) w.push_back(x);
    if (w.empty()) continue;
    if (w[0] == "switch") {
      if (w.size() < 3) return fail("expected: switch NAME ADDR:PORT [key=value ...]");
      TopoSwitch s;
      s.name = w[1];
      s.line = n;
      if (t.find(s.name)) return fail("switch '" + s.name + "' defined twice");
      auto ep = parse_endpoint(w[2]);
      if (!ep || ep->port() == 0) return fail("bad address '" + w[2] + "' (want a.b.c.d:port)");
      s.addr = *ep;
      for (std::size_t i = 3; i < w.size(); ++i) {
        auto eq = w[i].find('=');
        if (eq == std::string::npos) return fail("expected key=value, got '" + w[i] + "'");
        std::string k = w[i].substr(0, eq), v = w[i].substr(eq + 1);
        if (k == "parent") s.parent = v;
        else if (k == "slots") {
          if (!parse_u32(v, s.slots, 1u << 20) || s.slots == 0) return fail("bad slots '" + v + "'");
        } else if (k == "slot-elements") {
          if (!parse_u32(v, s.slot_elems, proto::kMaxPayloadBytes / 4) || s.slot_elems == 0)
            return fail("bad slot-elements '" + v + "' (1.." + std::to_string(proto::kMaxPayloadBytes / 4) + ")");
        } else if (k == "ports") {
          if (!parse_u32(v, s.ports, proto::kMaxMembers) || s.ports == 0)
            return fail("bad ports '" + v + "' (1.." + std::to_string(proto::kMaxMembers) + ")");
        } else if (k == "lanes") {
          std::uint32_t l = 0;
          if (!parse_u32(v, l, proto::kMaxLanes) || l == 0)
            return fail("bad lanes '" + v + "' (1.." + std::to_string(proto::kMaxLanes) + ")");
          s.lanes = std::uint16_t(l);
        } else if (k == "rate") {
          char* end = nullptr;
          s.uplink_gbps = std::strtod(v.c_str(), &end);
          if (v.empty() || *end != '\0' || !(s.uplink_gbps > 0 && s.uplink_gbps <= 1e6))
            return fail("bad rate '" + v + "' (Gb/s of the link to the parent, > 0)");
        } else if (k == "types") {
          auto c = parse_types(v);
          if (!c) return fail("bad types '" + v + "' (i32,f32)");
          s.caps = *c;
        } else {
          return fail("unknown key '" + k + "' for a switch");
        }
      }
      t.switches.push_back(s);
    } else if (w[0] == "job") {
      if (w.size() < 3) return fail("expected: job ID slots=N SWITCH=RANKS ...");
      TopoJob j;
      j.line = n;
      if (!parse_u32(w[1], j.id)) return fail("bad job id '" + w[1] + "'");
      if (t.find_job(j.id)) return fail("job " + w[1] + " defined twice");
      for (std::size_t i = 2; i < w.size(); ++i) {
        auto eq = w[i].find('=');
        if (eq == std::string::npos) return fail("expected key=value, got '" + w[i] + "'");
        std::string k = w[i].substr(0, eq), v = w[i].substr(eq + 1);
        if (k == "slots") {
          if (!parse_u32(v, j.slots, 0xFFFF) || j.slots == 0) return fail("bad slots '" + v + "' (1..65535)");
        } else {
          std::vector<std::uint32_t> ranks;
          if (!parse_ranks(v, ranks)) return fail("bad rank list '" + v + "' for switch '" + k + "'");
          j.attach.push_back({k, ranks});
        }
      }
      t.jobs.push_back(j);
    } else if (w[0] == "host") {
      if (w.size() != 3 || w[2].rfind("leaf=", 0) != 0) return fail("expected: host NAME leaf=SWITCH[,SWITCH...]");
      if (t.find_host(w[1])) return fail("host '" + w[1] + "' defined twice");
      TopoHost h{w[1], "", n, {}};
      for (std::size_t p = 5;;) {
        const auto c = w[2].find(',', p);
        h.leaves.push_back(w[2].substr(p, c == std::string::npos ? std::string::npos : c - p));
        if (h.leaves.back().empty()) return fail("host '" + w[1] + "': an empty switch name in '" + w[2] + "'");
        if (std::count(h.leaves.begin(), h.leaves.end(), h.leaves.back()) > 1)
          return fail("host '" + w[1] + "': switch '" + h.leaves.back() + "' given twice");
        if (c == std::string::npos) break;
        p = c + 1;
      }
      h.leaf = h.leaves.front();
      t.hosts.push_back(std::move(h));
    } else {
      return fail("unknown statement '" + w[0] + "' (switch, job, host)");
    }
  }
  // Cross-checks: ports of lanes, parents exist, no cycles, jobs attach to known switches,
  // ranks 0..n-1 once.
  for (const auto& s : t.switches) {
    n = s.line;
    if (std::uint32_t(s.addr.port()) + s.lanes - 1 > 65535)
      return fail("switch '" + s.name + "': " + std::to_string(s.lanes) + " lanes from port " +
                  std::to_string(s.addr.port()) + " go beyond port 65535");
    if (s.slots < s.lanes)
      return fail("switch '" + s.name + "': slots=" + std::to_string(s.slots) + " cannot be split over " +
                  std::to_string(s.lanes) + " lanes");
    for (const auto& o : t.switches) {
      if (&o == &s || o.addr.ipv4_addr() != s.addr.ipv4_addr()) continue;
      const std::uint32_t a0 = s.addr.port(), a1 = a0 + s.lanes, b0 = o.addr.port(), b1 = b0 + o.lanes;
      if (a0 < b1 && b0 < a1 && (o.line < s.line))
        return fail("switch '" + s.name + "' (ports " + std::to_string(a0) + "-" + std::to_string(a1 - 1) +
                    ") overlaps the lanes of switch '" + o.name + "' (ports " + std::to_string(b0) + "-" +
                    std::to_string(b1 - 1) + ")");
    }
    if (!s.parent.empty() && !t.find(s.parent)) return fail("unknown parent '" + s.parent + "'");
    const TopoSwitch* p = &s;
    for (std::size_t steps = 0; p && !p->parent.empty(); ++steps) {
      if (steps > t.switches.size()) return fail("parent links of '" + s.name + "' form a cycle");
      p = t.find(p->parent);
    }
  }
  for (const auto& h : t.hosts) {
    n = h.line;
    for (const auto& l : h.leaves)
      if (!t.find(l)) return fail("host '" + h.name + "': unknown switch '" + l + "'");
  }
  for (auto& j : t.jobs) {
    n = j.line;
    std::set<std::uint32_t> seen;
    for (const auto& [sw, ranks] : j.attach) {
      if (!t.find(sw)) return fail("unknown switch '" + sw + "'");
      for (auto r : ranks)
        if (!seen.insert(r).second) return fail("rank " + std::to_string(r) + " attached twice");
    }
    j.nranks = std::uint32_t(seen.size());
    if (seen.empty() || *seen.rbegin() != j.nranks - 1)
      return fail("ranks of job " + std::to_string(j.id) + " must be exactly 0..n-1");
  }
  return t;
}

std::optional<Topology> load_topology(const std::string& path, std::string& err) {
  std::ifstream f(path);
  if (!f) {
    err = "cannot read topology file '" + path + "'";
    return std::nullopt;
  }
  std::stringstream ss;
  ss << f.rdbuf();
  auto t = parse_topology(ss.str(), err);
  if (!t) err = path + ": " + err;
  return t;
}

std::optional<JobPlan> plan_job(const Topology& t, const TopoJob& job, std::string& err) {
  // Direct ranks per switch, then every switch on a path from an attached switch to its root.
  std::map<std::string, std::vector<std::uint32_t>> direct;
  for (const auto& [sw, ranks] : job.attach) {
    auto& d = direct[sw];
    d.insert(d.end(), ranks.begin(), ranks.end());
  }
  std::map<std::string, std::vector<std::string>> children;  // participating children, file order
  std::set<std::string> on_tree, roots;
  for (const auto& [sw, _] : direct) {
    std::string cur = sw;
    for (;;) {
      on_tree.insert(cur);
      const TopoSwitch* s = t.find(cur);
      if (s->parent.empty()) {
        roots.insert(cur);
        break;
      }
      if (on_tree.count(s->parent)) {
        on_tree.insert(s->parent);
        break;
      }
      cur = s->parent;
    }
  }
  if (roots.size() != 1) {
    err = "job " + std::to_string(job.id) + " spans " + std::to_string(roots.size()) +
          " separate trees; all its switches need one common root";
    return std::nullopt;
  }
  for (const auto& s : t.switches)
    if (on_tree.count(s.name) && !s.parent.empty() && on_tree.count(s.parent))
      children[s.parent].push_back(s.name);
  // A root with a single child switch and no ranks adds nothing: its child becomes the root.
  std::string root = *roots.begin();
  while (direct[root].empty() && children[root].size() == 1) {
    on_tree.erase(root);
    root = children[root][0];
  }
  JobPlan plan;
  plan.root = root;
  plan.ranks.resize(job.nranks);
  for (const auto& s : t.switches) {
    if (!on_tree.count(s.name)) continue;
    auto& d = direct[s.name];
    std::sort(d.begin(), d.end());
    const std::size_t members = d.size() + children[s.name].size();
    if (members > s.ports) {
      err = "switch '" + s.name + "' would have " + std::to_string(members) + " members in job " +
            std::to_string(job.id) + " (at most " + std::to_string(s.ports) +
            (s.ports < proto::kMaxMembers ? ", its ports=" + std::to_string(s.ports) : std::string(", the data plane's limit")) +
            ")";
      return std::nullopt;
    }
    if (job.slots > s.slots / s.lanes) {
      err = "job " + std::to_string(job.id) + " needs " + std::to_string(job.slots) +
            " slots per lane, switch '" + s.name + "' has " + std::to_string(s.slots / s.lanes) +
            (s.lanes > 1 ? " per lane (slots=" + std::to_string(s.slots) + " over " +
                               std::to_string(s.lanes) + " lanes)"
                         : "");
      return std::nullopt;
    }
    for (std::size_t i = 0; i < d.size(); ++i)
      plan.ranks[d[i]] = {s.name, s.addr, std::uint16_t(i)};
    plan.specs[s.name] = JobSpec{job.id, std::uint16_t(members), job.slots, proto::kNoMember, std::nullopt};
  }
  for (const auto& [parent, kids] : children) {
    if (!on_tree.count(parent)) continue;
    const std::size_t base = direct[parent].size();
    for (std::size_t i = 0; i < kids.size(); ++i)
      plan.specs[kids[i]].parent_member = std::uint16_t(base + i);
  }
  return plan;
}

SwitchConfig switch_config(const Topology& t, const TopoSwitch& s) {
  SwitchConfig c;
  c.slots = s.slots;
  c.slot_elems = s.slot_elems;
  c.caps = s.caps;
  c.lanes = s.lanes;
  if (!s.parent.empty()) c.parent = t.find(s.parent)->addr;
  return c;
}

}  // namespace inc::sw
