#include "training/batcher.h"

#include <algorithm>

#include "util/error.h"
#include "util/random.h"

namespace lol::training {

std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> p(size_t(std::max<int64_t>(n, 0)));
  for (int64_t i = 0; i < n; ++i) p[size_t(i)] = i;
  uint64_t s = seed * 0xD1B54A32D192ED03ull + uint64_t(epoch) * 0x9E3779B97F4A7C15ull + 0x5851F42D4C957F2Dull;
  for (int64_t i = n - 1; i > 0; --i) {
    // Unbiased bounded draw by rejection.
    const uint64_t bound = uint64_t(i) + 1;
    const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
    uint64_t r;
    do {
      r = util::splitmix64(s);
      s += 0x9E3779B97F4A7C15ull;
    } while (r >= limit);
    std::swap(p[size_t(i)], p[size_t(r % bound)]);
  }
  return p;
}

std::vector<int64_t> shard_order(const std::vector<int64_t>& order, const Shard& s, bool equal_length) {
  if (s.count == 1) return order;
  const int64_t n = int64_t(order.size());
  const int64_t limit = equal_length ? n / s.count : n;
  std::vector<int64_t> out;
  out.reserve(size_t(n / s.count + 1));
  for (int64_t i = s.rank; i < n && int64_t(out.size()) < limit; i += s.count) out.push_back(order[size_t(i)]);
  return out;
}

Batcher::Batcher(const data::SplitData& split, const BatchLayout& layout, uint64_t seed, bool shuffle, bool wrap,
                 std::string where, Shard shard)
    : split_(split), layout_(layout), seed_(seed), shuffle_(shuffle), wrap_(wrap), where_(std::move(where)),
      shard_(shard) {
  if (split_.size() == 0) throw InputError(where_ + ": the split has no sequences");
  if (shard_.count < 1 || shard_.rank < 0 || shard_.rank >= shard_.count)
    throw InputError(where_ + ": data shard " + std::to_string(shard_.rank) + " of " + std::to_string(shard_.count) +
                     " is invalid (expected 0 <= rank < count)");
  if (wrap_ && split_.size() < shard_.count)
    throw InputError(where_ + ": the split has " + std::to_string(split_.size()) + " sequences, fewer than the " +
                     std::to_string(shard_.count) + " data-parallel processes (each needs at least one)");
  if (layout_.pack) {
    if (split_.total_tokens() == 0) throw InputError(where_ + ": the split has no tokens");
    max_len_ = layout_.seq_len;
  } else {
    int64_t longest = 0, longest_i = 0;
    for (int64_t i = 0; i < split_.size(); ++i) {
      const int64_t len = split_.get(i).length;
      if (len > longest) longest = len, longest_i = i;
    }
    if (longest == 0) throw InputError(where_ + ": every sequence is empty");
    if (layout_.seq_len > 0 && longest > layout_.seq_len)
      throw InputError(where_ + ": sequence " + std::to_string(longest_i) + " has " + std::to_string(longest) +
                       " tokens, more than " + layout_.seq_len_setting + " = " + std::to_string(layout_.seq_len) +
                       " (raise " + layout_.seq_len_setting +
                       (layout_.seq_len_setting == "data.seq_len"
                            ? ", set it to 0 for the longest sequence within model.max_seq_len, or pack documents "
                              "into rows with data.packing = \"pack\")"
                        : layout_.seq_len_setting == "--seq-len" ? ", or evaluate in sliding windows with --stride)"
                                                                 : ")"));
    max_len_ = layout_.seq_len > 0 ? layout_.seq_len : longest;
  }
  start_epoch(0);
}

void Batcher::start_epoch(int64_t e) {
  epoch_ = e;
  index_ = 0;
  offset_ = 0;
  if (shuffle_) {
    order_ = shard_order(epoch_permutation(split_.size(), seed_, e), shard_, wrap_);
  } else if (order_.empty()) {
    std::vector<int64_t> all(size_t(split_.size()));
    for (int64_t i = 0; i < split_.size(); ++i) all[size_t(i)] = i;
    order_ = shard_order(all, shard_, wrap_);
  }
  if (order_.empty()) done_ = true;  // evaluation shard of a split smaller than the job
}

void Batcher::advance_sequence() {
  offset_ = 0;
  if (++index_ >= int64_t(order_.size())) {
    if (wrap_) start_epoch(epoch_ + 1);
    else done_ = true;
  }
}

