#include "cli/model_dir.h"

#include <filesystem>
#include <fstream>

#include "inference/generate.h"
#include "util/error.h"

namespace fs = std::filesystem;

namespace lol::cli {

std::string resolve_model_dir(const std::string& dir) {
  if (fs::exists(dir + "/config.json")) return dir;
  const std::string latest = dir + "/latest";
  if (fs::is_symlink(latest) || fs::is_directory(latest)) {
    if (fs::exists(latest + "/config.json")) return latest;
  }
  if (fs::is_regular_file(latest)) {
    std::ifstream in(latest);
    std::string name;
    std::getline(in, name);
    for (const std::string& cand : {name, dir + "/" + name, dir + "/checkpoints/" + name})
      if (!name.empty() && fs::exists(cand + "/config.json")) return cand;
  }
  throw InputError(dir + ": not a model directory (no config.json) and not a run directory with a 'latest' checkpoint");
}

RoutingPath load_routing_path_for(const std::string& file, int64_t library_size, int64_t active_depth) {
  RoutingPath path = RoutingPath::load(file);
  if (path.library_size != library_size)
    throw InputError(file + ": field 'library_size' = " + std::to_string(path.library_size) +
                     ": the model has library_size = " + std::to_string(library_size) + " (a path of another model?)");
  if (active_depth > 0 && path.depth() > active_depth)
    throw InputError(file + ": field 'core_depth' = " + std::to_string(path.depth()) + ": the model runs " +
                     std::to_string(active_depth) + " routed depths");
  return path;
}

/// Greedy cached batched decoding (src/inference) behind the analysis GenerateFn interface.
static std::vector<std::vector<int64_t>> generate_cached(LoLModel& model, const std::vector<analysis::PromptSpec>& prompts,
                                                         const RoutingPath* force, int64_t max_new, int64_t eos) {
  std::vector<inference::Prompt> ps;
  ps.reserve(prompts.size());
  for (const auto& p : prompts) {
    inference::Prompt q;
    q.tokens = p.tokens;
    q.router_only = p.router_only;
    q.prompt_len = p.prompt_len;
    q.force = force;
    ps.push_back(std::move(q));
  }
  inference::GenerateOptions opt;
  opt.max_new_tokens = max_new;
  opt.stop_tokens = {eos};
  opt.batch_size = int64_t(prompts.size());
  auto gens = inference::generate(model, ps, opt);
  std::vector<std::vector<int64_t>> out;
  out.reserve(gens.size());
  for (auto& g : gens) out.push_back(std::move(g.tokens));
  return out;
}

analysis::GenerateFn default_generator(bool cached) {
  // The cached decoder (src/inference) is tested equal to the full forward
  // (tests/inference/test_decode_exact.cpp); full recompute stays as the reference.
  if (cached) return generate_cached;
  return analysis::generate_full_recompute;
}

}  // namespace lol::cli
