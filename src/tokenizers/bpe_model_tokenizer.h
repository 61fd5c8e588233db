// The part of a Tokenizer that looks tokens up in a BpeModel, shared by byte-level BPE
// (bpe_tokenizer.h) and SentencePiece-style BPE (sentencepiece_bpe.h).
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "tokenizers/bpe_model.h"
#include "tokenizers/tokenizer.h"

namespace lol::tokenizers {

class BpeModelTokenizer : public Tokenizer {
 public:
  std::string type() const override { return "bpe"; }
  const BpeModel& model() const { return *model_; }

 protected:
  explicit BpeModelTokenizer(std::shared_ptr<const BpeModel> model) : model_(std::move(model)) {}
  int32_t model_vocab_size() const override { return model_->size(); }
  int32_t model_entry_count() const override { return model_->entry_count(); }
  std::optional<int32_t> model_token_to_id(std::string_view token) const override { return model_->token_to_id(token); }
  std::optional<std::string> model_id_to_token(int32_t id) const override {
    const std::string* t = model_->id_to_token(id);
    if (!t) return std::nullopt;
    return *t;
  }

  std::shared_ptr<const BpeModel> model_;
};

}  // namespace lol::tokenizers
