// Learning-rate schedules and the depth-growing schedule.
#pragma once
#include <cstdint>

#include "training/run_config.h"

namespace lol::training {

/// Learning-rate multiplier (peak = 1) for optimizer step `step` (0-based) of `total`.
///   warmup:   (step + 1) / warmup_steps for step < warmup_steps (linear, never 0)
///   constant: 1 after warmup
///   cosine:   m + (1 - m) (1 + cos(pi p)) / 2, p = (step - warmup) / (total - warmup)
///   wsd:      1 until the cooldown, which covers the last round(decay_fraction * total)
///             steps (after warmup); with q in [0, 1) the cooldown progress:
///             linear  m + (1 - m)(1 - q);   1-sqrt  m + (1 - m)(1 - sqrt(q))
/// (m = min_lr_ratio; "1-sqrt" cooldown: Hägele et al. 2024).
double lr_factor(const ScheduleConfig& s, int64_t step, int64_t total);

/// Growing (paper 3.3, 4.2): active core depth for optimizer step `step` of `total`.
/// Over the first G = ceil(fraction * total) steps a progress curve f rises from 0 to 1
/// on GrowConfig::shape: by default "1-sqrt" (the "1-sqrt" schedule of McLeish et al.
/// 2025, whose recurrence curriculum LoL follows; read as the reversed 1-sqrt cooldown)
/// f = 1 - sqrt(1 - step / G), slow at first, fast at the end; "sqrt" f = sqrt(step / G),
/// fast at first; "linear" f = step / G.
/// Each depth start..depth gets an equal share of f's range:
///   depth(step) = min(depth, start + floor((depth - start + 1) * f))  for step < G
///   depth(step) = depth                                              otherwise
/// so the start depth is trained for a real share of the run and the full depth is
/// reached before G. `start` is clamped to [0, depth]; fraction 0 disables growing.
int64_t grown_depth(const GrowConfig& g, int64_t depth, int64_t step, int64_t total);

}  // namespace lol::training
