#include "core/environment.h"

#include <dlfcn.h>

#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <iterator>
#include <sstream>
#include <utility>
#include <vector>

#include "core/runtime.h"

namespace lol {

namespace {

/// A C string returned by an OpenBLAS query (looked up at run time), or null JSON.
nlohmann::json openblas_string(const char* symbol) {
  using Query = char* (*)();
  const auto fn = reinterpret_cast<Query>(dlsym(RTLD_DEFAULT, symbol));
  if (!fn) return nullptr;
  const char* s = fn();
  if (!s) return nullptr;
  std::string v(s);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\n')) v.pop_back();
  return v;
}

/// An int returned by an OpenBLAS query (looked up at run time), or null JSON.
nlohmann::json openblas_int(const char* symbol) {
  using Query = int (*)();
  const auto fn = reinterpret_cast<Query>(dlsym(RTLD_DEFAULT, symbol));
  if (!fn) return nullptr;
  return fn();
}

/// "CPU capability usage: AVX2" from at::show_config(), or null JSON.
nlohmann::json aten_cpu_capability() {
  const std::string cfg = at::show_config();
  const std::string key = "CPU capability usage:";
  const auto pos = cfg.find(key);
  if (pos == std::string::npos) return nullptr;
  std::string v = cfg.substr(pos + key.size(), cfg.find('\n', pos) - pos - key.size());
  v.erase(0, v.find_first_not_of(' '));
  return v;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  const auto e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

/// The "key : value" lines of the first processor's block of /proc/cpuinfo (empty when the
/// file is missing or unreadable).
std::vector<std::pair<std::string, std::string>> first_processor_fields() {
  std::vector<std::pair<std::string, std::string>> fields;
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) break;  // the end of the first processor's block
    const auto colon = line.find(':');
    if (colon != std::string::npos) fields.emplace_back(trim(line.substr(0, colon)), trim(line.substr(colon + 1)));
  }
  return fields;
}

/// The fields of /proc/cpuinfo that identify the CPU, and the vector extensions that
/// kernels dispatch on among its feature flags (x86 "flags", Arm "Features").
nlohmann::json cpu_info() {
  static const char* kIsa[] = {"sse4_2",      "avx",         "avx2",        "fma",      "f16c",     "avx512f",
                               "avx512dq",    "avx512bw",    "avx512vl",    "avx512_vnni", "avx512_bf16",
                               "avx512_fp16", "avx_vnni",    "amx_tile",    "amx_bf16", "amx_int8", "asimd",
                               "asimddp",     "sve",         "sve2",        "bf16",     "i8mm"};
  nlohmann::json cpu = nlohmann::json::object();
  for (const auto& [key, value] : first_processor_fields()) {
    if (key == "vendor_id" || key == "CPU implementer") cpu["vendor"] = value;
    else if (key == "cpu family") cpu["family"] = value;
    else if (key == "model" || key == "CPU part") cpu["model"] = value;
    else if (key == "stepping" || key == "CPU revision") cpu["stepping"] = value;
    else if (key == "model name") cpu["name"] = value;
    else if (key == "flags" || key == "Features") {
      std::istringstream words(value);
      const std::vector<std::string> have{std::istream_iterator<std::string>(words),
                                          std::istream_iterator<std::string>()};
      nlohmann::json isa = nlohmann::json::array();
      for (const char* f : kIsa)
        if (std::find(have.begin(), have.end(), f) != have.end()) isa.push_back(f);
      cpu["isa"] = isa;
    }
  }
  return cpu;
}

}  // namespace

nlohmann::json runtime_environment(const c10::Device& device) {
  nlohmann::json j;
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &utc);
  j["time"] = stamp;
  j["lol"] = kLolVersion;
  j["libtorch"] = TORCH_VERSION;
#if defined(__clang__)
  j["compiler"] = std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  j["compiler"] = std::string("gcc ") + __VERSION__;
#else
  j["compiler"] = nullptr;
#endif
  j["aten_cpu_capability"] = aten_cpu_capability();
  j["blas"] = openblas_string("openblas_get_config");
  j["blas_core"] = openblas_string("openblas_get_corename");
  j["blas_threads"] = blas_threads();
  j["blas_thread_timeout"] = openblas_int("openblas_thread_timeout");
  j["cpu"] = cpu_info();
  j["cores_available"] = available_cores();
  j["threads"] = at::get_num_threads();
  j["cpu_kernels"] = cpu_kernels_enabled();
  j["device"] = device.str();
  if (device.is_cuda()) j["cuda_devices"] = torch::cuda::device_count();
  nlohmann::json env = nlohmann::json::object();
  for (const char* name : kEnvironmentVariables)
    if (const char* v = std::getenv(name)) env[name] = v;
  j["env"] = env;
  return j;
}

std::string kernels_summary(const nlohmann::json& env) {
  std::string s;
  if (env.value("blas_core", nlohmann::json()).is_string()) {
    s = "OpenBLAS " + env["blas_core"].get<std::string>() + " kernels";
    const auto& vars = env.value("env", nlohmann::json::object());
    if (vars.contains("OPENBLAS_CORETYPE")) s += " (OPENBLAS_CORETYPE=" + vars["OPENBLAS_CORETYPE"].get<std::string>() + ")";
  } else {
    s = "BLAS not OpenBLAS";
  }
  if (env.value("aten_cpu_capability", nlohmann::json()).is_string())
    s += ", ATen " + env["aten_cpu_capability"].get<std::string>();
  if (env.value("cpu_kernels", true) == false) s += ", fused CPU kernels off";
  return s;
}

std::string format_environment(const nlohmann::json& env) {
  std::ostringstream os;
  auto text = [](const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); };
  std::vector<std::pair<std::string, std::string>> rows;
  for (const auto& [key, value] : env.items()) {
    if (!value.is_object()) rows.emplace_back(key, text(value));
    else if (value.empty()) rows.emplace_back(key, "(none)");
    else
      for (const auto& [k, v] : value.items()) rows.emplace_back(key + "." + k, text(v));
  }
  size_t width = 0;
  for (const auto& r : rows) width = std::max(width, r.first.size());
  for (const auto& [k, v] : rows) os << std::left << std::setw(int(width + 2)) << k << v << "\n";
  return os.str();
}

}  // namespace lol
