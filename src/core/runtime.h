// Process-wide runtime set-up: allocator behaviour, thread counts, device parsing.
#pragma once
#include <string>
#include <utility>

#include <c10/core/Device.h>
#include <ATen/core/Tensor.h>

namespace lol {

/// Call once at start-up (the CLI, tests and benchmarks do).
/// - glibc malloc: keeps freed large buffers instead of returning them to the OS
///   (mallopt M_MMAP_MAX=0, M_TRIM_THRESHOLD=1 GiB). Measured on the project's VMs:
///   without it attention-sized temporaries are page-faulted back every step (10-20x slower).
/// - threads: at::set_num_threads(n) with n = `threads` if > 0, else $LOL_NUM_THREADS,
///   else the number of CPUs available to this process (sched_getaffinity); OpenBLAS's
///   own pool gets the same n (openblas_set_num_threads, when the BLAS is OpenBLAS).
///   Throws lol::InputError when n > 4096.
/// - reads LOL_CPU_KERNELS (cpu_kernels_enabled(); InputError when it is not 0 or 1).
/// Idempotent.
void init_runtime(int threads = 0);

/// OpenMP (libgomp) reads OMP_WAIT_POLICY once, when it is loaded, before main():
/// with the default policy its idle threads spin, and on the project's 2-core VMs a
/// training step spent ~70% of its time spinning (measured with perf: 1.0K vs 7.0K
/// tokens/s for configs/maze_demo.json). OpenBLAS reads OPENBLAS_THREAD_TIMEOUT the same
/// way: after each product its worker threads call sched_yield() for 2^28 cycles by
/// default, competing with the OpenMP threads of the src/nn kernels; 4 (2^4 cycles)
/// makes them sleep at once (small preset fwd+bwd ~10% faster, docs/benchmarks.md).
///
/// set_thread_pool_defaults gives every unset variable of kThreadPoolEnv its value (a
/// user's own values are respected) by re-executing the program (/proc/self/exe, same
/// argv, the environment plus those variables). An executable registers it in its
/// .preinit_array with LOL_THREAD_POOL_DEFAULTS_PREINIT: glibc's loader runs the
/// executable's preinit functions before the constructor of any shared library, so the
/// re-execution happens before LibTorch's static initialisation (`lol --version` with both
/// variables unset: 1.33 s, against 1.8-2.1 s when it re-executed from main();
/// docs/benchmarks.md "Start-up") and the new process's libgomp and OpenBLAS read the
/// variables. Child processes inherit them. Without this entry (or with a loader that
/// ignores .preinit_array) the program runs with the libraries' defaults. Arguments:
/// those glibc passes to preinit functions (argc, argv, envp). Never throws.
void set_thread_pool_defaults(int argc, char** argv, char** envp);

/// The start-up settings of set_thread_pool_defaults: {variable, value set when unset}.
inline constexpr std::pair<const char*, const char*> kThreadPoolEnv[] = {{"OMP_WAIT_POLICY", "PASSIVE"},
                                                                         {"OPENBLAS_THREAD_TIMEOUT", "4"}};

}  // namespace lol

/// Registers lol::set_thread_pool_defaults in the executable's .preinit_array. Use once,
/// at namespace scope, in the translation unit holding main() (a .preinit_array entry is
/// only honoured in executables; a shared library must not contain one).
#define LOL_THREAD_POOL_DEFAULTS_PREINIT                                                          \
  __attribute__((section(".preinit_array"), used)) static void (*lol_thread_pool_defaults_preinit)( \
      int, char**, char**) = &lol::set_thread_pool_defaults

namespace lol {

/// Threads of OpenBLAS's own pool (openblas_get_num_threads), or 0 when LibTorch's BLAS
/// is not OpenBLAS (looked up at run time).
int blas_threads();

/// Sets OpenBLAS's pool size (openblas_set_num_threads); does nothing when the BLAS is not
/// OpenBLAS. Process-wide: call it from one thread, outside parallel regions.
void set_blas_threads(int n);

/// Number of CPUs this process may run on.
int available_cores();

/// Whether operators run the project's fused CPU kernels (segment attention, RMSNorm with
/// FiLM, SwiGLU, RoPE, router inputs, the routed core's row dispatch, the float decoding
/// kernels) on CPU tensors of the dtypes they support. On by default; LOL_CPU_KERNELS=0
/// in the environment turns them off, and every operator then runs the composed LibTorch
/// operations that a GPU runs: the GPU path can be tested, and its operator calls counted,
/// on a CPU (`LOL_CPU_KERNELS=0 lol bench train --profile 3`; docs/benchmarks.md "CUDA").
/// Read once, at the first call; throws InputError when LOL_CPU_KERNELS is set to
/// anything but 0 or 1.
bool cpu_kernels_enabled();

/// Overrides cpu_kernels_enabled() for this process (tests run both paths). Not
/// synchronised with operators running concurrently.
void set_cpu_kernels_enabled(bool on);

/// True when `t` is a CPU tensor and cpu_kernels_enabled(): where the fused CPU kernels
/// may run (each also checks its dtypes and shapes).
bool cpu_kernel_device(const torch::Tensor& t);

/// Parses "cpu", "cuda", "cuda:N". Throws InputError naming `flag` when the value is
/// unknown or CUDA is requested but LibTorch has no CUDA device.
c10::Device parse_device(const std::string& name, const std::string& flag = "--device");

}  // namespace lol
