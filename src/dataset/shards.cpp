#include "dataset/shards.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

#include "io/atomic_file.h"
#include "io/json_file.h"
#include "io/safetensors.h"
#include "util/error.h"
#include "util/json_fields.h"

namespace fs = std::filesystem;

namespace lol::data {

SequenceView SplitData::get(int64_t i) const {
  SequenceView v;
  const int64_t b = offsets_[i];
  v.tokens = tokens_.data() + b;
  v.length = offsets_[i + 1] - b;
  if (!loss_mask_.empty()) v.loss_mask = loss_mask_.data() + b;
  if (!router_only_.empty()) v.router_only = router_only_.data() + b;
  v.prompt_len = prompt_len_[i];
  if (!label_.empty()) v.label = label_[i];
  return v;
}

namespace {
template <typename T>
std::vector<T> read_array(const io::SafetensorsFile& f, const std::string& name, io::DType want) {
  const auto& e = f.entry(name);
  if (e.dtype != want)
    throw InputError(f.path() + ": array '" + name + "' has dtype " + io::dtype_name(e.dtype) + ", expected " +
                     io::dtype_name(want));
  if (e.shape.size() != 1) throw InputError(f.path() + ": array '" + name + "' must be 1-D");
  std::vector<T> out(size_t(e.numel()));
  if (!out.empty()) std::memcpy(out.data(), f.data(e), out.size() * sizeof(T));
  return out;
}
}  // namespace

void SplitData::append_shard(const std::string& path, int64_t vocab_size) {
  auto f = io::SafetensorsFile::read(path);
  const auto& te = f.entry("tokens");
  std::vector<int32_t> toks;
  if (te.dtype == io::DType::U16) {
    auto raw = read_array<uint16_t>(f, "tokens", io::DType::U16);
    toks.assign(raw.begin(), raw.end());
  } else if (te.dtype == io::DType::U32) {
    auto raw = read_array<uint32_t>(f, "tokens", io::DType::U32);
    for (auto t : raw) {
      if (t > uint32_t(INT32_MAX)) throw InputError(path + ": array 'tokens': id " + std::to_string(t) + " too large");
      toks.push_back(int32_t(t));
    }
  } else {
    throw InputError(path + ": array 'tokens' has dtype " + io::dtype_name(te.dtype) + ", expected U16 or U32");
  }
  for (size_t i = 0; i < toks.size(); ++i)
    if (toks[i] >= vocab_size)
      throw InputError(path + ": array 'tokens'[" + std::to_string(i) + "] = " + std::to_string(toks[i]) +
                       ": expected < vocab_size = " + std::to_string(vocab_size));
  auto offs = read_array<int64_t>(f, "offsets", io::DType::I64);
  if (offs.empty() || offs.front() != 0 || offs.back() != int64_t(toks.size()))
    throw InputError(path + ": array 'offsets' must start at 0 and end at the token count " + std::to_string(toks.size()));
  for (size_t i = 1; i < offs.size(); ++i)
    if (offs[i] < offs[i - 1]) throw InputError(path + ": array 'offsets' must be non-decreasing (index " + std::to_string(i) + ")");
  const size_t n_seq = offs.size() - 1;
  auto opt_u8 = [&](const std::string& name, std::vector<uint8_t>& dst, bool have_before) {
    std::vector<uint8_t> a;
    if (f.contains(name)) {
      a = read_array<uint8_t>(f, name, io::DType::U8);
      if (a.size() != toks.size())
        throw InputError(path + ": array '" + name + "' has " + std::to_string(a.size()) + " entries, expected " +
                         std::to_string(toks.size()));
    }
    const bool have_now = !a.empty() || (toks.empty() && f.contains(name));
    if (have_now && !have_before && !tokens_.empty()) dst.assign(tokens_.size(), name == "loss_mask" ? 1 : 0);
    if (have_now || have_before) {
      if (a.empty()) a.assign(toks.size(), name == "loss_mask" ? 1 : 0);
      dst.insert(dst.end(), a.begin(), a.end());
    }
  };
  opt_u8("loss_mask", loss_mask_, !loss_mask_.empty());
  opt_u8("router_only", router_only_, !router_only_.empty());
  std::vector<int32_t> pl(n_seq, 0);
  if (f.contains("prompt_len")) {
    pl = read_array<int32_t>(f, "prompt_len", io::DType::I32);
    if (pl.size() != n_seq) throw InputError(path + ": array 'prompt_len' must have one entry per sequence");
    for (size_t s = 0; s < n_seq; ++s)
      if (pl[s] < 0 || pl[s] > offs[s + 1] - offs[s])
        throw InputError(path + ": array 'prompt_len'[" + std::to_string(s) + "] = " + std::to_string(pl[s]) +
                         ": expected 0 <= prompt_len <= sequence length");
  }
  if (f.contains("label")) {
    auto lb = read_array<int64_t>(f, "label", io::DType::I64);
    if (lb.size() != n_seq) throw InputError(path + ": array 'label' must have one entry per sequence");
    if (label_.empty()) label_.assign(prompt_len_.size(), -1);
    label_.insert(label_.end(), lb.begin(), lb.end());
  } else if (!label_.empty()) {
    label_.insert(label_.end(), n_seq, -1);
  }
  const int64_t base = int64_t(tokens_.size());
  tokens_.insert(tokens_.end(), toks.begin(), toks.end());
  for (size_t i = 1; i < offs.size(); ++i) offsets_.push_back(base + offs[i]);
  prompt_len_.insert(prompt_len_.end(), pl.begin(), pl.end());
}

Dataset Dataset::open(const std::string& dir) {
  Dataset d;
  d.dir_ = dir;
  const std::string path = dir + "/dataset.json";
  if (!fs::exists(path)) throw InputError(dir + ": not a dataset directory (no dataset.json)");
  d.info_ = io::read_json_file(path);
  util::JsonFields f(d.info_, path);
  f.get("format", std::string(), {"lol-dataset"});
  int64_t version = 0;
  f.get("version", version);
  require(version == 1, path, "field 'version' = " + std::to_string(version) + ": expected 1");
  f.get("vocab_size", d.vocab_size_);
  util::check_range(path, "vocab_size", d.vocab_size_, 1, int64_t(1) << 31);
  const auto* splits = f.raw("splits");
  require(splits && splits->is_object(), path, "field 'splits' must be an object of shard lists");
  for (auto it = splits->begin(); it != splits->end(); ++it) {
    require(it.value().is_array(), path, "field 'splits." + it.key() + "' must be a list of shard files");
    for (const auto& s : it.value()) require(s.is_string(), path, "field 'splits." + it.key() + "' must hold file names");
  }
  if (const auto* t = f.raw("tokenizer"))
    require(t->is_string() && !t->get<std::string>().empty(), path,
            "field 'tokenizer' = " + t->dump() + ": expected the tokenizer's file name (a string, relative to " + dir + ")");
  // The optional fields' types, so that no later reader meets a wrong-typed value.
  if (const auto* t = f.raw("task"))
    require(t->is_string() && !t->get<std::string>().empty(), path,
            "field 'task' = " + t->dump() + ": expected a task name (\"maze\", \"sudoku\", \"text\", ...)");
  for (const char* k : {"stats", "meta", "vocab"})
    if (const auto* o = f.raw(k)) require(o->is_object(), path, std::string("field '") + k + "': expected an object");
  if (const auto* o = f.raw("labels"))
    require(o->is_array() || o->is_object(), path, "field 'labels': expected an array of names or an object");
  if (const auto* m = f.raw("meta"); m && m->contains("size")) {
    const auto& sz = (*m)["size"];
    const bool maze = d.task() == "maze";
    require(sz.is_number_integer() && (!maze || (sz.get<int64_t>() >= 4 && sz.get<int64_t>() <= 16)), path,
            "field 'meta.size' = " + sz.dump() + (maze ? ": expected the maze side, an integer 4 <= size <= 16"
                                                       : ": expected an integer"));
  }
  for (const char* k : {"task", "vocab", "tokenizer", "stats", "meta", "labels"}) f.allow(k);
  f.reject_unknown();
  return d;
}

std::string Dataset::task() const { return info_.value("task", std::string("text")); }

bool Dataset::has_split(const std::string& split) const { return info_["splits"].contains(split); }

SplitData Dataset::load(const std::string& split) const {
  if (!has_split(split)) {
    std::string have;
    for (auto it = info_["splits"].begin(); it != info_["splits"].end(); ++it)
      have += (have.empty() ? "" : ", ") + it.key();
    throw InputError(dir_ + "/dataset.json: no split '" + split + "' (its splits: " + (have.empty() ? "none" : have) +
                     "; a command's --split chooses another)");
  }
  SplitData s;
  for (const auto& name : info_["splits"][split]) s.append_shard(dir_ + "/" + name.get<std::string>(), vocab_size_);
  return s;
}

ShardWriter::ShardWriter(std::string dir, std::string split, int64_t vocab_size, int64_t shard_tokens)
    : dir_(std::move(dir)), split_(std::move(split)), vocab_size_(vocab_size), shard_tokens_(shard_tokens) {
  io::create_dirs(dir_);
}

void ShardWriter::add(const std::vector<int32_t>& tokens, const std::vector<uint8_t>& loss_mask,
                      const std::vector<uint8_t>& router_only, int32_t prompt_len, int64_t label) {
  for (auto t : tokens)
    if (t < 0 || t >= vocab_size_)
      throw InputError("ShardWriter: token id " + std::to_string(t) + " outside [0, " + std::to_string(vocab_size_) + ")");
  if (!loss_mask.empty() && loss_mask.size() != tokens.size()) throw InputError("ShardWriter: loss_mask length mismatch");
  if (!router_only.empty() && router_only.size() != tokens.size()) throw InputError("ShardWriter: router_only length mismatch");
  const size_t base = tokens_.size();
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  if (!loss_mask.empty() && !any_loss_) {
    any_loss_ = true;
    loss_mask_.assign(base, 1);
  }
  if (any_loss_) {
    if (loss_mask.empty()) loss_mask_.insert(loss_mask_.end(), tokens.size(), 1);
    else loss_mask_.insert(loss_mask_.end(), loss_mask.begin(), loss_mask.end());
  }
  if (!router_only.empty() && !any_router_) {
    any_router_ = true;
    router_only_.assign(base, 0);
  }
  if (any_router_) {
    if (router_only.empty()) router_only_.insert(router_only_.end(), tokens.size(), 0);
    else router_only_.insert(router_only_.end(), router_only.begin(), router_only.end());
  }
  if (label >= 0 && !any_label_) {
    any_label_ = true;
    label_.assign(prompt_len_.size(), -1);
  }
  if (any_label_) label_.push_back(label);
  prompt_len_.push_back(prompt_len);
  offsets_.push_back(int64_t(tokens_.size()));
  n_seq_total_++;
  n_tok_total_ += int64_t(tokens.size());
  if (int64_t(tokens_.size()) >= shard_tokens_) flush();
}

void ShardWriter::flush() {
  if (prompt_len_.empty()) return;
  char name[64];
  std::snprintf(name, sizeof name, "%s-%05d.safetensors", split_.c_str(), int(files_.size()));
  std::vector<io::TensorBlob> blobs;
  std::vector<uint16_t> t16;
  std::vector<uint32_t> t32;
  const int64_t n = int64_t(tokens_.size());
  if (vocab_size_ <= 65536) {
    t16.assign(tokens_.begin(), tokens_.end());
    blobs.push_back({"tokens", io::DType::U16, {n}, t16.data(), t16.size() * 2});
  } else {
    t32.assign(tokens_.begin(), tokens_.end());
    blobs.push_back({"tokens", io::DType::U32, {n}, t32.data(), t32.size() * 4});
  }
  blobs.push_back({"offsets", io::DType::I64, {int64_t(offsets_.size())}, offsets_.data(), offsets_.size() * 8});
  if (any_loss_) blobs.push_back({"loss_mask", io::DType::U8, {n}, loss_mask_.data(), loss_mask_.size()});
  if (any_router_) blobs.push_back({"router_only", io::DType::U8, {n}, router_only_.data(), router_only_.size()});
  blobs.push_back({"prompt_len", io::DType::I32, {int64_t(prompt_len_.size())}, prompt_len_.data(), prompt_len_.size() * 4});
  if (any_label_) blobs.push_back({"label", io::DType::I64, {int64_t(label_.size())}, label_.data(), label_.size() * 8});
  io::write_safetensors(dir_ + "/" + name, blobs,
                        {{"n_sequences", std::to_string(prompt_len_.size())}, {"n_tokens", std::to_string(n)}});
  files_.push_back(name);
  tokens_.clear();
  loss_mask_.clear();
  router_only_.clear();
  offsets_.assign(1, 0);
  prompt_len_.clear();
  label_.clear();
}

std::vector<std::string> ShardWriter::finish() {
  flush();
  return files_;
}

void require_no_dataset(const std::string& dir, const std::string& flag) {
  if (fs::exists(fs::path(dir) / "dataset.json"))
    throw InputError(flag + " " + dir + ": already holds a dataset (dataset.json); remove it or choose another directory");
}

bool is_shard_name(const std::string& name) {
  const auto dash = name.rfind('-');
  static const std::string ext = ".safetensors";
  if (dash == std::string::npos || dash == 0 || name.size() != dash + 1 + 5 + ext.size()) return false;
  if (name.compare(dash + 6, ext.size(), ext) != 0) return false;
  for (size_t i = dash + 1; i < dash + 6; ++i)
    if (name[i] < '0' || name[i] > '9') return false;
  const std::string split = name.substr(0, dash);
  return split.find_first_not_of("abcdefghijklmnopqrstuvwxyz_") == std::string::npos;
}

int remove_unlisted_shards(const std::string& dir, const nlohmann::json& splits) {
  std::set<std::string> listed;
  if (splits.is_object())
    for (const auto& [split, files] : splits.items())
      if (files.is_array())
        for (const auto& f : files)
          if (f.is_string()) listed.insert(f.get<std::string>());
  std::error_code ec;
  int removed = 0;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (!is_shard_name(name) || listed.count(name)) continue;
    if (!fs::is_regular_file(it->symlink_status(ec))) continue;
    if (fs::remove(it->path(), ec)) ++removed;
  }
  return removed;
}

void write_dataset_info(const std::string& dir, const nlohmann::json& info, bool remove_stale) {
  io::create_dirs(dir);
  // Shards of an earlier run into `dir` that was stopped before its dataset.json: the
  // new dataset.json would not list them, and nothing would ever read them.
  if (const int n = remove_stale ? remove_unlisted_shards(dir, info.contains("splits") ? info.at("splits") : nlohmann::json()) : 0)
    std::fprintf(stderr, "note: removed %d shard%s of an interrupted run from %s (not listed in the new dataset.json)\n",
                 n, n == 1 ? "" : "s", dir.c_str());
  io::write_file_atomic(dir + "/dataset.json", info.dump(2) + "\n");
}

}  // namespace lol::data
