// WeightAveraging: the average's updates, the swaps around evaluation and the
// per-rank checkpoint state.
#include "train/weight_averaging.h"

#include <map>

#include "core/autograd_meta.h"
#include "train/trainer.h"

namespace weft::train {

WeightAveraging::WeightAveraging(WeightAveragingOptions options) : options_(std::move(options)) {
  WEFT_CHECK(!(options_.avg_fn && options_.multi_avg_fn),
             "WeightAveraging: Only one of avg_fn and multi_avg_fn should be provided");
  WEFT_CHECK(options_.start_step >= 0, "WeightAveraging: start_step must be >= 0, got ", options_.start_step);
  WEFT_CHECK(options_.every_steps >= 0, "WeightAveraging: every_steps must be >= 0 (0: once per epoch), got ",
             options_.every_steps);
}

void WeightAveraging::on_prepared(Trainer& t) {
  parallel::hybrid::DistributedModel& dm = t.distributed_model();
  if (options_.use_buffers) {
    for (const auto& [name, v] : dm.local_state_dict()) live_.emplace_back(name, v);
  } else {
    live_ = dm.local_named_parameters();
  }
  {
    NoGradGuard no_grad;
    for (const auto& [name, v] : live_) average_.push_back(v.detach().clone());
  }
  t.add_rank_state(
      RankState{.name = "weight_averaging",
                .layout = std::to_string(live_.size()) + " averaged tensors",
                .save =
                    [this] {
                      std::map<std::string, Tensor> out{{"n_averaged", scalar_tensor(n_averaged_, {DType::Int64})}};
                      for (size_t i = 0; i < live_.size(); ++i) out["avg." + live_[i].first] = average_[i];
                      return out;
                    },
                .load =
                    [this](const std::map<std::string, Tensor>& in) {
                      auto get = [&](const std::string& key) -> const Tensor& {
                        auto it = in.find(key);
                        WEFT_CHECK(it != in.end(), "WeightAveraging: the checkpoint's average has no '", key, "'");
                        return it->second;
                      };
                      for (size_t i = 0; i < live_.size(); ++i) {
                        const Tensor& v = get("avg." + live_[i].first);
                        WEFT_CHECK(v.sizes() == average_[i].sizes(), "WeightAveraging: the checkpoint's average of '",
                                   live_[i].first, "' has shape ", shape_str(v.sizes()), ", the model's ",
                                   shape_str(average_[i].sizes()));
                      }
                      NoGradGuard no_grad;
                      for (size_t i = 0; i < live_.size(); ++i) average_[i].copy_(get("avg." + live_[i].first));
                      n_averaged_ = get("n_averaged").item<int64_t>();
                    }});
}

void WeightAveraging::update() {
  NoGradGuard no_grad;
  std::vector<Tensor> current;
  for (const auto& [name, v] : live_) current.push_back(v.detach());
  optim::update_average(average_, current, n_averaged_, options_.avg_fn, options_.multi_avg_fn);
  ++n_averaged_;
}

void WeightAveraging::on_step_end(Trainer& t) {
  const int64_t s = t.state().step;
  if (options_.every_steps > 0 && s >= options_.start_step && (s - options_.start_step) % options_.every_steps == 0)
    update();
}

void WeightAveraging::swap() {
  NoGradGuard no_grad;
  for (size_t i = 0; i < live_.size(); ++i) {
    Tensor held = live_[i].second.detach().clone();
    Tensor(live_[i].second).copy_(average_[i]);
    average_[i].copy_(held);
  }
  swapped_ = !swapped_;
}

void WeightAveraging::on_evaluate_begin(Trainer&) {
  if (options_.evaluate_averaged && n_averaged_ > 0) swap();
}

void WeightAveraging::on_evaluate_end(Trainer&) {
  if (swapped_) swap();
}

void WeightAveraging::on_epoch_end(Trainer& t) {
  const TrainState& s = t.state();
  // A period cut short (Note [a period cut short] in train/trainer.h) has not counted its epoch: it is averaged
  // when it completes.
  const bool complete = !s.history.empty() && s.history.back().epoch == s.epoch;
  if (options_.every_steps == 0 && complete && s.step >= options_.start_step) update();
}

void WeightAveraging::on_fit_end(Trainer&) {
  if (swapped_) swap();  // a fit stopped inside an evaluation
  if (options_.apply_at_end && n_averaged_ > 0) apply();
}

void WeightAveraging::apply() {
  WEFT_CHECK(n_averaged_ > 0, "WeightAveraging::apply: no average yet (no update has run)");
  NoGradGuard no_grad;
  for (size_t i = 0; i < live_.size(); ++i) Tensor(live_[i].second).copy_(average_[i]);
}

std::vector<std::pair<std::string, Tensor>> WeightAveraging::averaged() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t i = 0; i < live_.size(); ++i) out.emplace_back(live_[i].first, average_[i]);
  return out;
}

}  // namespace weft::train
