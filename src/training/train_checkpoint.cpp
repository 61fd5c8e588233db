#include "training/train_checkpoint.h"

#include <fcntl.h>
#include <stdio.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <mutex>

#include <ATen/Context.h>
#include <ATen/core/Generator.h>

#include "core/tensor_io.h"
#include "io/atomic_file.h"
#include "io/json_file.h"
#include "util/error.h"
#include "util/json_fields.h"

namespace fs = std::filesystem;

namespace lol::training {

nlohmann::json TrainerState::to_json() const {
  return {{"format", "lol-trainer-state"},
          {"version", 1},
          {"step", step},
          {"tokens", tokens},
          {"flops", flops},
          {"elapsed", elapsed},
          {"active_depth", active_depth},
          {"data_position", data_position},
          {"rng_cpu", rng_cpu},
          {"rng_device", rng_device},
          {"nonfinite_skipped", nonfinite_skipped}};
}

TrainerState TrainerState::from_json(const nlohmann::json& j, const std::string& where) {
  util::JsonFields f(j, where);
  TrainerState s;
  f.get("format", std::string(), {"lol-trainer-state"});
  int64_t version = 0;
  f.get("version", version);
  require(version == 1, where, "field 'version' = " + std::to_string(version) + ": expected 1");
  f.get("step", s.step);
  f.get("tokens", s.tokens);
  f.get("flops", s.flops);
  f.get("elapsed", s.elapsed);
  f.get("active_depth", s.active_depth);
  const auto* pos = f.raw("data_position");
  require(pos != nullptr, where, "field 'data_position' is required");
  s.data_position = *pos;
  f.get("rng_cpu", s.rng_cpu);
  require(!f.has("rng_cpu") || !s.rng_cpu.empty(), where,
          "field 'rng_cpu' = \"\": expected the CPU generator state (hex) written by lol train");
  f.get("rng_device", s.rng_device);
  f.get("nonfinite_skipped", s.nonfinite_skipped);
  f.reject_unknown();
  // Counters only grow from here: bounded well below int64 / double overflow.
  constexpr int64_t kMaxCount = int64_t(1) << 60;
  require(s.step >= 0 && s.step < kMaxCount, where,
          "field 'step' = " + std::to_string(s.step) + ": expected 0 <= step < 2^60");
  require(s.tokens >= 0 && s.tokens < kMaxCount, where,
          "field 'tokens' = " + std::to_string(s.tokens) + ": expected 0 <= tokens < 2^60");
  require(std::isfinite(s.flops) && s.flops >= 0 && s.flops < 1e300, where, "field 'flops': expected a finite number >= 0");
  require(std::isfinite(s.elapsed) && s.elapsed >= 0 && s.elapsed < 1e15, where,
          "field 'elapsed': expected seconds >= 0");
  require(s.nonfinite_skipped >= 0 && s.nonfinite_skipped < kMaxCount, where,
          "field 'nonfinite_skipped' = " + std::to_string(s.nonfinite_skipped) + ": expected >= 0");
  return s;
}

std::string checkpoint_name(int64_t step) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "step-%06lld", (long long)step);
  return buf;
}

std::vector<std::string> list_checkpoints(const std::string& run_dir) {
  std::vector<std::pair<int64_t, std::string>> found;
  const fs::path dir = fs::path(run_dir) / "checkpoints";
  if (!fs::is_directory(dir)) return {};
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (!e.is_directory() || n.rfind("step-", 0) != 0) continue;
    try {
      found.emplace_back(std::stoll(n.substr(5)), e.path().string());
    } catch (const std::exception&) {
    }
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& [s, p] : found) out.push_back(p);
  return out;
}

namespace {
std::string to_hex(const torch::Tensor& t) {
  auto c = t.contiguous();
  const auto* p = static_cast<const uint8_t*>(c.data_ptr());
  static const char* d = "0123456789abcdef";
  std::string s;
  s.reserve(size_t(c.nbytes()) * 2);
  for (size_t i = 0; i < size_t(c.nbytes()); ++i) {
    s.push_back(d[p[i] >> 4]);
    s.push_back(d[p[i] & 15]);
  }
  return s;
}
}  // namespace

std::string rng_state_hex(const c10::Device& device) {
  auto gen = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  return to_hex(gen.get_state());
}

void set_rng_state_hex(const c10::Device& device, const std::string& hex, const std::string& where) {
  if (hex.size() % 2) throw InputError(where + ": random generator state has odd length");
  auto t = torch::empty({int64_t(hex.size() / 2)}, torch::kUInt8);
  auto* p = t.data_ptr<uint8_t>();
  auto nib = [&](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    throw InputError(where + ": random generator state is not hex");
  };
  for (size_t i = 0; i < hex.size() / 2; ++i) p[i] = uint8_t(nib(hex[2 * i]) * 16 + nib(hex[2 * i + 1]));
  auto gen = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  try {
    gen.set_state(t);
  } catch (const c10::Error& e) {
    throw InputError(where + ": invalid random generator state (" + std::string(e.what_without_backtrace()) + ")");
  }
}

