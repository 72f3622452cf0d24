// Learning-rate schedulers: the base's stepping and state dict, and PyTorch's
// get_lr (and closed forms at epoch 0, for SequentialLR) of StepLR,
// MultiStepLR, ExponentialLR, LinearLR, ConstantLR, LambdaLR,
// MultiplicativeLR, CosineAnnealingLR, PolynomialLR, OneCycleLR, CyclicLR and
// ReduceLROnPlateau, in the same expression order.
#include "optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <set>

namespace weft::optim {

namespace {
Tensor values_tensor(const std::vector<double>& v) { return tensor<double>(v, {static_cast<int64_t>(v.size())}); }
}  // namespace

std::vector<double> PerGroup::resolve(const char* who, const char* name, const Optimizer& optimizer) const {
  const size_t n = optimizer.param_groups().size();
  if (!per_group_) return std::vector<double>(n, values_[0]);
  WEFT_CHECK(values_.size() == n, who, ": ", name, " must have the same length as optimizer.param_groups. ", name,
             " has ", values_.size(), " values, param_groups has ", n, ".");
  return values_;
}

// ---- detail::CycledMomentum ----

namespace detail {

CycledMomentum::CycledMomentum(const char* who, const Optimizer& optimizer, const PerGroup& base_momentum,
                               const PerGroup& max_momentum) {
  const OptionMap& d = optimizer.defaults();
  WEFT_CHECK(d.count("momentum") || d.count("beta1"), who,
             ": optimizer must support momentum or beta1 with `cycle_momentum` option enabled (", optimizer.name(),
             " has neither a 'momentum' nor a 'beta1' option; pass cycle_momentum = false)");
  max_ = max_momentum.resolve(who, "max_momentum", optimizer);
  base_ = base_momentum.resolve(who, "base_momentum", optimizer);
  key_ = d.count("beta1") ? "beta1" : "momentum";
}

void CycledMomentum::apply(Optimizer& optimizer, std::vector<double> momentums) {
  auto& groups = optimizer.param_groups();
  for (size_t g = 0; g < groups.size(); ++g) groups[g].options[key_] = momentums[g];
  last_ = std::move(momentums);
}

std::vector<std::string> CycledMomentum::state_keys() const {
  if (!on()) return {};
  return {"base_momentums", "max_momentums", "last_momentums"};
}

void CycledMomentum::save(SchedulerStateDict& sd) const {
  if (!on()) return;
  sd["base_momentums"] = values_tensor(base_);
  sd["max_momentums"] = values_tensor(max_);
  sd["last_momentums"] = values_tensor(last_);
}

void CycledMomentum::load(Optimizer& optimizer, std::vector<double> base, std::vector<double> max,
                          std::vector<double> last) {
  base_ = std::move(base);
  max_ = std::move(max);
  apply(optimizer, std::move(last));
}

}  // namespace detail

// ---- LRScheduler ----

LRScheduler::LRScheduler(Optimizer& optimizer) : optimizer_(optimizer) {
  for (const auto& g : optimizer_.param_groups()) base_lrs_.push_back(g.initial_lr.value_or(g.lr()));
}

namespace {
Optimizer& with_lrs(Optimizer& optimizer, const std::vector<double>& lrs) {
  auto& groups = optimizer.param_groups();
  WEFT_INTERNAL_ASSERT(lrs.size() == groups.size(), "LRScheduler: ", lrs.size(), " start lrs for ", groups.size(),
                       " param groups");
  for (size_t g = 0; g < groups.size(); ++g) groups[g].set_lr(lrs[g]);
  return optimizer;
}
}  // namespace

LRScheduler::LRScheduler(Optimizer& optimizer, const std::vector<double>& start_lrs)
    : LRScheduler(with_lrs(optimizer, start_lrs)) {}

void LRScheduler::restart(LRScheduler& s) {
  const int64_t saved = s.last_epoch_;
  s.last_epoch_ = 0;
  std::vector<double> lrs;
  try {
    lrs = s.restart_lr();
  } catch (...) {
    s.last_epoch_ = saved;
    throw;
  }
  s.set_lrs(std::move(lrs));
}

void LRScheduler::initial_step() {
  // PyTorch's group.setdefault("initial_lr", lr), once the subclass's checks have passed.
  auto& groups = optimizer_.param_groups();
  for (size_t g = 0; g < groups.size(); ++g)
    if (!groups[g].initial_lr) groups[g].initial_lr = base_lrs_[g];
  last_epoch_ = -1;
  step();
}

void LRScheduler::step() {
  WEFT_CHECK(base_lrs_.size() == num_groups(), "LRScheduler.step: the optimizer has ", num_groups(),
             " param groups but the scheduler was made for ", base_lrs_.size());
  ++last_epoch_;
  std::vector<double> lrs;
  try {
    lrs = get_lr();
  } catch (...) {
    --last_epoch_;
    throw;
  }
  set_lrs(std::move(lrs));
}

void LRScheduler::set_lrs(std::vector<double> lrs) {
  auto& groups = optimizer_.param_groups();
  WEFT_INTERNAL_ASSERT(lrs.size() == groups.size(), "LRScheduler: ", lrs.size(), " lrs for ", groups.size(),
                       " param groups");
  for (size_t g = 0; g < groups.size(); ++g) groups[g].set_lr(lrs[g]);
  last_lrs_ = std::move(lrs);
}

std::vector<double> LRScheduler::group_lrs_times(double factor) const {
  std::vector<double> out(num_groups());
  for (size_t g = 0; g < out.size(); ++g) out[g] = group_lr(g) * factor;
  return out;
}

std::vector<double> LRScheduler::base_lrs_times(double factor) const {
  std::vector<double> out(base_lrs_.size());
  for (size_t g = 0; g < out.size(); ++g) out[g] = base_lrs_[g] * factor;
  return out;
}

Tensor LRScheduler::per_group_tensor(const std::vector<double>& v) { return values_tensor(v); }

SchedulerStateDict LRScheduler::state_dict() const {
  SchedulerStateDict sd{{"last_epoch", scalar_tensor(last_epoch_, TensorOptions{DType::Int64})},
                        {"base_lrs", per_group_tensor(base_lrs_)},
                        {"last_lrs", per_group_tensor(last_lrs_)}};
  save_extra_state(sd);
  return sd;
}

std::vector<double> LRScheduler::per_group_entry(const SchedulerStateDict& sd, const std::string& key) const {
  const Tensor& t = sd.at(key);
  const int64_t n = static_cast<int64_t>(num_groups());
  WEFT_CHECK(t.dim() == 1 && t.numel() == n && t.is_floating_point(), "LRScheduler.load_state_dict: '", key,
             "' has shape ", shape_str(t.sizes()), " and dtype ", t.dtype(), " but the optimizer has ", n,
             " param groups (one floating-point value each)");
  Tensor c = t.to(DType::Float64).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + n);
}

