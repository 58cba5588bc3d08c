#include "api/tuning.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string_view>

namespace inc::api {

using coll::Algorithm;
using json = nlohmann::json;

void CostTable::add(Collective c, Algorithm a, std::uint64_t bytes, double us) {
  auto& v = points_[{c, a}];
  auto it = std::lower_bound(v.begin(), v.end(), bytes,
                             [](const CostPoint& p, std::uint64_t b) { return p.bytes < b; });
  if (it != v.end() && it->bytes == bytes) it->us = us;
  else v.insert(it, CostPoint{bytes, us});
}

std::optional<double> CostTable::predict(Collective c, Algorithm a, std::uint64_t bytes) const {
  auto it = points_.find({c, a});
  if (it == points_.end() || it->second.empty()) return std::nullopt;
  // A larger call never costs less, and a shared machine's noise only adds time: a size's
  // cost is at most any larger size's measured cost. Each point counts as the smallest time
  // measured at its size or above (the table's monotone lower envelope), so one slow reading
  // at a small size (a descheduled rank) does not rule a path out there.
  std::vector<CostPoint> v = it->second;
  for (std::size_t i = v.size() - 1; i-- > 0;) v[i].us = std::min(v[i].us, v[i + 1].us);
  const double b = static_cast<double>(bytes);
  if (bytes <= v.front().bytes) return v.front().us;
  if (v.size() == 1)  // one point only: scale its time with the size (a bandwidth-bound guess)
    return v.front().bytes ? v.front().us * b / static_cast<double>(v.front().bytes) : v.front().us;
  auto hi = std::lower_bound(v.begin(), v.end(), bytes,
                             [](const CostPoint& p, std::uint64_t x) { return p.bytes < x; });
  if (hi == v.end()) hi = v.end() - 1;  // extrapolate with the last segment
  auto lo = hi - 1;
  const double b0 = static_cast<double>(lo->bytes), b1 = static_cast<double>(hi->bytes);
  const double slope = (hi->us - lo->us) / (b1 - b0);
  double t = lo->us + (b - b0) * slope;
  if (bytes > v.back().bytes) t = std::max(t, v.back().us);  // never faster than the largest measured
  return std::max(t, 0.0);
}

std::vector<Algorithm> CostTable::algorithms(Collective c) const {
  std::vector<Algorithm> out;
  for (const auto& [key, pts] : points_)
    if (key.first == c && !pts.empty()) out.push_back(key.second);
  return out;
}

std::string CostTable::to_json() const {
  // One line per measured path, so that a reader (or a diff) sees the table.
  std::string out = fmt::format("{{\n \"inc_tuning\": {},\n \"nranks\": {},\n \"switch\": {},\n "
                                "\"dtype\": {},\n \"created\": {},\n \"table\": {{",
                                kFormatVersion, nranks, json(switch_path).dump(), json(dtype).dump(),
                                json(created).dump());
  Collective open = Collective::barrier;
  bool first_coll = true, first_algo = true;
  for (const auto& [key, pts] : points_) {
    if (first_coll || key.first != open) {
      out += fmt::format("{}\n  \"{}\": {{", first_coll ? "" : "\n  },", name(key.first));
      open = key.first;
      first_coll = false;
      first_algo = true;
    }
    std::string row;
    for (const auto& p : pts) row += fmt::format("{}[{}, {:.3f}]", row.empty() ? "" : ", ", p.bytes, p.us);
    out += fmt::format("{}\n   \"{}\": [{}]", first_algo ? "" : ",", coll::name(key.second), row);
    first_algo = false;
  }
  out += first_coll ? "}\n}" : "\n  }\n }\n}";
  return out;
}

namespace {

// One step of a path into a JSON document: an object key or an array index.
struct Step {
  std::string key;
  std::size_t index = 0;
  bool is_index = false;
};

// The 1-based line of the value at `path` in `text` (JSON that parsed): of its key in an
// object, of its start in an array; 0 if it is not there. A scan of the text's tokens that keeps the current path (nlohmann 3.11 keeps no
// positions); a key with escapes may not be found, and then the error has no line.
int line_of(std::string_view text, const std::vector<Step>& path) {
  struct Frame {
    bool array = false;
    std::string key;
    std::size_t index = 0;
    int key_line = 0;
  };
  std::vector<Frame> st;
  bool want_key = false;
  int line = 1;
  auto here = [&] {
    if (st.size() != path.size()) return false;
    for (std::size_t i = 0; i < st.size(); ++i)
      if (st[i].array != path[i].is_index || (st[i].array ? st[i].index != path[i].index : st[i].key != path[i].key))
        return false;
    return true;
  };
  auto at = [&] { return st.empty() || st.back().array ? line : st.back().key_line; };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (ch == '\n') ++line;
    if (ch == '\n' || ch == ' ' || ch == '\t' || ch == '\r' || ch == ':') continue;
    if (ch == ',') {
      if (!st.empty() && st.back().array) ++st.back().index;
      else want_key = !st.empty();
      continue;
    }
    if (ch == '}' || ch == ']') {
      if (!st.empty()) st.pop_back();
      want_key = false;
      continue;
    }
    if (ch == '"') {
      std::string str;
      std::size_t j = i + 1;
      for (; j < text.size() && text[j] != '"'; ++j) {
        if (text[j] == '\\' && j + 1 < text.size()) ++j;
        str += text[j];
      }
      i = j;
      if (want_key) {
        st.back().key = std::move(str);
        st.back().key_line = line;
        want_key = false;
      } else if (here()) {
        return at();
      }
      continue;
    }
    if (here()) return at();  // a value starts: object, array, number, true, false, null
    if (ch == '{' || ch == '[') {
      st.push_back({ch == '[', "", 0, 0});
      want_key = ch == '{';
      continue;
    }
    while (i + 1 < text.size() && std::string_view(",]}\n \t\r").find(text[i + 1]) == std::string_view::npos) ++i;
  }
  return 0;
}

}  // namespace

