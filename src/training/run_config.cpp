#include "training/run_config.h"

#include <filesystem>

#include "io/atomic_file.h"
#include "io/json_file.h"
#include "util/error.h"
#include "util/json_fields.h"

namespace lol::training {

using util::check_range;
using util::JsonFields;

namespace {

constexpr int64_t kBig = int64_t(1) << 40;

const nlohmann::json* section(JsonFields& f, const std::string& key) {
  const nlohmann::json* s = f.raw(key);
  if (s && !s->is_object()) throw InputError(f.where() + ": field '" + key + "' must be an object");
  return s;
}

DataConfig parse_data(const nlohmann::json& j, const std::string& w) {
  JsonFields f(j, w);
  DataConfig d;
  f.get("dir", d.dir);
  f.get("seq_len", d.seq_len);
  f.get("batch_size", d.batch_size);
  d.packing = f.get("packing", d.packing, {"pad", "pack"});
  f.get("train_split", d.train_split);
  f.get("valid_split", d.valid_split);
  f.reject_unknown();
  require(!d.dir.empty(), w, "field 'dir' is required (the dataset directory written by `lol data`)");
  check_range(w, "seq_len", d.seq_len, 0, int64_t(1) << 24);
  check_range(w, "batch_size", d.batch_size, 1, int64_t(1) << 20);
  if (d.packing == "pack")
    require(d.seq_len >= 2, w, "field 'seq_len' = " + std::to_string(d.seq_len) + ": packing \"pack\" needs seq_len >= 2");
  return d;
}

OptimConfig parse_optim(const nlohmann::json& j, const std::string& w) {
  JsonFields f(j, w);
  OptimConfig o;
  o.type = f.get("type", o.type, {"muon", "adamw"});
  f.get("lr", o.lr);
  f.get("muon_lr", o.muon_lr);
  if (const auto* b = f.raw("betas")) {
    if (!b->is_array() || b->size() != 2 || !(*b)[0].is_number() || !(*b)[1].is_number())
      throw InputError(w + ": field 'betas' = " + b->dump() + ": expected [beta1, beta2]");
    o.beta1 = (*b)[0].get<double>();
    o.beta2 = (*b)[1].get<double>();
  }
  f.get("eps", o.eps);
  f.get("weight_decay", o.weight_decay);
  f.get("momentum", o.momentum);
  f.get("nesterov", o.nesterov);
  f.get("ns_steps", o.ns_steps);
  o.ns_dtype = f.get("ns_dtype", o.ns_dtype, {"float32", "bfloat16"});
  f.reject_unknown();
  check_range(w, "lr", o.lr, 0.0, 10.0);
  if (o.muon_lr >= 0 || f.has("muon_lr")) check_range(w, "muon_lr", o.muon_lr, 0.0, 10.0);
  check_range(w, "betas[0]", o.beta1, 0.0, 0.999999);
  check_range(w, "betas[1]", o.beta2, 0.0, 0.999999);
  check_range(w, "eps", o.eps, 1e-30, 1.0);
  check_range(w, "weight_decay", o.weight_decay, 0.0, 10.0);
  check_range(w, "momentum", o.momentum, 0.0, 0.999999);
  check_range(w, "ns_steps", o.ns_steps, 1, 100);
  return o;
}

ScheduleConfig parse_schedule(const nlohmann::json& j, const std::string& w) {
  JsonFields f(j, w);
  ScheduleConfig s;
  s.type = f.get("type", s.type, {"cosine", "wsd", "constant"});
  f.get("warmup_steps", s.warmup_steps);
  f.get("min_lr_ratio", s.min_lr_ratio);
  f.get("decay_fraction", s.decay_fraction);
  s.decay_shape = f.get("decay_shape", s.decay_shape, {"linear", "1-sqrt"});
  f.reject_unknown();
  check_range(w, "warmup_steps", s.warmup_steps, 0, kBig);
  check_range(w, "min_lr_ratio", s.min_lr_ratio, 0.0, 1.0);
  check_range(w, "decay_fraction", s.decay_fraction, 0.0, 1.0);
  return s;
}

GrowConfig parse_grow(const nlohmann::json& j, const std::string& w) {
  JsonFields f(j, w);
  GrowConfig g;
  f.get("start", g.start);
  f.get("fraction", g.fraction);
  g.shape = f.get("shape", g.shape, {"1-sqrt", "sqrt", "linear"});
  f.reject_unknown();
  check_range(w, "start", g.start, 0, 4096);
  check_range(w, "fraction", g.fraction, 0.0, 1.0);
  return g;
}

TrainConfig parse_train(const nlohmann::json& j, const std::string& w) {
  JsonFields f(j, w);
  TrainConfig t;
  f.get("steps", t.steps);
  f.get("grad_accum", t.grad_accum);
  f.get("clip", t.clip);
  f.get("eval_every", t.eval_every);
  f.get("eval_batches", t.eval_batches);
  f.get("save_every", t.save_every);
  f.get("keep_last", t.keep_last);
  f.get("log_every", t.log_every);
  f.get("seed", t.seed);
  f.get("device", t.device);
  f.get("threads", t.threads);
  f.get("out", t.out);
  t.on_nonfinite = f.get("on_nonfinite", t.on_nonfinite, {"stop", "skip"});
  f.get("progress", t.progress);
  f.reject_unknown();
  check_range(w, "steps", t.steps, 1, kBig);
  check_range(w, "grad_accum", t.grad_accum, 1, 1 << 20);
  check_range(w, "clip", t.clip, 0.0, 1e9);
  check_range(w, "eval_every", t.eval_every, 0, kBig);
  check_range(w, "eval_batches", t.eval_batches, 0, kBig);
  check_range(w, "save_every", t.save_every, 0, kBig);
  check_range(w, "keep_last", t.keep_last, 1, 1 << 20);
  check_range(w, "log_every", t.log_every, 1, kBig);
  check_range(w, "seed", t.seed, 0, kBig * 1024);
  check_range(w, "threads", t.threads, 0, 4096);
  require(!t.out.empty(), w, "field 'out' is required (the run directory)");
  return t;
}

}  // namespace

RunConfig RunConfig::from_json(const nlohmann::json& j, const std::string& where) {
  JsonFields f(j, where);
  RunConfig c;
  c.source = where;
  const nlohmann::json* model = f.raw("model");
  f.get("init_from", c.init_from);
  if (model && !model->is_null()) {
    require(model->is_object(), where, "field 'model' must be an object");
    c.model = *model;
  }
  require(c.model.is_null() != c.init_from.empty(), where,
          "exactly one of 'model' (a new model's configuration) and 'init_from' (a model directory) must be given");
  const nlohmann::json empty = nlohmann::json::object();
  auto sec = [&](const char* key) -> const nlohmann::json& {
    const nlohmann::json* s = section(f, key);
    return s ? *s : empty;
  };
  const nlohmann::json* data = section(f, "data");
  require(data != nullptr, where, "section 'data' is required (at least {\"dir\": DATASET})");
  c.data = parse_data(*data, where + ":data");
  c.optim = parse_optim(sec("optim"), where + ":optim");
  c.schedule = parse_schedule(sec("schedule"), where + ":schedule");
  c.grow = parse_grow(sec("grow"), where + ":grow");
  const nlohmann::json* train = section(f, "train");
  require(train != nullptr, where, "section 'train' is required (at least {\"out\": RUN_DIR})");
  c.train = parse_train(*train, where + ":train");
  f.reject_unknown();
  if (c.schedule.warmup_steps > c.train.steps)
    throw InputError(where + ":schedule: field 'warmup_steps' = " + std::to_string(c.schedule.warmup_steps) +
                     ": expected <= train.steps = " + std::to_string(c.train.steps) + " (for a short run, e.g. --set " +
                     "schedule.warmup_steps=" + std::to_string(c.train.steps / 10) + ")");
  return c;
}

nlohmann::json RunConfig::to_json() const {
  nlohmann::json j;
  if (!model.is_null()) j["model"] = model;
  if (!init_from.empty()) j["init_from"] = init_from;
  j["data"] = {{"dir", data.dir},
               {"seq_len", data.seq_len},
               {"batch_size", data.batch_size},
               {"packing", data.packing},
               {"train_split", data.train_split},
               {"valid_split", data.valid_split}};
  j["optim"] = {{"type", optim.type},       {"lr", optim.lr},
                {"muon_lr", optim.effective_muon_lr()},
                {"betas", {optim.beta1, optim.beta2}},
                {"eps", optim.eps},         {"weight_decay", optim.weight_decay},
                {"momentum", optim.momentum}, {"nesterov", optim.nesterov},
                {"ns_steps", optim.ns_steps}, {"ns_dtype", optim.ns_dtype}};
  j["schedule"] = {{"type", schedule.type},
                   {"warmup_steps", schedule.warmup_steps},
                   {"min_lr_ratio", schedule.min_lr_ratio},
                   {"decay_fraction", schedule.decay_fraction},
                   {"decay_shape", schedule.decay_shape}};
  j["grow"] = {{"start", grow.start}, {"fraction", grow.fraction}, {"shape", grow.shape}};
  j["train"] = {{"steps", train.steps},         {"grad_accum", train.grad_accum},
                {"clip", train.clip},           {"eval_every", train.eval_every},
                {"eval_batches", train.eval_batches}, {"save_every", train.save_every},
                {"keep_last", train.keep_last}, {"log_every", train.log_every},
                {"seed", train.seed},           {"device", train.device},
                {"threads", train.threads},     {"out", train.out},
                {"on_nonfinite", train.on_nonfinite}, {"progress", train.progress}};
  return j;
}

void apply_override(nlohmann::json& j, const std::string& a) {
  // Command-line bytes that are not UTF-8 cannot live in JSON (run.json, messages):
  // nlohmann::json would throw type_error 316 when writing them (found by fuzz_configs).
  const nlohmann::json as_json = a;
  const std::string shown = as_json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (shown != as_json.dump(-1, ' ', false, nlohmann::json::error_handler_t::ignore))
    throw InputError("--set " + shown + ": not valid UTF-8 (expected KEY=VALUE in UTF-8)");
  const auto eq = a.find('=');
  if (eq == std::string::npos || eq == 0)
    throw InputError("--set " + a + ": expected KEY=VALUE with a dotted key, e.g. train.steps=100");
  const std::string key = a.substr(0, eq), text = a.substr(eq + 1);
  std::vector<std::string> parts;
  size_t b = 0;
  while (true) {
    size_t dot = key.find('.', b);
    parts.push_back(key.substr(b, dot == std::string::npos ? std::string::npos : dot - b));
    if (parts.back().empty()) throw InputError("--set " + a + ": empty component in key '" + key + "'");
    if (dot == std::string::npos) break;
    b = dot + 1;
  }
  // Keys must name known sections and fields (the model section is checked by the model).
  static const nlohmann::json defaults = [] {
    RunConfig d;
    d.data.dir = "x";
    d.train.out = "x";
    d.model = nlohmann::json::object();
    return d.to_json();
  }();
  if (parts[0] != "model" && parts[0] != "init_from") {
    if (!defaults.contains(parts[0]))
      throw InputError("--set " + a + ": unknown section '" + parts[0] +
                       "' (expected model, init_from, data, optim, schedule, grow or train)");
    if (parts.size() != 2 || !defaults[parts[0]].contains(parts[1])) {
      std::string known;
      for (auto it = defaults[parts[0]].begin(); it != defaults[parts[0]].end(); ++it)
        known += (known.empty() ? "" : ", ") + it.key();
      throw InputError("--set " + a + ": unknown key '" + key + "' (keys of '" + parts[0] + "': " + known + ")");
    }
  }
  nlohmann::json value;
  try {
    value = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception&) {
    value = text;
  }
  nlohmann::json* cur = &j;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    if (cur->is_null()) *cur = nlohmann::json::object();
    if (!cur->is_object()) throw InputError("--set " + a + ": the value at '" + parts[i] + "' is not an object");
    cur = &(*cur)[parts[i]];
  }
  if (cur->is_null()) *cur = nlohmann::json::object();
  if (!cur->is_object()) throw InputError("--set " + a + ": cannot set a field inside a non-object");
  (*cur)[parts.back()] = value;
}