void LRScheduler::load_momentum(const SchedulerStateDict& sd, detail::CycledMomentum& m) {
  if (!m.on()) return;
  std::vector<double> base = per_group_entry(sd, "base_momentums"), max = per_group_entry(sd, "max_momentums");
  std::vector<double> last = per_group_entry(sd, "last_momentums");
  m.load(optimizer_, std::move(base), std::move(max), std::move(last));
}

void LRScheduler::load_state_dict(const SchedulerStateDict& sd) {
  std::set<std::string> expected{"last_epoch", "base_lrs", "last_lrs"};
  for (const auto& k : extra_state_keys()) expected.insert(k);
  for (const auto& key : expected) WEFT_CHECK(sd.count(key), "LRScheduler.load_state_dict: missing '", key, "'");
  for (const auto& [key, t] : sd)
    WEFT_CHECK(expected.count(key), "LRScheduler.load_state_dict: unexpected key '", key, "'");
  const Tensor& last_epoch = sd.at("last_epoch");
  WEFT_CHECK(last_epoch.numel() == 1 && !last_epoch.is_floating_point(),
             "LRScheduler.load_state_dict: last_epoch must be one integer, got shape ", shape_str(last_epoch.sizes()),
             " and dtype ", last_epoch.dtype());
  std::vector<double> base = per_group_entry(sd, "base_lrs"), last = per_group_entry(sd, "last_lrs");
  load_extra_state(sd);  // checks its entries before changing anything
  base_lrs_ = std::move(base);
  last_epoch_ = last_epoch.item<int64_t>();
  set_lrs(std::move(last));
}

// ---- StepLR, MultiStepLR, ExponentialLR ----

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma)
    : LRScheduler(optimizer), step_size_(step_size), gamma_(gamma) {
  WEFT_CHECK(step_size > 0, "StepLR: step_size must be positive, got ", step_size);
  initial_step();
}

std::vector<double> StepLR::get_lr() {
  const bool decay = last_epoch_ != 0 && last_epoch_ % step_size_ == 0;
  return group_lrs_times(decay ? gamma_ : 1.0);
}

