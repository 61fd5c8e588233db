// Process-wide runtime set-up: allocator behaviour, thread counts, device parsing.
#pragma once
#include <string>
#include <utility>

#include <c10/core/Device.h>

namespace lol {

/// Call once at start-up (the CLI, tests and benchmarks do).
/// - glibc malloc: keeps freed large buffers instead of returning them to the OS
///   (mallopt M_MMAP_MAX=0, M_TRIM_THRESHOLD=1 GiB). Measured on the project's VMs:
///   without it attention-sized temporaries are page-faulted back every step (10-20x slower).
/// - threads: at::set_num_threads(n) with n = `threads` if > 0, else $LOL_NUM_THREADS,
///   else the number of CPUs available to this process (sched_getaffinity); OpenBLAS's
///   own pool gets the same n (openblas_set_num_threads, when the BLAS is OpenBLAS).
///   Throws lol::InputError when n > 4096.
/// Idempotent.
void init_runtime(int threads = 0);

/// OpenMP (libgomp) reads OMP_WAIT_POLICY once, when it is loaded, before main():
/// with the default policy its idle threads spin, and on the project's 2-core VMs a
/// training step spent ~70% of its time spinning (measured with perf: 1.0K vs 7.0K
/// tokens/s for configs/maze_demo.json). OpenBLAS reads OPENBLAS_THREAD_TIMEOUT the same
/// way: after each product its worker threads call sched_yield() for 2^28 cycles by
/// default, competing with the OpenMP threads of the src/nn kernels; 4 (2^4 cycles)
/// makes them sleep at once (small preset fwd+bwd ~10% faster, docs/benchmarks.md).
/// If a variable of kThreadPoolEnv is unset, this sets it and re-executes the program
/// (/proc/self/exe, same argv) so that both libraries read it; a user's own values are
/// respected. Returns normally when no re-execution is needed or possible (exec failure
/// is ignored: the program just runs with the libraries' defaults). Call first thing in main().
void ensure_passive_thread_pools(int argc, char** argv);

/// The start-up settings of ensure_passive_thread_pools: {variable, value set when unset}.
inline constexpr std::pair<const char*, const char*> kThreadPoolEnv[] = {{"OMP_WAIT_POLICY", "PASSIVE"},
                                                                         {"OPENBLAS_THREAD_TIMEOUT", "4"}};

/// Threads of OpenBLAS's own pool (openblas_get_num_threads), or 0 when LibTorch's BLAS
/// is not OpenBLAS (looked up at run time).
int blas_threads();

/// Sets OpenBLAS's pool size (openblas_set_num_threads); does nothing when the BLAS is not
/// OpenBLAS. Process-wide: call it from one thread, outside parallel regions.
void set_blas_threads(int n);

/// Number of CPUs this process may run on.
int available_cores();

/// Parses "cpu", "cuda", "cuda:N". Throws InputError naming `flag` when the value is
/// unknown or CUDA is requested but LibTorch has no CUDA device.
c10::Device parse_device(const std::string& name, const std::string& flag = "--device");

}  // namespace lol