RunConfig RunConfig::load(const std::string& path, const std::vector<std::string>& overrides) {
  nlohmann::json j = io::read_json_file(path);
  if (!j.is_object()) throw InputError(path + ": expected a JSON object");
  for (const auto& o : overrides) apply_override(j, o);
  try {
    RunConfig c = from_json(j, path);
    c.overrides = overrides;
    return c;
  } catch (const InputError& e) {
    RunConfig c;
    c.source = path;
    c.overrides = overrides;
    const std::string msg = c.attribute(e.what());
    if (msg == e.what()) throw;
    throw InputError(msg);
  }
}

std::string RunConfig::attribute(const std::string& message) const {
  // A value given by --set is not in the file: say where it came from.
  for (auto o = overrides.rbegin(); o != overrides.rend(); ++o) {
    const auto eq = o->find('='), dot = o->find('.');
    if (eq == std::string::npos || dot == std::string::npos || dot > eq) continue;
    const std::string section = o->substr(0, dot), key = o->substr(dot + 1, eq - dot - 1);
    for (const char* what : {": field '", ": unknown field '"})
      if (message.find(source + ":" + section + what + key + "'") != std::string::npos)
        return message + " (the value comes from --set " + *o + ")";
  }
  return message;
}

}  // namespace lol::training