// The closed forms at epoch 0 below are PyTorch's _get_closed_form_lr with last_epoch 0.
std::vector<double> StepLR::restart_lr() { return base_lrs_times(1.0); }  // gamma ** (0 // step_size)

MultiStepLR::MultiStepLR(Optimizer& optimizer, const std::vector<int64_t>& milestones, double gamma)
    : LRScheduler(optimizer), gamma_(gamma) {
  for (int64_t m : milestones) ++milestones_[m];
  initial_step();
}

std::vector<double> MultiStepLR::get_lr() {
  auto it = milestones_.find(last_epoch_);
  if (it == milestones_.end()) return group_lrs_times(1.0);
  return group_lrs_times(std::pow(gamma_, static_cast<double>(it->second)));
}

std::vector<double> MultiStepLR::restart_lr() {
  int64_t passed = 0;  // milestones <= 0, with their repeats (PyTorch's bisect_right)
  for (const auto& [m, count] : milestones_)
    if (m <= 0) passed += count;
  return base_lrs_times(std::pow(gamma_, static_cast<double>(passed)));
}

ExponentialLR::ExponentialLR(Optimizer& optimizer, double gamma) : LRScheduler(optimizer), gamma_(gamma) {
  initial_step();
}

std::vector<double> ExponentialLR::get_lr() { return group_lrs_times(last_epoch_ == 0 ? 1.0 : gamma_); }

std::vector<double> ExponentialLR::restart_lr() { return base_lrs_times(1.0); }  // gamma ** 0

// ---- LinearLR, ConstantLR ----

namespace {

constexpr double kPi = std::numbers::pi;

// PyTorch's LinearLR.get_lr multiplier for epoch e in [1, total_iters] (recursive form).
double linear_multiplier(double start, double end, int64_t total_iters, int64_t e) {
  return 1.0 + (end - start) / (total_iters * start + (e - 1) * (end - start));
}

void check_start_factor(const char* who, double start_factor) {
  WEFT_CHECK(start_factor > 0 && start_factor <= 1.0, who,
             ": Starting multiplicative factor expected to be greater than 0 and less or equal to 1, got ",
             start_factor);
}

}  // namespace

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor, int64_t total_iters)
    : LRScheduler(optimizer), start_factor_(start_factor), end_factor_(end_factor), total_iters_(total_iters) {
  check_start_factor("LinearLR", start_factor);
  WEFT_CHECK(end_factor >= 0 && end_factor <= 1.0,
             "LinearLR: Ending multiplicative factor expected to be between 0 and 1, got ", end_factor);
  initial_step();
}

std::vector<double> LinearLR::get_lr() {
  if (last_epoch_ == 0) return group_lrs_times(start_factor_);
  if (last_epoch_ > total_iters_) return group_lrs_times(1.0);
  return group_lrs_times(linear_multiplier(start_factor_, end_factor_, total_iters_, last_epoch_));
}

std::vector<double> LinearLR::restart_lr() {
  WEFT_CHECK(total_iters_ != 0, "LinearLR: restarting at epoch 0 with total_iters 0 (PyTorch's closed form ",
             "divides by total_iters)");
  const double frac = static_cast<double>(std::min<int64_t>(total_iters_, 0)) / static_cast<double>(total_iters_);
  return base_lrs_times(start_factor_ + (end_factor_ - start_factor_) * frac);
}

ConstantLR::ConstantLR(Optimizer& optimizer, double factor, int64_t total_iters)
    : LRScheduler(optimizer), factor_(factor), total_iters_(total_iters) {
  WEFT_CHECK(factor >= 0 && factor <= 1.0,
             "ConstantLR: Constant multiplicative factor expected to be between 0 and 1, ", "got ", factor);
  initial_step();
}

std::vector<double> ConstantLR::get_lr() {
  if (last_epoch_ == 0) return group_lrs_times(factor_);
  if (last_epoch_ != total_iters_) return group_lrs_times(1.0);
  WEFT_CHECK(factor_ != 0, "ConstantLR: factor 0 cannot be undone at epoch total_iters (", total_iters_,
             "): 1 / factor is a division by zero");
  return group_lrs_times(1.0 / factor_);
}

std::vector<double> ConstantLR::restart_lr() {
  return base_lrs_times(factor_ + (0 >= total_iters_ ? 1.0 : 0.0) * (1 - factor_));
}

// ---- LambdaLR, MultiplicativeLR ----

