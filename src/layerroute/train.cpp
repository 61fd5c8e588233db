#include "layerroute/train.h"

#include <algorithm>
#include <cmath>
#include <chrono>
#include <optional>

#include "training/batcher.h"
#include "training/loss.h"
#include "training/optimizer.h"
#include "training/schedule.h"
#include "training/stop_signal.h"
#include "training/train_step.h"
#include "util/error.h"
#include "util/json_fields.h"
#include "util/progress.h"

namespace lol::layerroute {

void TrainOptions::validate(const std::string& w) const {
  util::check_range(w, "steps", steps, int64_t(1), int64_t(1) << 40);
  util::check_range(w, "batch_size", batch_size, int64_t(1), int64_t(1) << 20);
  util::check_range(w, "grad_accum", grad_accum, int64_t(1), int64_t(1) << 20);
  util::check_range(w, "lr", lr, 0.0, 10.0);
  util::check_range(w, "weight_decay", weight_decay, 0.0, 10.0);
  util::check_range(w, "lambda", lambda, 0.0, 1e6);
  util::check_range(w, "clip", clip, 0.0, 1e9);
  util::check_range(w, "min_lr_ratio", min_lr_ratio, 0.0, 1.0);
  util::check_range(w, "warmup_steps", warmup_steps, int64_t(0), steps);
  // Rows drawn by the whole run (the batch order's position) stay far below int64.
  require(double(steps) * double(batch_size) * double(grad_accum) < 0x1p60, w,
          "steps x batch_size x grad_accum = " + std::to_string(double(steps) * double(batch_size) * double(grad_accum)) +
              ": expected below 2^60 samples drawn");
}

nlohmann::json to_json(const TrainLog& l) {
  return {{"step", l.step}, {"lm_loss", l.lm_loss}, {"gate_mean", l.gate_mean}, {"lr", l.lr},
          {"grad_norm", l.grad_norm}, {"layer_sigma", l.layer_sigma}};
}

nlohmann::json to_json(const TrainOptions& o) {
  return {{"steps", o.steps}, {"batch_size", o.batch_size}, {"grad_accum", o.grad_accum}, {"lr", o.lr},
          {"betas", {o.beta1, o.beta2}}, {"weight_decay", o.weight_decay}, {"warmup_steps", o.warmup_steps},
          {"min_lr_ratio", o.min_lr_ratio}, {"clip", o.clip}, {"lambda", o.lambda}, {"seed", o.seed}};
}

TrainLog train_layerroute(LayerRouteTrainable& model, const std::vector<Example>& train, const TrainOptions& opt,
                          const std::function<void(const TrainLog&)>& on_log, const TrainCheckpoints* checkpoints) {
  opt.validate("layerroute train options");
  require(!train.empty(), "layerroute train", "no training samples");
  require_examples_fit(train, model.model()->base->config().max_seq_len, "layerroute train");
  training::OptimConfig oc;
  oc.type = "adamw";
  oc.lr = opt.lr;
  oc.beta1 = opt.beta1;
  oc.beta2 = opt.beta2;
  oc.weight_decay = opt.weight_decay;
  training::ScheduleConfig sc;
  sc.type = "cosine";
  sc.warmup_steps = opt.warmup_steps;
  sc.min_lr_ratio = opt.min_lr_ratio;
  auto params = model.grouped_parameters();
  training::Optimizer optim(params, oc);
  model.module().train();
  const auto device = model.model()->base->embed_tokens->weight.device();

  // Resuming: adapters and moments from the checkpoint; the batch order continues
  // where the checkpoint's step left it (each step draws batch_size * grad_accum rows).
  const int64_t rows_per_step = opt.batch_size * opt.grad_accum;
  training::TrainerState state;
  if (checkpoints && checkpoints->resume) {
    state = checkpoints->resume(optim);
    require(state.step >= 0 && state.step < opt.steps, "layerroute train",
            "the checkpoint is at step " + std::to_string(state.step) + ", expected one before --steps " +
                std::to_string(opt.steps));
    const int64_t rows = state.data_position.is_object() && state.data_position.contains("rows") &&
                                 state.data_position["rows"].is_number_integer()
                             ? state.data_position["rows"].get<int64_t>()
                             : -1;
    require(rows == state.step * rows_per_step, "layerroute train",
            "the checkpoint's data_position " + state.data_position.dump() + ": expected {\"rows\": " +
                std::to_string(state.step * rows_per_step) + "} (step x batch x accum)");
    if (!state.rng_cpu.empty()) training::set_rng_state_hex(torch::kCPU, state.rng_cpu, "layerroute train checkpoint");
  }
  const int64_t n = int64_t(train.size());
  int64_t epoch = (state.step * rows_per_step) / n, pos = (state.step * rows_per_step) % n;
  auto order = training::epoch_permutation(n, opt.seed, epoch);
  auto next_rows = [&]() {
    std::vector<const Example*> rows;
    while (int64_t(rows.size()) < opt.batch_size) {
      if (pos == n) {
        order = training::epoch_permutation(n, opt.seed, ++epoch);
        pos = 0;
      }
      rows.push_back(&train[size_t(order[size_t(pos++)])]);
    }
    return rows;
  };
  const bool saving = checkpoints && checkpoints->save;
  std::optional<training::StopSignalScope> signals;
  if (saving) signals.emplace();
  auto save = [&](int64_t step) {
    state.step = step;
    state.data_position = {{"rows", step * rows_per_step}};
    state.rng_cpu = training::rng_state_hex(torch::kCPU);
    checkpoints->save(optim, state);
  };

  const int64_t L = model.model()->n_layers();
  ProgressBar bar("layerroute train", opt.steps - state.step, opt.progress);
  TrainLog log;
  const auto started = std::chrono::steady_clock::now();
  const double elapsed_before = state.elapsed;
  const int64_t start_step = state.step;
  const double flops_per_token = model.train_flops_per_token(0);
  for (int64_t step = state.step; step < opt.steps; ++step) {
    optim.zero_grad();
    std::vector<training::TrainBatch> micro;
    int64_t targets = 0, samples = 0, step_tokens = 0;
    for (int64_t k = 0; k < opt.grad_accum; ++k) {
      micro.push_back(training::to_device(make_batch(next_rows()), device));
      targets += micro.back().n_targets;
      step_tokens += micro.back().n_tokens;
      samples += micro.back().tokens.size(0);
    }
    double ce = 0, gate = 0;
    auto layer_sigma = torch::zeros({L}, torch::kFloat64);
    for (auto& b : micro) {
      auto logits = model.forward(b);
      auto ce_sum = training::masked_ce_sum(logits, b.targets, b.target_mask);
      const double rows = double(b.tokens.size(0));
      // mean sigma over this micro-batch's samples, weighted to a mean over the step's samples
      auto reg = model.last_gate_mean() * (rows / double(samples));
      auto loss = ce_sum / double(std::max<int64_t>(targets, 1)) + opt.lambda * reg;
      loss.backward();
      ce += ce_sum.item<double>();
      gate += reg.item<double>();
      layer_sigma += model.last_sigma().detach().sum(0).to(torch::kCPU, torch::kFloat64);
    }
    log.grad_norm = training::clip_gradients(params, opt.clip);
    // A non-finite loss, gate mean or gradient would be stepped into the adapters and
    // saved: stop instead (exit 3), before anything is written.
    if (!std::isfinite(ce) || !std::isfinite(gate) || !std::isfinite(log.grad_norm))
      throw NonFiniteError("layerroute train: step " + std::to_string(step + 1) + ": LM loss sum " + std::to_string(ce) +
                           ", mean gate " + std::to_string(gate) + ", gradient norm " + std::to_string(log.grad_norm) +
                           " is not finite (the base model's activations overflow float32, or --lr is too high); "
                           "no adapter was written");
    const double f = training::lr_factor(sc, step, opt.steps);
    optim.step(f);
    state.tokens += step_tokens;
    log.step = step + 1;
    log.lm_loss = ce / double(std::max<int64_t>(targets, 1));
    log.gate_mean = gate;
    log.lr = opt.lr * f;
    layer_sigma /= double(samples);
    log.layer_sigma.assign(layer_sigma.data_ptr<double>(), layer_sigma.data_ptr<double>() + L);
    state.flops += flops_per_token * double(step_tokens);
    state.elapsed = elapsed_before + std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    bar.update(step + 1 - start_step,
               "loss " + std::to_string(log.lm_loss).substr(0, 6) + " gate " + std::to_string(log.gate_mean).substr(0, 5));
    if (on_log && (log.step % std::max<int64_t>(opt.log_every, 1) == 0 || log.step == opt.steps)) on_log(log);
    const bool last = log.step == opt.steps;
    const int sig = saving ? training::stop_requested() : 0;
    // The last step's state is the adapter the caller writes: no checkpoint for it.
    if (saving && !last &&
        (sig || (checkpoints->save_every > 0 && log.step % checkpoints->save_every == 0)))
      save(log.step);
    if (sig && !last) {
      bar.finish();
      log.interrupted = true;
      model.module().eval();
      return log;
    }
  }
  bar.finish();
  model.module().eval();
  return log;
}

}  // namespace lol::layerroute
