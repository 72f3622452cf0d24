// Learning-rate schedulers: the recursive formulas of PyTorch's StepLR,
// LinearLR, CosineAnnealingLR and SequentialLR, in the same expression order.
#include "optim/lr_scheduler.h"

#include <cmath>
#include <numbers>

namespace weft::optim {

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  for (const auto& g : optimizer_.param_groups()) base_lrs_.push_back(g.lr());
}

void LRScheduler::initial_step() {
  last_epoch_ = -1;
  step();
}

void LRScheduler::step() {
  WEFT_CHECK(base_lrs_.size() == num_groups(), "LRScheduler.step: the optimizer has ", num_groups(),
             " param groups but the scheduler was made for ", base_lrs_.size());
  ++last_epoch_;
  std::vector<double> lrs = get_lr();
  auto& groups = optimizer_.param_groups();
  for (size_t g = 0; g < groups.size(); ++g) groups[g].set_lr(lrs[g]);
  last_lrs_ = std::move(lrs);
}

std::map<std::string, Tensor> LRScheduler::state_dict() const {
  return {{"last_epoch", scalar_tensor(last_epoch_, TensorOptions{DType::Int64})},
          {"base_lrs", tensor<double>(base_lrs_, {static_cast<int64_t>(base_lrs_.size())})},
          {"last_lrs", tensor<double>(last_lrs_, {static_cast<int64_t>(last_lrs_.size())})}};
}

void LRScheduler::load_state_dict(const std::map<std::string, Tensor>& sd) {
  for (const char* key : {"last_epoch", "base_lrs", "last_lrs"})
    WEFT_CHECK(sd.count(key), "LRScheduler.load_state_dict: missing '", key, "'");
  for (const auto& [key, t] : sd)
    WEFT_CHECK(key == "last_epoch" || key == "base_lrs" || key == "last_lrs",
               "LRScheduler.load_state_dict: unexpected key '", key, "'");
  const Tensor& base = sd.at("base_lrs");
  const Tensor& last = sd.at("last_lrs");
  const int64_t n = static_cast<int64_t>(num_groups());
  WEFT_CHECK(base.dim() == 1 && base.numel() == n && last.dim() == 1 && last.numel() == n,
             "LRScheduler.load_state_dict: base_lrs has shape ", shape_str(base.sizes()), " and last_lrs has shape ",
             shape_str(last.sizes()), " but the optimizer has ", n, " param groups");
  WEFT_CHECK(sd.at("last_epoch").numel() == 1, "LRScheduler.load_state_dict: last_epoch must have one element");
  Tensor b = base.to(DType::Float64).contiguous(), l = last.to(DType::Float64).contiguous();
  base_lrs_.assign(b.data_ptr<double>(), b.data_ptr<double>() + n);
  last_lrs_.assign(l.data_ptr<double>(), l.data_ptr<double>() + n);
  last_epoch_ = sd.at("last_epoch").item<int64_t>();
  auto& groups = optimizer_.param_groups();
  for (int64_t g = 0; g < n; ++g) groups[g].set_lr(last_lrs_[g]);
}

// ---- StepLR ----

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  WEFT_CHECK(step_size > 0, "StepLR: step_size must be positive, got ", step_size);
  initial_step();
}

std::vector<double> StepLR::get_lr() {
  std::vector<double> out(num_groups());
  const bool decay = last_epoch_ != 0 && last_epoch_ % step_size_ == 0;
  for (size_t g = 0; g < out.size(); ++g) out[g] = decay ? group_lr(g) * gamma_ : group_lr(g);
  return out;
}

// ---- cosine recursion shared by CosineAnnealingLR and LinearWarmupCosine ----

namespace {

constexpr double kPi = std::numbers::pi;

// PyTorch's CosineAnnealingLR.get_lr for epoch e >= 1 (recursive form).
double cosine_recursive(double lr, double base_lr, double eta_min, int64_t e, int64_t T) {
  if ((e - 1 - T) % (2 * T) == 0) return lr + (base_lr - eta_min) * (1 - std::cos(kPi / T)) / 2;
  return (1 + std::cos(kPi * e / T)) / (1 + std::cos(kPi * (e - 1) / T)) * (lr - eta_min) + eta_min;
}

// PyTorch's CosineAnnealingLR._get_closed_form_lr.
double cosine_closed_form(double base_lr, double eta_min, int64_t e, int64_t T) {
  return eta_min + (base_lr - eta_min) * (1 + std::cos(kPi * e / T)) / 2;
}

}  // namespace

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min)
    : LRScheduler(optimizer), t_max_(T_max), eta_min_(eta_min) {
  WEFT_CHECK(T_max > 0, "CosineAnnealingLR: T_max must be positive, got ", T_max);
  initial_step();
}

std::vector<double> CosineAnnealingLR::get_lr() {
  std::vector<double> out(num_groups());
  for (size_t g = 0; g < out.size(); ++g)
    out[g] =
        last_epoch_ == 0 ? group_lr(g) : cosine_recursive(group_lr(g), base_lrs_[g], eta_min_, last_epoch_, t_max_);
  return out;
}

// ---- LinearWarmupCosine ----

LinearWarmupCosine::LinearWarmupCosine(Optimizer& optimizer, int64_t warmup_steps, int64_t total_steps,
                                       double warmup_start_factor, double eta_min)
    : LRScheduler(optimizer),
      warmup_(warmup_steps),
      t_max_(total_steps - warmup_steps),
      start_factor_(warmup_start_factor),
      eta_min_(eta_min) {
  WEFT_CHECK(warmup_steps >= 0, "LinearWarmupCosine: warmup_steps must be >= 0, got ", warmup_steps);
  WEFT_CHECK(total_steps > warmup_steps, "LinearWarmupCosine: total_steps (", total_steps,
             ") must be greater than warmup_steps (", warmup_steps, ")");
  WEFT_CHECK(warmup_start_factor > 0 && warmup_start_factor <= 1.0,
             "LinearWarmupCosine: Starting multiplicative factor expected to be greater than 0 and less or ",
             "equal to 1, got ", warmup_start_factor);
  initial_step();
}

std::vector<double> LinearWarmupCosine::get_lr() {
  std::vector<double> out(num_groups());
  const int64_t e = last_epoch_;
  for (size_t g = 0; g < out.size(); ++g) {
    const double lr = group_lr(g);
    if (e < warmup_) {
      // LinearLR(start_factor, end_factor = 1, total_iters = warmup).
      if (e == 0) {
        out[g] = lr * start_factor_;
      } else {
        const double end_factor = 1.0;
        out[g] = lr * (1.0 + (end_factor - start_factor_) /
                                 (warmup_ * start_factor_ + (e - 1) * (end_factor - start_factor_)));
      }
    } else if (e == warmup_) {
      // SequentialLR switches to the cosine with its closed form at epoch 0
      // (with no warm-up the cosine's own first step keeps the lr).
      out[g] = warmup_ == 0 ? lr : cosine_closed_form(base_lrs_[g], eta_min_, 0, t_max_);
    } else {
      out[g] = cosine_recursive(lr, base_lrs_[g], eta_min_, e - warmup_, t_max_);
    }
  }
  return out;
}

}  // namespace weft::optim