namespace {

// PyTorch's lr_lambda list: one function per group, each callable.
std::vector<LRLambda> per_group_lambdas(const char* who, std::vector<LRLambda> fs, const Optimizer& optimizer) {
  const size_t n = optimizer.param_groups().size();
  WEFT_CHECK(fs.size() == n, who, ": Expected ", n, " lr_lambdas, but got ", fs.size());
  for (size_t g = 0; g < n; ++g)
    WEFT_CHECK(static_cast<bool>(fs[g]), who, ": lr_lambda should be a function, but got an empty std::function ",
               "(param group ", g, ")");
  return fs;
}

std::vector<LRLambda> repeated(LRLambda f, const Optimizer& optimizer) {
  return std::vector<LRLambda>(optimizer.param_groups().size(), std::move(f));
}

}  // namespace

LambdaLR::LambdaLR(Optimizer& optimizer, LRLambda lr_lambda)
    : LambdaLR(optimizer, repeated(std::move(lr_lambda), optimizer)) {}

LambdaLR::LambdaLR(Optimizer& optimizer, std::vector<LRLambda> lr_lambdas)
    : LRScheduler(optimizer), lambdas_(per_group_lambdas("LambdaLR", std::move(lr_lambdas), optimizer)) {
  initial_step();
}

std::vector<double> LambdaLR::get_lr() {
  std::vector<double> out(num_groups());
  for (size_t g = 0; g < out.size(); ++g) out[g] = base_lrs_[g] * lambdas_[g](last_epoch_);
  return out;
}

MultiplicativeLR::MultiplicativeLR(Optimizer& optimizer, LRLambda lr_lambda)
    : MultiplicativeLR(optimizer, repeated(std::move(lr_lambda), optimizer)) {}

MultiplicativeLR::MultiplicativeLR(Optimizer& optimizer, std::vector<LRLambda> lr_lambdas)
    : LRScheduler(optimizer), lambdas_(per_group_lambdas("MultiplicativeLR", std::move(lr_lambdas), optimizer)) {
  initial_step();
}

std::vector<double> MultiplicativeLR::get_lr() {
  std::vector<double> out(num_groups());
  for (size_t g = 0; g < out.size(); ++g)
    out[g] = last_epoch_ == 0 ? group_lr(g) : group_lr(g) * lambdas_[g](last_epoch_);
  return out;
}

// PyTorch's get_lr outside the initial step: epoch 0's factor applies too.
std::vector<double> MultiplicativeLR::restart_lr() {
  std::vector<double> out(num_groups());
  for (size_t g = 0; g < out.size(); ++g) out[g] = group_lr(g) * lambdas_[g](0);
  return out;
}

// ---- cosine recursion shared by CosineAnnealingLR and LinearWarmupCosine ----