CostTable CostTable::from_json(const std::string& text, const std::string& origin) {
  // "origin:LINE: what", LINE where the value at `path` starts (the first line without one).
  auto bad = [&](const std::vector<Step>& path, const std::string& what) {
    const int line = path.empty() ? 1 : line_of(text, path);
    return Error(Error::Kind::config, line > 0 ? fmt::format("{}:{}: {}", origin, line, what)
                                               : fmt::format("{}: {}", origin, what));
  };
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {  // its byte offset gives the line
    const std::size_t at = std::min<std::size_t>(e.byte > 0 ? e.byte - 1 : 0, text.size());
    const auto line = 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n');
    throw Error(Error::Kind::config, fmt::format("{}:{}: not a tuning file (JSON: {})", origin, line, e.what()));
  } catch (const json::exception& e) {  // out_of_range for numbers like 1e999
    throw bad({}, fmt::format("not a tuning file (JSON: {})", e.what()));
  }
  if (!j.is_object() || !j.contains("inc_tuning"))
    throw bad({}, "not a tuning file (no \"inc_tuning\" key; write one with `inc tune`)");
  if (!j["inc_tuning"].is_number_integer() || j["inc_tuning"].get<int>() != kFormatVersion)
    throw bad({{"inc_tuning"}}, fmt::format("\"inc_tuning\": format {} is not supported (this build reads {})",
                                            j["inc_tuning"].dump(), kFormatVersion));
  CostTable t;
  if (!j.contains("nranks") || !j["nranks"].is_number_integer() || j["nranks"].get<long long>() < 1 ||
      j["nranks"].get<long long>() > (1 << 24))
    throw bad(j.contains("nranks") ? std::vector<Step>{{"nranks"}} : std::vector<Step>{},
              "\"nranks\" must be a positive integer");
  t.nranks = j["nranks"].get<int>();
  auto str = [&](const char* k, std::string& out) {
    if (!j.contains(k)) return;
    if (!j[k].is_string()) throw bad({{k}}, fmt::format("\"{}\" must be a string", k));
    out = j[k].get<std::string>();
  };
  str("switch", t.switch_path);
  str("dtype", t.dtype);
  str("created", t.created);
  if (!j.contains("table") || !j["table"].is_object())
    throw bad(j.contains("table") ? std::vector<Step>{{"table"}} : std::vector<Step>{}, "\"table\" must be an object");
  for (const auto& [cname, algos] : j["table"].items()) {
    const std::vector<Step> at_c{{"table"}, {cname}};
    auto c = parse_collective(cname);
    if (!c) throw bad(at_c, fmt::format("table.{}: unknown collective", cname));
    if (!algos.is_object()) throw bad(at_c, fmt::format("table.{} must be an object", cname));
    for (const auto& [aname, pts] : algos.items()) {
      std::vector<Step> at_a = at_c;
      at_a.push_back({aname});
      Algorithm a;
      if (!coll::parse_algorithm(aname, a) || a == Algorithm::automatic)
        throw bad(at_a, fmt::format("table.{}.{}: unknown algorithm", cname, aname));
      if (!coll::supports(*c, a))
        throw bad(at_a, fmt::format("table.{}.{}: this algorithm does not implement {}", cname, aname, cname));
      if (!pts.is_array()) throw bad(at_a, fmt::format("table.{}.{} must be an array of [bytes, us]", cname, aname));
      std::size_t k = 0;
      for (const auto& p : pts) {
        if (!p.is_array() || p.size() != 2 || !p[0].is_number_unsigned() || !p[1].is_number() ||
            !(p[1].get<double>() >= 0) || !std::isfinite(p[1].get<double>())) {
          std::vector<Step> at_p = at_a;
          at_p.push_back({"", k, true});
          throw bad(at_p, fmt::format("table.{}.{}[{}] must be [bytes >= 0, microseconds >= 0]", cname, aname, k));
        }
        t.add(*c, a, p[0].get<std::uint64_t>(), p[1].get<double>());
        ++k;
      }
    }
  }
  return t;
}

