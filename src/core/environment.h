// What a run's numbers depend on besides its config, data and seeds: the program and
// LibTorch versions, the CPU, the kernels chosen for it at run time, thread counts and the
// settings read from the environment. OpenBLAS picks its GEMM kernels by the CPU it
// detects (OPENBLAS_CORETYPE overrides it) and ATen its vectorised kernels by the ISA
// (ATEN_CPU_CAPABILITY); different kernels round differently, so the same run config
// trains to different losses under different kernels while it is bit-identical from run
// to run under the same ones (docs/results.md, "Explained (session 15)"). `lol train` appends this record to
// <run>/environment.jsonl at every start; `lol env` prints it.
#pragma once
#include <string>

#include <c10/core/Device.h>
#include <nlohmann/json.hpp>

namespace lol {

/// The program's version (`lol --version`).
inline constexpr const char* kLolVersion = "0.1.0";

/// The environment record, a JSON object:
///   time (UTC, "2026-12-02T00:47:00Z"), lol, libtorch (version strings), compiler (this
///   build's), aten_cpu_capability ("NO AVX" | "AVX2" | "AVX512" on x86, from
///   at::show_config()),
///   blas ("OpenBLAS 0.3.21 DYNAMIC_ARCH ..." from openblas_get_config(), or null when
///   LibTorch's BLAS is not OpenBLAS), blas_core (openblas_get_corename(): the kernels in
///   use, e.g. "Haswell"), blas_threads, blas_thread_timeout (openblas_thread_timeout():
///   the OPENBLAS_THREAD_TIMEOUT OpenBLAS read when it was loaded, 0 when unset there;
///   null without OpenBLAS),
///   cpu {vendor, family, model, stepping, name, isa: [the vector extensions of
///   /proc/cpuinfo that kernels dispatch on]} (fields absent where /proc/cpuinfo lacks them),
///   cores_available, threads (at::get_num_threads()), cpu_kernels (cpu_kernels_enabled()),
///   device (`device`.str()),
///   env {NAME: value} for the variables below that are set.
/// Reads /proc/cpuinfo; never throws for a missing or unreadable file (cpu is then {}).
nlohmann::json runtime_environment(const c10::Device& device = c10::Device(c10::kCPU));

/// Environment variables that change kernels, threads or timing; runtime_environment()
/// records those that are set.
inline constexpr const char* kEnvironmentVariables[] = {
    "LOL_NUM_THREADS",   "OMP_NUM_THREADS",  "OMP_WAIT_POLICY",        "OPENBLAS_NUM_THREADS",
    "OPENBLAS_THREAD_TIMEOUT", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_BLOCK_FACTOR",
    "ATEN_CPU_CAPABILITY", "CUDA_VISIBLE_DEVICES", "LOL_CPU_KERNELS"};

/// One line naming the kernels in use, e.g. "OpenBLAS Haswell kernels
/// (OPENBLAS_CORETYPE=Haswell), ATen AVX2" (benchmark output); ", fused CPU kernels off"
/// is appended when cpu_kernels is false.
std::string kernels_summary(const nlohmann::json& env);

/// The record as aligned "key  value" lines for people (`lol env`).
std::string format_environment(const nlohmann::json& env);

}  // namespace lol