TrainBatch Batcher::next() {
  if (done_) throw std::logic_error("Batcher::next() after the end of a non-wrapping pass");
  std::vector<std::vector<int32_t>> toks;
  std::vector<std::vector<int64_t>> docs;
  std::vector<std::vector<uint8_t>> masks, routers;
  std::vector<int64_t> prompts;
  for (int64_t r = 0; r < layout_.batch_size && !done_; ++r) {
    std::vector<int32_t> t;
    std::vector<int64_t> d;
    std::vector<uint8_t> m, ro;
    int64_t prompt = 0;
    if (!layout_.pack) {
      auto s = split_.get(order_[size_t(index_)]);
      t.assign(s.tokens, s.tokens + s.length);
      d.assign(size_t(s.length), 0);
      if (s.loss_mask) m.assign(s.loss_mask, s.loss_mask + s.length);
      else m.assign(size_t(s.length), 1);
      if (s.router_only) ro.assign(s.router_only, s.router_only + s.length);
      else ro.assign(size_t(s.length), 0);
      prompt = s.prompt_len;
      advance_sequence();
    } else {
      int64_t doc = 0;
      while (int64_t(t.size()) < layout_.seq_len && !done_) {
        auto s = split_.get(order_[size_t(index_)]);
        if (t.empty() && offset_ == 0) prompt = s.prompt_len;
        const int64_t take = std::min(s.length - offset_, layout_.seq_len - int64_t(t.size()));
        for (int64_t i = offset_; i < offset_ + take; ++i) {
          t.push_back(s.tokens[i]);
          d.push_back(doc);
          m.push_back(s.loss_mask ? s.loss_mask[i] : 1);
          ro.push_back(s.router_only ? s.router_only[i] : 0);
        }
        offset_ += take;
        if (offset_ >= s.length) advance_sequence();
        ++doc;
      }
    }
    toks.push_back(std::move(t));
    docs.push_back(std::move(d));
    masks.push_back(std::move(m));
    routers.push_back(std::move(ro));
    prompts.push_back(prompt);
  }
  return assemble_batch(toks, docs, masks, routers, prompts);
}

TrainBatch assemble_batch(const std::vector<std::vector<int32_t>>& tokens, const std::vector<std::vector<int64_t>>& doc,
                          const std::vector<std::vector<uint8_t>>& loss_mask,
                          const std::vector<std::vector<uint8_t>>& router_only, const std::vector<int64_t>& prompt_len) {
  const int64_t B = int64_t(tokens.size());
  int64_t T = 1;
  for (const auto& r : tokens) T = std::max<int64_t>(T, int64_t(r.size()));
  TrainBatch b;
  b.tokens = torch::zeros({B, T}, torch::kInt64);
  b.targets = torch::full({B, T}, -100, torch::kInt64);
  b.target_mask = torch::zeros({B, T}, torch::kBool);
  b.doc_ids = torch::full({B, T}, -1, torch::kInt64);
  b.prompt_len = torch::zeros({B}, torch::kInt64);
  b.router_only = torch::zeros({B, T}, torch::kBool);
  auto* tp = b.tokens.data_ptr<int64_t>();
  auto* gp = b.targets.data_ptr<int64_t>();
  auto* mp = b.target_mask.data_ptr<bool>();
  auto* dp = b.doc_ids.data_ptr<int64_t>();
  auto* pp = b.prompt_len.data_ptr<int64_t>();
  auto* rp = b.router_only.data_ptr<bool>();
  for (int64_t r = 0; r < B; ++r) {
    const int64_t n = int64_t(tokens[r].size());
    pp[r] = prompt_len[r];
    for (int64_t t = 0; t < n; ++t) {
      tp[r * T + t] = tokens[r][t];
      dp[r * T + t] = doc[r][t];
      rp[r * T + t] = router_only[r][t] != 0;
      b.n_tokens++;
      if (t + 1 < n && doc[r][t + 1] == doc[r][t] && loss_mask[r][t + 1]) {
        gp[r * T + t] = tokens[r][t + 1];
        mp[r * T + t] = true;
        b.n_targets++;
      }
    }
  }
  return b;
}

TrainBatch to_device(const TrainBatch& b, const torch::Device& dev) {
  TrainBatch o = b;
  o.tokens = b.tokens.to(dev);
  o.targets = b.targets.to(dev);
  o.target_mask = b.target_mask.to(dev);
  o.doc_ids = b.doc_ids.to(dev);
  o.prompt_len = b.prompt_len.to(dev);
  o.router_only = b.router_only.to(dev);
  return o;
}

nlohmann::json Batcher::position() const { return {{"epoch", epoch_}, {"index", index_}, {"offset", offset_}}; }

void Batcher::set_position(const nlohmann::json& pos, const std::string& where) {
  if (!pos.is_object() || !pos.contains("epoch") || !pos.contains("index") || !pos.contains("offset") ||
      !pos["epoch"].is_number_integer() || !pos["index"].is_number_integer() || !pos["offset"].is_number_integer())
    throw InputError(where + ": data position must be {\"epoch\", \"index\", \"offset\"} integers");
  const int64_t e = pos["epoch"], i = pos["index"], o = pos["offset"];
  if (e < 0 || i < 0 || i >= int64_t(order_.size()) || o < 0)
    throw InputError(where + ": data position (epoch " + std::to_string(e) + ", index " + std::to_string(i) +
                     ") is outside the split of " + std::to_string(order_.size()) +
                     " sequences read by this process (a different dataset?)");
  start_epoch(e);
  index_ = i;
  if (o >= split_.get(order_[size_t(i)]).length && o != 0)
    throw InputError(where + ": data position offset " + std::to_string(o) + " is beyond sequence " +
                     std::to_string(order_[size_t(i)]) + " (a different dataset?)");
  offset_ = o;
  done_ = false;
}

}  // namespace lol::training