namespace {

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

std::vector<double> CosineAnnealingLR::restart_lr() {
  std::vector<double> out(num_groups());
  for (size_t g = 0; g < out.size(); ++g) out[g] = cosine_closed_form(base_lrs_[g], eta_min_, 0, t_max_);
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
  check_start_factor("LinearWarmupCosine", warmup_start_factor);
  initial_step();
}

std::vector<double> LinearWarmupCosine::get_lr() {
  std::vector<double> out(num_groups());
  const int64_t e = last_epoch_;
  for (size_t g = 0; g < out.size(); ++g) {
    const double lr = group_lr(g);
    if (e < warmup_) {
      // LinearLR(start_factor, end_factor = 1, total_iters = warmup).
      out[g] = e == 0 ? lr * start_factor_ : lr * linear_multiplier(start_factor_, 1.0, warmup_, e);
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

// SequentialLR's epoch 0: LinearLR's closed form, or the cosine's without a warm-up.
std::vector<double> LinearWarmupCosine::restart_lr() {
  std::vector<double> out(num_groups());
  for (size_t g = 0; g < out.size(); ++g)
    out[g] = warmup_ == 0 ? cosine_closed_form(base_lrs_[g], eta_min_, 0, t_max_) : base_lrs_[g] * start_factor_;
  return out;
}

// ---- CosineAnnealingWarmRestarts ----

CosineAnnealingWarmRestarts::CosineAnnealingWarmRestarts(Optimizer& optimizer, int64_t T_0, int64_t T_mult,
                                                         double eta_min)
    : LRScheduler(optimizer), t_0_(T_0), t_mult_(T_mult), eta_min_(eta_min) {
  WEFT_CHECK(T_0 > 0, "CosineAnnealingWarmRestarts: Expected positive integer T_0, but got ", T_0);
  WEFT_CHECK(T_mult >= 1, "CosineAnnealingWarmRestarts: Expected integer T_mult >= 1, but got ", T_mult);
  WEFT_CHECK(!std::isnan(eta_min), "CosineAnnealingWarmRestarts: eta_min is NaN");
  initial_step();
}

CosineAnnealingWarmRestarts::Cycle CosineAnnealingWarmRestarts::cycle_at(int64_t epoch) const {
  // PyTorch's step() without an epoch: T_cur += 1, and at T_i a restart (T_cur -= T_i, T_i *= T_mult).
  Cycle c{epoch, t_0_};
  while (c.t_cur >= c.t_i) {
    c.t_cur -= c.t_i;
    c.t_i *= t_mult_;
  }
  return c;
}

std::vector<double> CosineAnnealingWarmRestarts::get_lr() {
  const Cycle c = cycle_at(last_epoch_);
  std::vector<double> out(num_groups());
  for (size_t g = 0; g < out.size(); ++g) out[g] = cosine_closed_form(base_lrs_[g], eta_min_, c.t_cur, c.t_i);
  return out;
}

// ---- PolynomialLR ----

PolynomialLR::PolynomialLR(Optimizer& optimizer, int64_t total_iters, double power)
    : LRScheduler(optimizer), total_iters_(total_iters), power_(power) {
  WEFT_CHECK(total_iters >= 0, "PolynomialLR: total_iters must be >= 0, got ", total_iters);
  WEFT_CHECK(!std::isnan(power), "PolynomialLR: power is NaN");
  initial_step();
}

std::vector<double> PolynomialLR::get_lr() {
  const int64_t e = last_epoch_;
  if (e == 0 || e > total_iters_) return group_lrs_times(1.0);
  // PyTorch's recursive form: the ratio of this epoch's factor to the last one's.
  const double n = static_cast<double>(total_iters_);
  const double decay = std::pow((1.0 - e / n) / (1.0 - (e - 1) / n), power_);
  return group_lrs_times(decay);
}

std::vector<double> PolynomialLR::restart_lr() {
  WEFT_CHECK(total_iters_ != 0, "PolynomialLR: restarting at epoch 0 with total_iters 0 (PyTorch's closed form ",
             "divides by total_iters)");
  return base_lrs_times(1.0);  // (1 - 0 / total_iters) ** power
}

// ---- OneCycleLR ----

OneCycleLR::OneCycleLR(Optimizer& optimizer, const PerGroup& max_lr, int64_t total_steps,
                       const OneCycleLROptions& options)
    : LRScheduler(optimizer), total_steps_(total_steps), anneal_(options.anneal_strategy) {
  WEFT_CHECK(total_steps > 0, "OneCycleLR: Expected positive integer total_steps, but got ", total_steps);
  const double pct_start = options.pct_start;
  WEFT_CHECK(pct_start >= 0 && pct_start <= 1, "OneCycleLR: Expected float between 0 and 1 pct_start, but got ",
             pct_start);
  WEFT_CHECK(anneal_ == AnnealStrategy::kCos || anneal_ == AnnealStrategy::kLinear,
             "OneCycleLR: anneal_strategy must be kCos or kLinear, got ", static_cast<int>(anneal_));
  WEFT_CHECK(options.div_factor > 0,
             "OneCycleLR: div_factor must be positive (the initial lr is max_lr / div_factor), ", "got ",
             options.div_factor);
  WEFT_CHECK(options.final_div_factor > 0,
             "OneCycleLR: final_div_factor must be positive (the min lr is the initial lr / final_div_factor), got ",
             options.final_div_factor);
  const double T = static_cast<double>(total_steps);
  if (options.three_phase) {
    phases_ = {{pct_start * T - 1, Point::kInitial, Point::kMax},
               {2 * pct_start * T - 2, Point::kMax, Point::kInitial},
               {T - 1, Point::kInitial, Point::kMin}};
  } else {
    phases_ = {{pct_start * T - 1, Point::kInitial, Point::kMax}, {T - 1, Point::kMax, Point::kMin}};
  }
  max_lrs_ = max_lr.resolve("OneCycleLR", "max_lr", optimizer);
  if (options.cycle_momentum)
    momentum_ = detail::CycledMomentum("OneCycleLR", optimizer, options.base_momentum, options.max_momentum);
  auto& groups = optimizer.param_groups();
  for (size_t g = 0; g < max_lrs_.size(); ++g) {
    base_lrs_[g] = max_lrs_[g] / options.div_factor;
    groups[g].initial_lr = base_lrs_[g];  // PyTorch overwrites group["initial_lr"]
    min_lrs_.push_back(base_lrs_[g] / options.final_div_factor);
  }
  initial_step();
}

double OneCycleLR::anneal(double start, double end, double pct) const {
  if (anneal_ == AnnealStrategy::kCos) {
    const double cos_out = std::cos(kPi * pct) + 1;
    return end + (start - end) / 2.0 * cos_out;
  }
  return (end - start) * pct + start;
}

double OneCycleLR::lr_at(size_t g, Point p) const {
  return p == Point::kInitial ? base_lrs_[g] : p == Point::kMax ? max_lrs_[g] : min_lrs_[g];
}

// The momentum moves against the lr: max_momentum at the initial and min lrs, base_momentum at max_lr.
double OneCycleLR::momentum_at(size_t g, Point p) const {
  return p == Point::kMax ? momentum_.base()[g] : momentum_.max()[g];
}

std::vector<double> OneCycleLR::get_lr() {
  const int64_t step_num = last_epoch_;
  WEFT_CHECK(step_num <= total_steps_, "OneCycleLR: Tried to step ", step_num,
             " times. The specified number of total steps is ", total_steps_);
  double start_step = 0.0;
  size_t i = 0;
  for (; i + 1 < phases_.size() && !(step_num <= phases_[i].end_step); ++i) start_step = phases_[i].end_step;
  const Phase& phase = phases_[i];
  WEFT_CHECK(phase.end_step != start_step, "OneCycleLR: step ", step_num, " falls in phase ", i + 1, " of ",
             phases_.size(), ", which has no length (it starts and ends at step ", start_step, " of total_steps ",
             total_steps_, "); PyTorch fails here with a division by zero. Choose another pct_start");
  const double pct = (static_cast<double>(step_num) - start_step) / (phase.end_step - start_step);
  std::vector<double> lrs(num_groups());
  for (size_t g = 0; g < lrs.size(); ++g) lrs[g] = anneal(lr_at(g, phase.start), lr_at(g, phase.end), pct);
  if (momentum_.on()) {
    std::vector<double> momentums(num_groups());
    for (size_t g = 0; g < momentums.size(); ++g)
      momentums[g] = anneal(momentum_at(g, phase.start), momentum_at(g, phase.end), pct);
    momentum_.apply(optimizer_, std::move(momentums));
  }
  return lrs;
}

std::vector<std::string> OneCycleLR::extra_state_keys() const {
  std::vector<std::string> keys{"max_lrs", "min_lrs"};
  for (auto& k : momentum_.state_keys()) keys.push_back(k);
  return keys;
}

void OneCycleLR::save_extra_state(SchedulerStateDict& sd) const {
  sd["max_lrs"] = per_group_tensor(max_lrs_);
  sd["min_lrs"] = per_group_tensor(min_lrs_);
  momentum_.save(sd);
}

void OneCycleLR::load_extra_state(const SchedulerStateDict& sd) {
  std::vector<double> max_lrs = per_group_entry(sd, "max_lrs"), min_lrs = per_group_entry(sd, "min_lrs");
  load_momentum(sd, momentum_);
  max_lrs_ = std::move(max_lrs);
  min_lrs_ = std::move(min_lrs);
}

// ---- CyclicLR ----

namespace {

// Checks CyclicLR's arguments before anything changes; returns the base lrs.
std::vector<double> cyclic_base_lrs(const Optimizer& optimizer, const PerGroup& base_lr, const PerGroup& max_lr,
                                    const CyclicLROptions& o) {
  WEFT_CHECK(o.step_size_up >= 1, "CyclicLR: step_size_up must be >= 1, got ", o.step_size_up);
  WEFT_CHECK(o.step_size_down >= 0 || o.step_size_down == -1,
             "CyclicLR: step_size_down must be >= 0 (or -1: step_size_up), got ", o.step_size_down);
  WEFT_CHECK(o.scale_fn || o.mode == CyclicMode::kTriangular || o.mode == CyclicMode::kTriangular2 ||
                 o.mode == CyclicMode::kExpRange,
             "CyclicLR: mode is invalid and scale_fn is None (mode ", static_cast<int>(o.mode), ")");
  WEFT_CHECK(o.scale_mode == CyclicScaleMode::kCycle || o.scale_mode == CyclicScaleMode::kIterations,
             "CyclicLR: scale_mode must be kCycle or kIterations, got ", static_cast<int>(o.scale_mode));
  max_lr.resolve("CyclicLR", "max_lr", optimizer);
  if (o.cycle_momentum) detail::CycledMomentum("CyclicLR", optimizer, o.base_momentum, o.max_momentum);
  return base_lr.resolve("CyclicLR", "base_lr", optimizer);
}

}  // namespace

CyclicLR::CyclicLR(Optimizer& optimizer, const PerGroup& base_lr, const PerGroup& max_lr,
                   const CyclicLROptions& options)
    : LRScheduler(optimizer, cyclic_base_lrs(optimizer, base_lr, max_lr, options)),
      mode_(options.mode),
      gamma_(options.gamma),
      scale_fn_(options.scale_fn),
      scale_mode_(options.scale_fn                        ? options.scale_mode
                  : options.mode == CyclicMode::kExpRange ? CyclicScaleMode::kIterations
                                                          : CyclicScaleMode::kCycle) {
  const double up = static_cast<double>(options.step_size_up);
  const double down = options.step_size_down == -1 ? up : static_cast<double>(options.step_size_down);
  total_size_ = up + down;
  step_ratio_ = up / total_size_;
  max_lrs_ = max_lr.resolve("CyclicLR", "max_lr", optimizer);
  if (options.cycle_momentum)
    momentum_ = detail::CycledMomentum("CyclicLR", optimizer, options.base_momentum, options.max_momentum);
  // As PyTorch, epoch 0 is computed from the groups' initial_lr (base_lr
  // unless an earlier scheduler set it) and base_lr is used from epoch 1.
  initial_step();
  base_lrs_ = base_lr.resolve("CyclicLR", "base_lr", optimizer);
}

double CyclicLR::scale(double x) const {
  if (scale_fn_) return scale_fn_(x);
  switch (mode_) {
    case CyclicMode::kTriangular: return 1.0;
    case CyclicMode::kTriangular2: return 1 / std::pow(2.0, x - 1);
    case CyclicMode::kExpRange: return std::pow(gamma_, x);
  }
  WEFT_INTERNAL_ASSERT(false, "CyclicLR: mode ", static_cast<int>(mode_));
  return 1.0;
}

std::vector<double> CyclicLR::get_lr() {
  const double e = static_cast<double>(last_epoch_);
  const double cycle = std::floor(1 + e / total_size_);
  const double x = 1.0 + e / total_size_ - cycle;
  const double scale_factor = x <= step_ratio_ ? x / step_ratio_ : (x - 1) / (step_ratio_ - 1);
  const double s = scale(scale_mode_ == CyclicScaleMode::kCycle ? cycle : e);
  std::vector<double> lrs(num_groups());
  for (size_t g = 0; g < lrs.size(); ++g) {
    const double base_height = (max_lrs_[g] - base_lrs_[g]) * scale_factor;
    lrs[g] = base_lrs_[g] + base_height * s;
  }
  if (momentum_.on()) {
    std::vector<double> momentums(num_groups());
    for (size_t g = 0; g < momentums.size(); ++g) {
      const double base_height = (momentum_.max()[g] - momentum_.base()[g]) * scale_factor;
      momentums[g] = momentum_.max()[g] - base_height * s;
    }
    momentum_.apply(optimizer_, std::move(momentums));
  }
  return lrs;
}

std::vector<std::string> CyclicLR::extra_state_keys() const {
  std::vector<std::string> keys{"max_lrs"};
  for (auto& k : momentum_.state_keys()) keys.push_back(k);
  return keys;
}

void CyclicLR::save_extra_state(SchedulerStateDict& sd) const {
  sd["max_lrs"] = per_group_tensor(max_lrs_);
  momentum_.save(sd);
}

void CyclicLR::load_extra_state(const SchedulerStateDict& sd) {
  std::vector<double> max_lrs = per_group_entry(sd, "max_lrs");
  load_momentum(sd, momentum_);
  max_lrs_ = std::move(max_lrs);
}

// ---- ReduceLROnPlateau ----

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& optimizer, const ReduceLROnPlateauOptions& options)
    : LRScheduler(optimizer), options_(options) {
  using O = ReduceLROnPlateauOptions;
  WEFT_CHECK(options.factor < 1.0, "ReduceLROnPlateau: Factor should be < 1.0, got ", options.factor);
  WEFT_CHECK(options.mode == O::Mode::kMin || options.mode == O::Mode::kMax, "ReduceLROnPlateau: mode ",
             static_cast<int>(options.mode), " is unknown!");
  WEFT_CHECK(options.threshold_mode == O::ThresholdMode::kRel || options.threshold_mode == O::ThresholdMode::kAbs,
             "ReduceLROnPlateau: threshold mode ", static_cast<int>(options.threshold_mode), " is unknown!");
  WEFT_CHECK(options.patience >= 0, "ReduceLROnPlateau: patience must be >= 0, got ", options.patience);
  WEFT_CHECK(options.cooldown >= 0, "ReduceLROnPlateau: cooldown must be >= 0, got ", options.cooldown);
  const size_t n = num_groups();
  WEFT_CHECK(!options.min_lr.per_group() || options.min_lr.size() == n, "ReduceLROnPlateau: expected ", n,
             " min_lrs, got ", options.min_lr.size());
  min_lrs_ = options.min_lr.resolve("ReduceLROnPlateau", "min_lr", optimizer);
  best_ = options.mode == O::Mode::kMin ? std::numeric_limits<double>::infinity()
                                        : -std::numeric_limits<double>::infinity();
  last_epoch_ = 0;
  set_lrs(group_lrs_times(1.0));
}

void ReduceLROnPlateau::step() {
  WEFT_ERROR("ReduceLROnPlateau.step: needs the metric it watches; call step(metric), e.g. with the epoch's ",
             "validation loss");
}

void ReduceLROnPlateau::step(double metric) {
  metric_ = metric;
  LRScheduler::step();
}

bool ReduceLROnPlateau::is_better(double a) const {
  using O = ReduceLROnPlateauOptions;
  const double t = options_.threshold;
  if (options_.mode == O::Mode::kMin) {
    if (options_.threshold_mode == O::ThresholdMode::kRel) {
      const double rel_epsilon = 1.0 - t;
      return a < best_ * rel_epsilon;
    }
    return a < best_ - t;
  }
  if (options_.threshold_mode == O::ThresholdMode::kRel) {
    const double rel_epsilon = t + 1.0;
    return a > best_ * rel_epsilon;
  }
  return a > best_ + t;
}

std::vector<double> ReduceLROnPlateau::get_lr() {
  if (is_better(metric_)) {  // a NaN metric compares false: never better
    best_ = metric_;
    num_bad_epochs_ = 0;
  } else {
    ++num_bad_epochs_;
  }
  if (cooldown_counter_ > 0) {
    --cooldown_counter_;
    num_bad_epochs_ = 0;  // bad epochs in cooldown are not counted
  }
  std::vector<double> lrs = group_lrs_times(1.0);
  if (num_bad_epochs_ > options_.patience) {
    for (size_t g = 0; g < lrs.size(); ++g) {
      const double old_lr = lrs[g];
      const double new_lr = std::max(old_lr * options_.factor, min_lrs_[g]);
      if (old_lr - new_lr > options_.eps) lrs[g] = new_lr;
    }
    cooldown_counter_ = options_.cooldown;
    num_bad_epochs_ = 0;
  }
  return lrs;
}

std::vector<std::string> ReduceLROnPlateau::extra_state_keys() const {
  return {"best", "num_bad_epochs", "cooldown_counter"};
}

void ReduceLROnPlateau::save_extra_state(SchedulerStateDict& sd) const {
  sd["best"] = scalar_tensor(best_, TensorOptions{DType::Float64});
  sd["num_bad_epochs"] = scalar_tensor(num_bad_epochs_, TensorOptions{DType::Int64});
  sd["cooldown_counter"] = scalar_tensor(cooldown_counter_, TensorOptions{DType::Int64});
}

void ReduceLROnPlateau::load_extra_state(const SchedulerStateDict& sd) {
  const Tensor &best = sd.at("best"), &bad = sd.at("num_bad_epochs"), &cooldown = sd.at("cooldown_counter");
  WEFT_CHECK(best.numel() == 1 && best.is_floating_point(),
             "ReduceLROnPlateau.load_state_dict: best must be one floating-point value, got shape ",
             shape_str(best.sizes()), " and dtype ", best.dtype());
  for (const auto& [name, t] :
       {std::pair<const char*, const Tensor*>{"num_bad_epochs", &bad}, {"cooldown_counter", &cooldown}})
    WEFT_CHECK(t->numel() == 1 && !t->is_floating_point() && t->item<int64_t>() >= 0,
               "ReduceLROnPlateau.load_state_dict: ", name, " must be one integer >= 0, got shape ",
               shape_str(t->sizes()), " and dtype ", t->dtype());
  best_ = best.item<double>();
  num_bad_epochs_ = bad.item<int64_t>();
  cooldown_counter_ = cooldown.item<int64_t>();
}

}  // namespace weft::optim
