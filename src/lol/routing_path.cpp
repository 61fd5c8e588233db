#include "lol/routing_path.h"

#include <cmath>

#include "io/atomic_file.h"
#include "io/json_file.h"
#include "util/error.h"
#include "util/json_fields.h"

namespace lol {

std::optional<ForcedChoice> RoutingPath::at(int64_t d, int64_t k) const {
  if (d < 0 || d >= depth() || k < 0 || k >= int64_t(expert[d].size())) return std::nullopt;
  if (expert[d][k] < 0) return std::nullopt;
  ForcedChoice c;
  c.expert = expert[d][k];
  double a = alpha[d][k];
  if (!std::isnan(a)) c.alpha = a;
  return c;
}

void RoutingPath::set(int64_t d, int64_t k, int64_t e, std::optional<double> a) {
  if (int64_t(expert.size()) <= d) {
    expert.resize(d + 1);
    alpha.resize(d + 1);
  }
  if (int64_t(expert[d].size()) <= k) {
    expert[d].resize(k + 1, -1);
    alpha[d].resize(k + 1, std::nan(""));
  }
  expert[d][k] = e;
  alpha[d][k] = a ? *a : std::nan("");
}

nlohmann::json RoutingPath::to_json() const {
  nlohmann::json ex = nlohmann::json::array(), al = nlohmann::json::array();
  for (size_t d = 0; d < expert.size(); ++d) {
    nlohmann::json er = nlohmann::json::array(), ar = nlohmann::json::array();
    for (size_t k = 0; k < expert[d].size(); ++k) {
      er.push_back(expert[d][k] < 0 ? nlohmann::json(nullptr) : nlohmann::json(expert[d][k]));
      ar.push_back(std::isnan(alpha[d][k]) ? nlohmann::json(nullptr) : nlohmann::json(alpha[d][k]));
    }
    ex.push_back(er);
    al.push_back(ar);
  }
  return {{"format", "lol-routing-path"}, {"version", 1}, {"library_size", library_size},
          {"core_depth", depth()}, {"expert", ex}, {"alpha", al}, {"meta", meta}};
}

RoutingPath RoutingPath::from_json(const nlohmann::json& j, const std::string& w) {
  util::JsonFields f(j, w);
  f.get("format", std::string(""), {"lol-routing-path"});
  int64_t version = 0, depth = -1;
  f.get("version", version);
  require(version == 1, w, "field 'version' = " + std::to_string(version) + ": expected 1");
  RoutingPath p;
  f.get("library_size", p.library_size);
  util::check_range(w, "library_size", p.library_size, 1, 4096);
  f.get("core_depth", depth);
  const auto* ex = f.raw("expert");
  const auto* al = f.raw("alpha");
  require(ex && ex->is_array(), w, "field 'expert' must be a list (one list per routed depth)");
  require(!al || (al->is_array() && al->size() == ex->size()), w,
          "field 'alpha' must be a list with one row per routed depth, like 'expert'");
  require(depth < 0 || depth == int64_t(ex->size()), w,
          "field 'core_depth' = " + std::to_string(depth) + " but 'expert' has " + std::to_string(ex->size()) + " rows");
  if (const auto* m = f.raw("meta")) p.meta = *m;
  f.reject_unknown();
  for (size_t d = 0; d < ex->size(); ++d) {
    const auto& er = (*ex)[d];
    std::string wd = w + ": expert[" + std::to_string(d) + "]";
    require(er.is_array(), wd, "must be a list of expert indices or null");
    if (al) require((*al)[d].is_array() && (*al)[d].size() == er.size(), w + ": alpha[" + std::to_string(d) + "]",
                    "must have the same length as expert[" + std::to_string(d) + "]");
    for (size_t k = 0; k < er.size(); ++k) {
      std::string wk = w + ": expert[" + std::to_string(d) + "][" + std::to_string(k) + "]";
      if (er[k].is_null()) {
        p.set(int64_t(d), int64_t(k), -1, std::nullopt);
        continue;
      }
      require(er[k].is_number_integer(), wk, "expected an integer expert index or null");
      int64_t e = er[k].get<int64_t>();
      require(e >= 0 && e < p.library_size, wk,
              "= " + std::to_string(e) + ": expected 0 <= expert < library_size = " + std::to_string(p.library_size));
      std::optional<double> a;
      if (al && !(*al)[d][k].is_null()) {
        const auto& av = (*al)[d][k];
        std::string wa = w + ": alpha[" + std::to_string(d) + "][" + std::to_string(k) + "]";
        require(av.is_number(), wa, "expected a number in [0, 1] or null");
        double x = av.get<double>();
        require(x >= 0.0 && x <= 1.0, wa, "= " + std::to_string(x) + ": expected 0 <= alpha <= 1");
        a = x;
      }
      p.set(int64_t(d), int64_t(k), e, a);
    }
    if (er.empty()) {
      p.expert.resize(std::max<size_t>(p.expert.size(), d + 1));
      p.alpha.resize(std::max<size_t>(p.alpha.size(), d + 1));
    }
  }
  return p;
}

RoutingPath RoutingPath::load(const std::string& path) {
  nlohmann::json j = io::read_json_file(path);
  return from_json(j, path);
}

void RoutingPath::save(const std::string& path) const { io::write_file_atomic(path, to_json().dump(1) + "\n"); }

}  // namespace lol
