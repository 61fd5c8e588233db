#include "layerroute/train.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "training/batcher.h"
#include "training/loss.h"
#include "training/optimizer.h"
#include "training/schedule.h"
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
                          const std::function<void(const TrainLog&)>& on_log) {
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

  int64_t epoch = 0, pos = 0;
  auto order = training::epoch_permutation(int64_t(train.size()), opt.seed, 0);
  auto next_rows = [&]() {
    std::vector<const Example*> rows;
    while (int64_t(rows.size()) < opt.batch_size) {
      if (pos == int64_t(order.size())) {
        order = training::epoch_permutation(int64_t(train.size()), opt.seed, ++epoch);
        pos = 0;
      }
      rows.push_back(&train[size_t(order[size_t(pos++)])]);
    }
    return rows;
  };

  const int64_t L = model.model()->n_layers();
  ProgressBar bar_obj("layerroute train", opt.steps, opt.progress);
  ProgressBar* bar = &bar_obj;
  TrainLog log;
  for (int64_t step = 0; step < opt.steps; ++step) {
    optim.zero_grad();
    std::vector<training::TrainBatch> micro;
    int64_t targets = 0, samples = 0;
    for (int64_t k = 0; k < opt.grad_accum; ++k) {
      micro.push_back(training::to_device(make_batch(next_rows()), device));
      targets += micro.back().n_targets;
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
    log.step = step + 1;
    log.lm_loss = ce / double(std::max<int64_t>(targets, 1));
    log.gate_mean = gate;
    log.lr = opt.lr * f;
    layer_sigma /= double(samples);
    log.layer_sigma.assign(layer_sigma.data_ptr<double>(), layer_sigma.data_ptr<double>() + L);
    if (bar) bar->update(step + 1, "loss " + std::to_string(log.lm_loss).substr(0, 6) + " gate " + std::to_string(log.gate_mean).substr(0, 5));
    if (on_log && (log.step % std::max<int64_t>(opt.log_every, 1) == 0 || log.step == opt.steps)) on_log(log);
  }
  if (bar) bar->finish();
  model.module().eval();
  return log;
}

}  // namespace lol::layerroute
