// Measured costs of every path (the switch and each host algorithm), per collective and size,
// and the automatic choice they drive. `inc tune` measures a job's paths on its own ranks,
// links and switch and writes a tuning file; a job reads it (INC_TUNING=FILE) and `auto` then
// picks, per call, the path with the smallest predicted time, as NCCL's tuner plugins do with
// their tables. The Report names the choice and the predicted cost of every candidate.
//
// Prediction: each measured time first lowered to the smallest measured at any larger size (a
// larger call never costs less; noise only adds), then piecewise linear in bytes between
// measured sizes (the alpha-beta model is linear in bytes, so each segment is a local
// alpha + n beta fit); below the smallest measured size the smallest size's time (latency
// floor); above the largest, the last segment's slope (bandwidth) extended.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "coll/schedule.hpp"
#include "inc/types.hpp"

namespace inc::api {

struct CostPoint {
  std::uint64_t bytes = 0;  // nccl-tests size: the larger of the send and receive buffers
  double us = 0;            // measured time of one call, microseconds
};

class CostTable {
 public:
  static constexpr int kFormatVersion = 1;

  // What the measurements apply to.
  int nranks = 0;
  std::string switch_path;  // "" when measured without a switch; else where it attached
  std::string dtype = "f32";
  std::string created;      // free text: date, host, command

  void add(Collective c, coll::Algorithm a, std::uint64_t bytes, double us);
  // Predicted microseconds of algorithm `a` for `bytes`; nullopt if never measured.
  std::optional<double> predict(Collective c, coll::Algorithm a, std::uint64_t bytes) const;
  // Algorithms measured for a collective.
  std::vector<coll::Algorithm> algorithms(Collective c) const;
  bool empty() const { return points_.empty(); }

  std::string to_json() const;
  // Parses a tuning file's text; throws Error(config) as "origin:LINE: key: what" (the line
  // of the offending value, or of the JSON syntax error).
  static CostTable from_json(const std::string& text, const std::string& origin);
  static CostTable load(const std::string& path);  // Error(config) if unreadable or invalid
  void save(const std::string& path) const;        // Error(config) if it cannot be written

 private:
  std::map<std::pair<Collective, coll::Algorithm>, std::vector<CostPoint>> points_;
};

struct PathCost {
  coll::Algorithm algo = coll::Algorithm::automatic;
  double us = 0;
};

// Every path automatic selection weighs for a collective, and so every path `inc tune`
// measures: the switch first when it can take the call (`with_switch`), then each host
// algorithm that implements the collective. The one definition of the candidates.
std::vector<coll::Algorithm> candidates(Collective c, bool with_switch);

// The cheapest of `candidates` by predicted time; `costs` receives every candidate that has a
// prediction, cheapest first. nullopt if none has one.
std::optional<coll::Algorithm> choose(const CostTable& t, Collective c, std::uint64_t bytes,
                                      const std::vector<coll::Algorithm>& candidates,
                                      std::vector<PathCost>& costs);

// How `inc tune` measures: per size, each candidate's median call time in each of several
// interleaved rounds; the table keeps the median over rounds (`median`). A size is `settled`
// when the fastest candidate by that median is at most `margin` slower than every rival's
// best round (the rival's most favourable reading): choosing it then costs at most `margin`
// even if the rival's true cost is its best round. Sizes not settled get more rounds.
// `per_candidate` holds each candidate's round medians (an empty one is not measured).
double median(std::vector<double> v);  // 0 for none
bool settled(const std::vector<std::vector<double>>& per_candidate, double margin);

// "inc 412 us, ring 530 us, recursive_doubling 702 us"
std::string describe(const std::vector<PathCost>& costs);

}  // namespace inc::api
