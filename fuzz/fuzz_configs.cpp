// libFuzzer target: the JSON readers that live in LibTorch folders but do not use
// LibTorch, fed one JSON document each: the LoL model config.json
// (src/lol/config.h), the Hugging Face config.json (src/hf/hf_config.h), the
// safetensors shard index model.safetensors.index.json (src/hf/hf_files.h), routing
// paths (src/lol/routing_path.h), LayerRoute LoRA and gate configs
// (src/layerroute/config.h), and run.json with "--set" overrides
// (src/training/run_config.h).
//
// Input: a JSON document, optionally followed by "\n#set\n" and override lines
// ("section.key=value", one per line) that are applied before RunConfig::from_json.
// Invalid JSON is skipped (the file readers turn it into an InputError before any of
// these parsers runs). Besides the rule of every target (only lol::InputError may
// escape), each accepted config must survive its own writer: from_json(to_json(c)) is
// accepted and writes the same document again.
#include <cstdint>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "hf/hf_config.h"
#include "hf/hf_files.h"
#include "layerroute/config.h"
#include "lol/config.h"
#include "lol/routing_path.h"
#include "training/run_config.h"
#include "util/error.h"

namespace {

/// Parses `j`; when accepted, checks that the written form parses and re-writes identically.
template <class Parse, class Dump>
void check_round_trip(const char* what, const nlohmann::json& j, Parse parse, Dump dump) {
  std::string once;
  try {
    once = nlohmann::json(dump(parse(j))).dump();
  } catch (const lol::InputError&) {
    return;
  }
  try {
    const std::string twice = nlohmann::json(dump(parse(nlohmann::json::parse(once)))).dump();
    if (twice != once) {
      std::fprintf(stderr, "%s: round trip changed the document:\n%s\n%s\n", what, once.c_str(), twice.c_str());
      __builtin_trap();
    }
  } catch (const lol::InputError& e) {
    std::fprintf(stderr, "%s: its own output was refused: %s\n%s\n", what, e.what(), once.c_str());
    __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto [doc, overrides] = lol::fuzz::split_input(data, size, "\n#set\n");
  nlohmann::json j = nlohmann::json::parse(doc, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;

  check_round_trip("LoLConfig", j, [](const nlohmann::json& x) { return lol::LoLConfig::from_json(x, "config.json"); },
                   [](const lol::LoLConfig& c) { return c.to_json(); });
  check_round_trip(
      "HfConfig", j, [](const nlohmann::json& x) { return lol::hf::HfConfig::from_json(x, "config.json"); },
      [](const lol::hf::HfConfig& c) { return nlohmann::json::parse(c.to_json().dump()); });
  check_round_trip(
      "RoutingPath", j, [](const nlohmann::json& x) { return lol::RoutingPath::from_json(x, "path.json"); },
      [](const lol::RoutingPath& p) { return p.to_json(); });
  check_round_trip(
      "LoraConfig", j,
      [](const nlohmann::json& x) { return lol::layerroute::lora_config_from_json(x, "lora"); },
      [](const lol::layerroute::LoraConfig& c) { return lol::layerroute::to_json(c); });
  check_round_trip(
      "GateConfig", j,
      [](const nlohmann::json& x) { return lol::layerroute::gate_config_from_json(x, "gates"); },
      [](const lol::layerroute::GateConfig& c) { return lol::layerroute::to_json(c); });
  try {
    const auto w = lol::hf::parse_weight_index(j, "model", "model.safetensors.index.json");
    for (const auto& [name, file] : w.tensor_shard)
      if (name.empty() || file.empty() || file.find('/') != std::string::npos) __builtin_trap();
  } catch (const lol::InputError&) {
  }

  nlohmann::json run = j;
  try {
    std::string_view rest = overrides;
    while (!rest.empty()) {
      const auto nl = rest.find('\n');
      lol::training::apply_override(run, std::string(rest.substr(0, nl)));
      rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    }
  } catch (const lol::InputError&) {
    return 0;
  }
  check_round_trip(
      "RunConfig", run, [](const nlohmann::json& x) { return lol::training::RunConfig::from_json(x, "run.json"); },
      [](const lol::training::RunConfig& c) { return c.to_json(); });
  return 0;
}
