// `lol export --hf RUN_OR_CKPT --out DIR`: a project-trained dense model as a Hugging
// Face folder (Qwen2 layout by default) that `lol hf` and transformers load (issue 10).
#include <iostream>
#include <memory>
#include <vector>

#include "baselines/dense_trainable.h"
#include "cli/commands.h"
#include "cli/model_dir.h"
#include "dataset/text_tokenizer.h"
#include "hf/hf_export.h"
#include "hf/hf_model.h"
#include "io/atomic_file.h"
#include "io/json_file.h"
#include "tokenizers/hf_json.h"
#include "util/error.h"

namespace fs = std::filesystem;

namespace lol::cli {

namespace {

struct ExportArgs {
  std::string model, out, tokenizer, arch, dtype = "float32", max_shard, verify;
  bool hf = false, overwrite = false, no_tokenizer = false;
};

/// "2GB", "500MB", "10KB", "123" (bytes; K/M/G are powers of 1000 as transformers).
int64_t parse_size(const std::string& s) {
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  const std::string unit = s.substr(used);
  double mult = 0;
  if (unit.empty() || unit == "B") mult = 1;
  else if (unit == "KB") mult = 1e3;
  else if (unit == "MB") mult = 1e6;
  else if (unit == "GB") mult = 1e9;
  const double bytes = v * mult;
  // At least one byte, and within 64 bits (an exabyte: larger means "no limit" and is
  // what leaving the flag out does).
  if (used == 0 || mult == 0 || !(bytes >= 1) || !(bytes <= 1e18))
    throw InputError("--max-shard-size \"" + s +
                     "\": expected a size of 1 byte to 1e18 bytes such as 2GB, 500MB or 100000 (leave the flag out "
                     "for one unsharded file)");
  return int64_t(bytes);
}

/// Reloads `out` through the Hugging Face loader and compares its logits with the
/// source model's (weights rounded to the stored dtype) on the first max_seq_len
/// tokens of `text_file`; first checks that the folder's tokenizer.json encodes the whole
/// file to the same ids. Prints the largest difference; std::runtime_error (exit 1) when
/// the ids or any logit differ.
void verify_export(baselines::DenseModel& model, const std::string& out, const std::string& text_file,
                   const std::string& text, std::vector<int32_t> ids, c10::ScalarType stored) {
  const int64_t n = std::min<int64_t>(int64_t(ids.size()), model->config().max_seq_len);
  // The exported tokenizer.json, read back the way `lol hf` reads a folder, must give the same ids.
  const auto back_ids = tokenizers::load_tokenizer(out)->encode(text);
  if (back_ids != ids)
    throw std::runtime_error("--verify: " + out + "/tokenizer.json encodes " + text_file +
                             " differently from the checkpoint's tokenizer (" + std::to_string(back_ids.size()) +
                             " vs " + std::to_string(ids.size()) + " tokens)");
  std::cout << "verify: " << out << "/tokenizer.json encodes " << text_file << " to the same " << ids.size()
            << " ids\n";
  auto tokens = torch::from_blob(ids.data(), {1, n}, torch::kInt32).to(torch::kInt64);
  auto back = hf::load_hf_model(out, torch::kFloat32);
  c10::InferenceMode guard;
  baselines::DenseModel src(model->config());
  for (auto& p : src->named_parameters())
    p.value().copy_(model->named_parameters()[p.key()].to(stored).to(torch::kFloat32));
  src->eval();
  const auto a = src->forward(tokens), b = back->forward(tokens);
  const double diff = (a - b).abs().max().item<double>();
  const bool rounded = stored != torch::kFloat32;
  std::cout << "verify: " << n << " tokens of " << text_file << ", logits [1, " << n << ", " << a.size(2)
            << "]: max |exported - source" << (rounded ? " rounded to " + std::string(c10::toString(stored)) : "")
            << "| = " << diff << (torch::equal(a, b) ? " (identical)" : "") << "\n";
  if (rounded) {
    // What the rounding itself costs: the exported folder against the float32 checkpoint.
    const double loss = (model->forward(tokens).to(torch::kFloat32) - b).abs().max().item<double>();
    std::cout << "verify: max |exported - float32 source| = " << loss << " (the rounding to "
              << c10::toString(stored) << ")\n";
  }
  if (diff != 0) throw std::runtime_error("--verify: the reloaded folder's logits differ from the checkpoint's");
}

void run_export(const ExportArgs& a) {
  if (!a.hf) throw InputError("export: only --hf (Hugging Face folder) is implemented; pass --hf");
  // A Hugging Face folder stores float32, bfloat16 or float16 (checked before anything is read).
  c10::ScalarType dtype = c10::kDouble;
  try {
    dtype = hf::parse_dtype_name(a.dtype, "--dtype");
  } catch (const InputError&) {
  }
  if (dtype == c10::kDouble) throw InputError("--dtype \"" + a.dtype + "\": expected float32, bfloat16 or float16");
  const std::string dir = resolve_model_dir(a.model);
  const std::string arch = model_architecture(dir);
  if (arch != "dense")
    throw InputError(dir + "/config.json: architecture \"" + arch +
                     "\": only dense models (architecture \"dense\") have a Hugging Face equivalent");
  auto model = baselines::load_dense(dir);
  std::unique_ptr<tokenizers::Tokenizer> tok;
  if (!a.no_tokenizer) {
    tok = model_tokenizer(dir, a.tokenizer, model->config().vocab_size);
    if (!tok)
      throw InputError(dir + ": no tokenizer.json here or in the training dataset named by config.json extra; pass "
                             "--tokenizer, or --no-tokenizer to export the weights only");
  } else {
    // No tokenizer files, but the model's bos/eos ids (transformers' generate() stops at
    // eos_token_id) when its tokenizer is found and loads; else null.
    try {
      tok = model_tokenizer(dir, "", model->config().vocab_size);
    } catch (const InputError& e) {
      std::cerr << "note: --no-tokenizer: the checkpoint's tokenizer does not load (" << e.what()
                << "); bos_token_id and eos_token_id are written as null\n";
    }
  }
  hf::ExportOptions o;
  o.architecture = !a.arch.empty() ? hf::architecture_from_name(a.arch) : hf::default_architecture(model->config());
  try {  // the model's layout against the architecture, naming the checkpoint's config.json
    hf::from_dense_config(model->config(), o.architecture, "float32");
  } catch (const InputError& e) {
    throw InputError(dir + "/config.json: " + e.what());
  }
  o.dtype = dtype;
  o.max_shard_bytes = a.max_shard.empty() ? 0 : parse_size(a.max_shard);
  o.overwrite = a.overwrite;
  o.save_tokenizer = !a.no_tokenizer;
  o.read_from = {a.model, dir};
  // --verify's input is checked before anything is written.
  std::string verify_text;
  std::vector<int32_t> verify_ids;
  if (!a.verify.empty()) {
    if (!tok || a.no_tokenizer) throw InputError("--verify needs a tokenizer (not --no-tokenizer)");
    try {
      verify_text = io::read_file(a.verify);
    } catch (const InputError& e) {
      throw InputError(std::string("--verify: ") + e.what());
    }
    try {
      verify_ids = tok->encode(verify_text);
    } catch (const InputError& e) {
      throw InputError("--verify " + a.verify + ": " + e.what());
    }
    if (verify_ids.empty()) throw InputError("--verify " + a.verify + ": no tokens");
  }
  // A failed export or verification removes what it wrote into a new (or empty) --out.
  std::error_code ec;
  const bool existed = fs::exists(a.out, ec);
  const bool was_empty_dir = existed && fs::is_directory(a.out, ec) && fs::is_empty(a.out, ec);
  try {
    const hf::HfConfig h = hf::export_hf(*model, tok.get(), a.out, o);
    std::cout << "exported " << dir << " -> " << a.out << " (" << h.architecture << ", " << h.num_hidden_layers
              << " layers, hidden " << h.hidden_size << ", vocab " << h.vocab_size << ", " << h.torch_dtype
              << (tok ? ", tokenizer" : ", no tokenizer") << ")\n";
    if (!a.verify.empty()) verify_export(model, a.out, a.verify, verify_text, std::move(verify_ids), o.dtype);
  } catch (...) {
    if (!existed || was_empty_dir) {
      if (!existed) fs::remove_all(a.out, ec);
      else
        for (const auto& e : fs::directory_iterator(a.out, ec)) fs::remove_all(e.path(), ec);
      std::cerr << "export: removed what was written into " << a.out << "\n";
    } else if (a.overwrite) {
      std::cerr << "export: " << a.out << " (--overwrite) may hold a partial or unverified export\n";
    }
    throw;
  }
}

}  // namespace

void register_export(CLI::App& app) {
  auto a = std::make_shared<ExportArgs>();
  auto* e = app.add_subcommand("export", "Export a trained dense model as a Hugging Face folder (--hf)");
  e->add_flag("--hf", a->hf, "Hugging Face layout: config.json, safetensors, tokenizer files")->required();
  e->add_option("model", a->model, "Checkpoint directory, or a training run directory (its latest checkpoint)")->required();
  e->add_option("--out", a->out, "Output folder (new or empty)")->required();
  e->add_option("--arch", a->arch,
                 "qwen2 (Qwen2ForCausalLM) | qwen3 (Qwen3ForCausalLM: a model with qk_norm) | llama (LlamaForCausalLM) | "
                 "mistral (MistralForCausalLM) | phi3 (Phi3ForCausalLM: fused qkv_proj / gate_up_proj) | olmo2 | olmo3 "
                 "(Olmo2ForCausalLM / Olmo3ForCausalLM: a model of OLMo's layout) | gemma | gemma2 | gemma3 "
                 "(GemmaForCausalLM / Gemma2ForCausalLM / Gemma3ForCausalLM: scaled embeddings) | gpt2 "
                 "(GPT2LMHeadModel: LayerNorms, learned positions) | gpt_neox (GPTNeoXForCausalLM: LayerNorms, RoPE, "
                 "parallel blocks) | phi (PhiForCausalLM: parallel blocks with one LayerNorm, lm_head bias) | stablelm "
                 "(StableLmForCausalLM: LayerNorms, gated MLP, partial rotary) | falcon (FalconForCausalLM: "
                 "LayerNorms, RoPE, parallel or sequential blocks, all biases or none) | gptj (GPTJForCausalLM: Phi's "
                 "blocks without attention biases, RoPE in interleaved pairs) | starcoder2 (Starcoder2ForCausalLM: "
                 "LayerNorms, ungated MLP, sequential blocks, a window on every layer) | gpt_bigcode (GPTBigCodeForCausalLM: "
                 "GPT-2's layout with one key/value head) | granite (GraniteForCausalLM: Llama's blocks with "
                 "embedding, attention, residual and logit multipliers) | cohere (CohereForCausalLM: parallel blocks with "
                 "one bias-free LayerNorm, gated MLP, interleaved RoPE, logit_scale) | opt (OPTForCausalLM: GPT-2's "
                 "layout with the ReLU, all biases or none) "
                 "(default: opt for GPT-2's layout with the ReLU or without biases, gpt2 for GPT-2's layout (gpt_bigcode with one key/value head), gpt_neox for GPT-NeoX's, phi for Phi's, stablelm for StableLM's, starcoder2 for GPT-NeoX's sequential blocks with a window or grouped-query attention, falcon for other grouped-query attention or Phi's with tied embeddings, olmo2/olmo3 for OLMo's, gemma/gemma2/gemma3 for Gemma's, granite for "
                 "a model with Granite's multipliers, cohere for one with logit_scale, qwen3 for a model with qk_norm, else qwen2)");
  e->add_option("--dtype", a->dtype, "Stored dtype: float32 | bfloat16 | float16")->capture_default_str();
  e->add_option("--max-shard-size", a->max_shard, "Split the weights into shards of at most this size (e.g. 2GB)");
  auto* tokenizer = e->add_option("--tokenizer", a->tokenizer, "Tokenizer to include: 'byte', a tokenizer.json or its directory (default: the one the checkpoint was trained with)");
  e->add_flag("--no-tokenizer", a->no_tokenizer, "Write no tokenizer files")->excludes(tokenizer);
  e->add_flag("--overwrite", a->overwrite, "Allow an --out folder holding an earlier export (all of its files are replaced; anything else is refused)");
  e->add_option("--verify", a->verify,
                "Reload the folder and check that its logits equal the checkpoint's on this text file's first tokens");
  e->callback([a] { run_export(*a); });
}

}  // namespace lol::cli