namespace {
// Deletes a checkpoint directory without ever leaving a half-deleted one under a
// "step-*" name: it is first renamed (atomically) to ".trash-<name>", then removed.
void discard_dir(const fs::path& ckdir, const fs::path& dir) {
  const fs::path trash = ckdir / (".trash-" + dir.filename().string());
  fs::remove_all(trash);
  fs::rename(dir, trash);
  fs::remove_all(trash);
}

// Puts the complete directory `tmp` in place of `final_dir`. When `final_dir` exists
// (an older save of the same step, e.g. after resuming from an earlier checkpoint),
// the two are swapped atomically (renameat2 RENAME_EXCHANGE), so `final_dir` is
// never missing even if the process dies here; the old contents end up in `tmp`.
void install_dir(const fs::path& ckdir, const fs::path& tmp, const fs::path& final_dir) {
  if (!fs::exists(final_dir)) {
    fs::rename(tmp, final_dir);
    return;
  }
  if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_EXCHANGE) == 0) {
    fs::remove_all(tmp);
    return;
  }
  discard_dir(ckdir, final_dir);  // file systems without RENAME_EXCHANGE
  fs::rename(tmp, final_dir);
}
}  // namespace

std::string save_checkpoint(const std::string& run_dir, const TrainableModel& model, const Optimizer& opt,
                            const TrainerState& state, const nlohmann::json& run_config, const nlohmann::json& extra,
                            int64_t keep_last, const std::vector<std::pair<std::string, std::string>>& files) {
  const fs::path ckdir = fs::path(run_dir) / "checkpoints";
  fs::create_directories(ckdir);
  // Leftovers of a process killed while saving or deleting (one writer per run).
  for (const auto& e : fs::directory_iterator(ckdir)) {
    const std::string n = e.path().filename().string();
    if (n.rfind(".tmp-", 0) == 0 || n.rfind(".trash-", 0) == 0) fs::remove_all(e.path());
  }
  const std::string name = checkpoint_name(state.step);
  const fs::path tmp = ckdir / (".tmp-" + name);
  const fs::path final_dir = ckdir / name;
  fs::create_directories(tmp);
  model.save(tmp.string(), extra);
  save_tensors((tmp / "optimizer.safetensors").string(), opt.state(), {{"format", "lol-optimizer"}});
  io::write_file_atomic((tmp / "trainer_state.json").string(), state.to_json().dump(2) + "\n");
  io::write_file_atomic((tmp / "run.json").string(), run_config.dump(2) + "\n");
  for (const auto& [name, bytes] : files) io::write_file_atomic((tmp / name).string(), bytes);
  io::fsync_dir(tmp.string());
  install_dir(ckdir, tmp, final_dir);
  io::fsync_dir(ckdir.string());
  io::write_file_atomic((fs::path(run_dir) / "latest").string(), "checkpoints/" + name + "\n");
  // Checkpoints numbered after this one belong to a timeline abandoned by resuming from
  // an earlier step (whose metrics lines the resume dropped): removed, so that `latest`
  // is the newest and keep_last counts this timeline (a stale later checkpoint survived
  // pruning and looked newer than `latest`).
  auto all = list_checkpoints(run_dir);
  while (!all.empty() && fs::path(all.back()).filename() != name) {
    discard_dir(ckdir, all.back());
    all.pop_back();
  }
  // Oldest first; the checkpoint just written (which `latest` names) is always kept.
  int64_t excess = int64_t(all.size()) - keep_last;
  for (size_t i = 0; i < all.size() && excess > 0; ++i) {
    if (fs::path(all[i]).filename() == name) continue;
    discard_dir(ckdir, all[i]);
    --excess;
  }
  io::fsync_dir(ckdir.string());
  return final_dir.string();
}

std::string resolve_checkpoint(const std::string& dir) {
  if (fs::exists(fs::path(dir) / "trainer_state.json")) return dir;
  const fs::path latest = fs::path(dir) / "latest";
  if (fs::exists(latest)) {
    std::string rel = io::read_file(latest.string());
    while (!rel.empty() && (rel.back() == '\n' || rel.back() == ' ')) rel.pop_back();
    const fs::path p = fs::path(dir) / rel;
    if (!fs::exists(p / "trainer_state.json"))
      throw InputError(latest.string() + ": points to '" + rel + "', which is not a checkpoint (no trainer_state.json)");
    return p.string();
  }
  // A process killed after installing its first checkpoint but before writing `latest`
  // leaves a complete checkpoint (save_checkpoint installs directories by rename) and no
  // pointer to it: the newest complete one is the run's latest.
  const auto all = list_checkpoints(dir);
  for (auto it = all.rbegin(); it != all.rend(); ++it)
    if (fs::exists(fs::path(*it) / "trainer_state.json")) return *it;
  throw InputError(dir + ": neither a checkpoint directory (trainer_state.json) nor a run directory (latest)");
}

TrainerState load_checkpoint(const std::string& ck, TrainableModel& model, Optimizer& opt) {
  const std::string state_path = ck + "/trainer_state.json";
  nlohmann::json j = io::read_json_file(state_path);
  TrainerState s = TrainerState::from_json(j, state_path);
  // The directory is named after the step it holds (save_checkpoint): an edited or
  // misplaced trainer_state.json would resume other optimizer moments at another step.
  const std::string dir_name = fs::path(ck).filename().string();
  if (dir_name.rfind("step-", 0) == 0 && dir_name != checkpoint_name(s.step))
    throw InputError(state_path + ": field 'step' = " + std::to_string(s.step) + ": expected the step of its directory " +
                     dir_name);
  model.load(ck);
  const int64_t growable = model.growable_depth();
  if (growable > 0 && (s.active_depth < 0 || s.active_depth > growable))
    throw InputError(state_path + ": field 'active_depth' = " + std::to_string(s.active_depth) + ": expected 0 <= " +
                     "active_depth <= core_depth = " + std::to_string(growable));
  const std::string opt_path = ck + "/optimizer.safetensors";
  opt.load_state(load_tensors(opt_path), opt_path);
  return s;
}

}  // namespace lol::training
