// Process-wide runtime set-up: allocator behaviour, thread counts, device parsing.
#pragma once
#include <string>

#include <c10/core/Device.h>

namespace lol {

/// Call once at start-up (the CLI, tests and benchmarks do).
/// - glibc malloc: keeps freed large buffers instead of returning them to the OS
///   (mallopt M_MMAP_MAX=0, M_TRIM_THRESHOLD=1 GiB). Measured on the project's VMs:
///   without it attention-sized temporaries are page-faulted back every step (10-20x slower).
/// - threads: at::set_num_threads(n) with n = `threads` if > 0, else $LOL_NUM_THREADS,
///   else the number of CPUs available to this process (sched_getaffinity).
/// Idempotent.
void init_runtime(int threads = 0);

/// Number of CPUs this process may run on.
int available_cores();

/// Parses "cpu", "cuda", "cuda:N". Throws InputError naming `flag` when the value is
/// unknown or CUDA is requested but LibTorch has no CUDA device.
c10::Device parse_device(const std::string& name, const std::string& flag = "--device");

}  // namespace lol
