#include "core/runtime.h"

#include <dlfcn.h>
#include <malloc.h>
#include <sched.h>
#include <unistd.h>

#include <ATen/Parallel.h>
#include <torch/cuda.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <mutex>

#include "util/error.h"

namespace lol {

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  return 1;
}

namespace {

bool has_variable(char** envp, const char* name) {
  const size_t len = std::strlen(name);
  for (char** e = envp; e != nullptr && *e != nullptr; ++e)
    if (std::strncmp(*e, name, len) == 0 && (*e)[len] == '=') return true;
  return false;
}
}  // namespace

// Runs before libc and every other shared library are initialised: no allocation, no
// stdio, no C++ runtime; only string functions on static buffers and execve. (setenv
// here would not last: libc's initialisation resets `environ` to the original array.)
void set_thread_pool_defaults(int, char** argv, char** envp) {
  constexpr size_t kMaxVariables = 16384;
  static char* env[kMaxVariables + std::size(kThreadPoolEnv) + 1];
  static char text[std::size(kThreadPoolEnv)][64];
  size_t n = 0;
  for (char** e = envp; e != nullptr && *e != nullptr; ++e) {
    if (n == kMaxVariables) return;  // an environment this large runs with the libraries' defaults
    env[n++] = *e;
  }
  bool added = false;
  for (size_t i = 0; i < std::size(kThreadPoolEnv); ++i) {
    const auto& [name, value] = kThreadPoolEnv[i];
    if (has_variable(envp, name)) continue;
    if (std::strlen(name) + std::strlen(value) + 2 > sizeof(text[i])) return;
    std::strcpy(text[i], name);
    std::strcat(text[i], "=");
    std::strcat(text[i], value);
    env[n++] = text[i];
    added = true;
  }
  if (!added || argv == nullptr) return;
  env[n] = nullptr;
  execve("/proc/self/exe", argv, env);
  // exec failed (e.g. no /proc): continue with the libraries' defaults.
}

void init_runtime(int threads) {
  static std::once_flag malloc_once;
  std::call_once(malloc_once, [] {
    mallopt(M_MMAP_MAX, 0);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    mallopt(M_TOP_PAD, 64 << 20);
  });
  cpu_kernels_enabled();  // a bad LOL_CPU_KERNELS is an error at start-up, not mid-run
  int n = threads;
  if (n <= 0) {
    const char* env = std::getenv("LOL_NUM_THREADS");
    if (env && *env) {
      char* end = nullptr;
      errno = 0;
      const long v = std::strtol(env, &end, 10);
      if (*end != '\0' || errno != 0 || v < 0 || v > INT_MAX)
        throw InputError(std::string("environment variable LOL_NUM_THREADS = '") + env +
                         "': expected a whole number of threads >= 1 (0 or unset: one per available core)");
      n = int(v);
    }
  }
  if (n <= 0) n = available_cores();
  // The bound of train.threads (run_config.cpp): thousands of threads only thrash, and
  // hundreds of thousands abort in the thread pool.
  constexpr int kMaxThreads = 4096;
  if (n > kMaxThreads)
    throw InputError("--threads / LOL_NUM_THREADS: " + std::to_string(n) + " threads: expected at most " +
                     std::to_string(kMaxThreads));
  at::set_num_threads(n);
  // at::set_num_threads does not bound OpenBLAS's own thread pool: without this, a run
  // with LOL_NUM_THREADS=1 still multiplies on two threads that spin against whatever
  // else shares the cores.
  set_blas_threads(n);
}

namespace {

// Looked up at run time: the BLAS behind LibTorch may not be OpenBLAS.
using SetThreads = void (*)(int);
using GetThreads = int (*)();

SetThreads openblas_set() {
  static const auto fn = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
  return fn;
}

GetThreads openblas_get() {
  static const auto fn = reinterpret_cast<GetThreads>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  return fn;
}

}  // namespace

int blas_threads() {
  auto fn = openblas_get();
  return fn ? fn() : 0;
}

void set_blas_threads(int n) {
  if (auto fn = openblas_set()) fn(n);
}

c10::Device parse_device(const std::string& name, const std::string& flag) {
  c10::Device dev(c10::kCPU);
  try {
    dev = c10::Device(name);
  } catch (const std::exception&) {
    throw InputError(flag + ": unknown device '" + name + "' (expected cpu, cuda or cuda:N)");
  }
  if (dev.is_cuda() && !torch::cuda::is_available())
    throw InputError(flag + ": '" + name + "' requested but this LibTorch build has no usable CUDA device");
  if (!dev.is_cpu() && !dev.is_cuda())
    throw InputError(flag + ": unsupported device '" + name + "' (expected cpu or cuda)");
  return dev;
}

namespace {
std::atomic<int> cpu_kernels_state{-1};  // -1: not read yet
}  // namespace

bool cpu_kernels_enabled() {
  int v = cpu_kernels_state.load(std::memory_order_relaxed);
  if (v < 0) {
    const char* env = std::getenv("LOL_CPU_KERNELS");
    if (env && std::strcmp(env, "0") != 0 && std::strcmp(env, "1") != 0)
      throw InputError(std::string("environment variable LOL_CPU_KERNELS = '") + env +
                       "': expected 0 (composed LibTorch operations, as on a GPU) or 1 (the fused CPU kernels)");
    v = env && std::strcmp(env, "0") == 0 ? 0 : 1;
    cpu_kernels_state.store(v, std::memory_order_relaxed);
  }
  return v == 1;
}

void set_cpu_kernels_enabled(bool on) { cpu_kernels_state.store(on ? 1 : 0, std::memory_order_relaxed); }

bool cpu_kernel_device(const torch::Tensor& t) { return t.device().is_cpu() && cpu_kernels_enabled(); }

}  // namespace lol