CostTable CostTable::load(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw Error(Error::Kind::config, fmt::format("{}: cannot read the tuning file", path));
  std::stringstream ss;
  ss << f.rdbuf();
  return from_json(ss.str(), path);
}

void CostTable::save(const std::string& path) const {
  std::ofstream f(path);
  f << to_json() << "\n";
  f.close();
  if (!f) throw Error(Error::Kind::config, fmt::format("{}: cannot write the tuning file", path));
}

std::vector<Algorithm> candidates(Collective c, bool with_switch) {
  std::vector<Algorithm> out;
  if (with_switch) out.push_back(Algorithm::inc);
  for (int a = 1; a < coll::kNumAlgorithms; ++a) {
    const auto h = static_cast<Algorithm>(a);
    if (h != Algorithm::inc && coll::supports(c, h)) out.push_back(h);
  }
  return out;
}

std::optional<Algorithm> choose(const CostTable& t, Collective c, std::uint64_t bytes,
                                const std::vector<Algorithm>& candidates,
                                std::vector<PathCost>& costs) {
  costs.clear();
  for (Algorithm a : candidates)
    if (auto us = t.predict(c, a, bytes)) costs.push_back({a, *us});
  if (costs.empty()) return std::nullopt;
  std::stable_sort(costs.begin(), costs.end(),
                   [](const PathCost& x, const PathCost& y) { return x.us < y.us; });
  return costs.front().algo;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size();
  return m % 2 ? v[m / 2] : (v[m / 2 - 1] + v[m / 2]) / 2;
}

bool settled(const std::vector<std::vector<double>>& per_candidate, double margin) {
  std::size_t lead = per_candidate.size();
  double lead_us = 0;
  for (std::size_t a = 0; a < per_candidate.size(); ++a) {
    if (per_candidate[a].empty()) continue;
    const double m = median(per_candidate[a]);
    if (lead == per_candidate.size() || m < lead_us) lead = a, lead_us = m;
  }
  for (std::size_t a = 0; a < per_candidate.size(); ++a)
    if (a != lead && !per_candidate[a].empty() &&
        lead_us > margin * *std::min_element(per_candidate[a].begin(), per_candidate[a].end()))
      return false;
  return true;
}

std::string describe(const std::vector<PathCost>& costs) {
  std::string s;
  for (const auto& c : costs) {
    if (!s.empty()) s += ", ";
    s += c.us >= 10000 ? fmt::format("{} {:.1f} ms", coll::name(c.algo), c.us / 1000)
                       : fmt::format("{} {:.0f} us", coll::name(c.algo), c.us);
  }
  return s;
}

}  // namespace inc::api
