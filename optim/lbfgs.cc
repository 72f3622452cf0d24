// L-BFGS: PyTorch's algorithm (torch/optim/lbfgs.py) step for step, with the
// flat vectors as weft tensors of the parameters' dtype and the scalars in double.
#include "optim/lbfgs.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <utility>

#include "core/autograd_meta.h"

namespace weft::optim {

namespace {

constexpr const char* kStep = "LBFGS.step";
constexpr const char* kLoad = "LBFGS.load_state_dict";

double dot(const Tensor& a, const Tensor& b) { return sum(mul(a, b)).item<double>(); }
double max_abs(const Tensor& a) { return a.numel() == 0 ? 0.0 : amax(abs(a)).item<double>(); }

// The minimiser of the cubic through (x1, f1) and (x2, f2) with slopes g1, g2,
// clamped to [lo, hi] (by default the points' interval); the interval's middle
// when the cubic has no minimum.
double cubic_interpolate(double x1, double f1, double g1, double x2, double f2, double g2,
                         std::optional<std::pair<double, double>> bounds = std::nullopt) {
  const auto [lo, hi] = bounds ? *bounds : (x1 <= x2 ? std::pair{x1, x2} : std::pair{x2, x1});
  const double d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2);
  const double d2_square = d1 * d1 - g1 * g2;
  if (d2_square >= 0) {
    const double d2 = std::sqrt(d2_square);
    const double min_pos = x1 <= x2 ? x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
                                    : x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2));
    return std::min(std::max(min_pos, lo), hi);
  }
  return (lo + hi) / 2.0;
}

int64_t as_count(const OptionMap& o, const char* key) { return static_cast<int64_t>(o.at(key)); }

}  // namespace

OptionMap LBFGSOptions::to_map() const {
  return {{"lr", lr},
          {"max_iter", static_cast<double>(max_iter)},
          {"max_eval", static_cast<double>(max_eval.value_or(max_iter * 5 / 4))},
          {"tolerance_grad", tolerance_grad},
          {"tolerance_change", tolerance_change},
          {"history_size", static_cast<double>(history_size)},
          {"line_search_fn", line_search == LineSearch::StrongWolfe ? 1.0 : 0.0},
          {"maximize", maximize ? 1.0 : 0.0}};
}

LBFGS::LBFGS(std::vector<Tensor> params, const LBFGSOptions& options) : Optimizer("LBFGS", options.to_map()) {
  init_groups({ParamGroup(std::move(params))});
  numel();
}

LBFGS::LBFGS(const NamedParameters& named_params, const LBFGSOptions& options) : Optimizer("LBFGS", options.to_map()) {
  init_groups({ParamGroup(named_params)});
  numel();
}

void LBFGS::validate(const OptionMap& o) const {
  auto whole = [&](const char* key, double lowest) {
    const double v = o.at(key);
    WEFT_CHECK(v >= lowest && v == std::floor(v), "LBFGS: ", key, " must be a whole number of at least ", lowest,
               ", got ", v);
  };
  WEFT_CHECK(o.at("lr") >= 0.0, "LBFGS: Invalid learning rate: ", o.at("lr"));
  whole("max_iter", 1);
  whole("max_eval", 1);
  whole("history_size", 1);
  WEFT_CHECK(o.at("tolerance_grad") >= 0.0 && o.at("tolerance_change") >= 0.0,
             "LBFGS: tolerances must be non-negative, got tolerance_grad ", o.at("tolerance_grad"),
             " and tolerance_change ", o.at("tolerance_change"));
  const double ls = o.at("line_search_fn");
  WEFT_CHECK(ls == 0.0 || ls == 1.0, "LBFGS: line_search_fn must be 0 (none) or 1 (strong_wolfe), got ", ls);
}

void LBFGS::update(ParamGroup&) {
  WEFT_CHECK(false, "LBFGS: step() needs a closure that re-evaluates the model and returns the loss: step(closure)");
}

std::vector<Tensor>& LBFGS::params() {
  WEFT_CHECK(param_groups().size() == 1, "LBFGS doesn't support per-parameter options (parameter groups): it has ",
             param_groups().size(), " groups");
  return param_groups()[0].params;
}

int64_t LBFGS::numel() {
  const std::vector<Tensor>& ps = params();
  int64_t n = 0;
  for (const Tensor& p : ps) {
    WEFT_CHECK(p.dtype() == ps[0].dtype() && p.device() == ps[0].device(),
               "LBFGS: every parameter must share one dtype and device (they form one flat vector); got ",
               ps[0].dtype(), " on ", ps[0].device(), " and ", p.dtype(), " on ", p.device());
    n += p.numel();
  }
  return n;
}

Tensor LBFGS::flat_grad() {
  std::vector<Tensor> views;
  for (const Tensor& p : params()) {
    const Tensor g = p.grad();
    views.push_back(g.defined() ? g.reshape({-1}) : zeros({p.numel()}, p.options()));
  }
  Tensor flat = cat(views, 0);  // (n)
  return param_groups()[0].get("maximize") != 0.0 ? neg(flat) : flat;
}

void LBFGS::add_to_params(double t, const Tensor& d) {
  int64_t offset = 0;
  for (Tensor& p : params()) {
    const int64_t n = p.numel();
    add_(p, d.narrow(0, offset, n).view(p.sizes()), t);
    offset += n;
  }
}

LBFGS::Eval LBFGS::evaluate(const Closure& closure) {
  Tensor loss;
  {
    EnableGradGuard grad_on;
    loss = closure();
  }
  WEFT_CHECK(loss.defined() && loss.numel() == 1, kStep, ": the closure must return the loss, one value; got ",
             loss.defined() ? shape_str(loss.sizes()) : std::string("an undefined tensor"));
  const double v = loss.item<double>();
  return {param_groups()[0].get("maximize") != 0.0 ? -v : v, flat_grad(), loss};
}

LBFGS::Eval LBFGS::evaluate_at(const Closure& closure, const std::vector<Tensor>& x, double t, const Tensor& d) {
  add_to_params(t, d);
  Eval e = evaluate(closure);
  std::vector<Tensor>& ps = params();
  for (size_t i = 0; i < ps.size(); ++i) ps[i].copy_(x[i]);
  return e;
}

LBFGS::Search LBFGS::strong_wolfe(const Closure& closure, double t, const Tensor& d, double f, const Tensor& g,
                                  double gtd, int64_t max_ls) {
  constexpr double c1 = 1e-4, c2 = 0.9, tolerance_change = 1e-9;  // PyTorch's defaults for the search
  const double d_norm = max_abs(d);
  std::vector<Tensor> x;
  for (const Tensor& p : params()) x.push_back(p.clone());
  Eval e = evaluate_at(closure, x, t, d);
  int64_t evals = 1;
  double f_new = e.loss, gtd_new = dot(e.grad, d);
  Tensor g_new = e.grad;
  double t_prev = 0, f_prev = f, gtd_prev = gtd;
  Tensor g_prev = g;

  // Bracket an interval containing a point that satisfies the Wolfe conditions.
  double br[2] = {0, 0}, br_f[2] = {0, 0}, br_gtd[2] = {0, 0};
  Tensor br_g[2];
  int size = 0;
  bool done = false;
  int64_t ls_iter = 0;
  auto bracket = [&](double t0, double f0, const Tensor& g0, double gtd0, double t1, double f1, const Tensor& g1,
                     double gtd1) {
    br[0] = t0, br_f[0] = f0, br_g[0] = g0, br_gtd[0] = gtd0;
    br[1] = t1, br_f[1] = f1, br_g[1] = g1, br_gtd[1] = gtd1;
    size = 2;
  };
  while (ls_iter < max_ls) {
    if (f_new > f + c1 * t * gtd || (ls_iter > 1 && f_new >= f_prev)) {
      bracket(t_prev, f_prev, g_prev, gtd_prev, t, f_new, g_new, gtd_new);
      break;
    }
    if (std::abs(gtd_new) <= -c2 * gtd) {
      br[0] = t, br_f[0] = f_new, br_g[0] = g_new;
      size = 1;
      done = true;
      break;
    }
    if (gtd_new >= 0) {
      bracket(t_prev, f_prev, g_prev, gtd_prev, t, f_new, g_new, gtd_new);
      break;
    }
    const double min_step = t + 0.01 * (t - t_prev), max_step = t * 10, tmp = t;
    t = cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, std::pair{min_step, max_step});
    t_prev = tmp, f_prev = f_new, g_prev = g_new, gtd_prev = gtd_new;
    e = evaluate_at(closure, x, t, d);
    ++evals;
    f_new = e.loss, g_new = e.grad, gtd_new = dot(g_new, d);
    ++ls_iter;
  }
  if (ls_iter == max_ls) bracket(0, f, g, 0, t, f_new, g_new, 0);  // the slopes are not used: no zoom follows

  // Zoom: shrink the bracket until a point satisfies the conditions.
  bool insufficient_progress = false;
  int low = br_f[0] <= br_f[size - 1] ? 0 : 1, high = 1 - low;
  while (!done && ls_iter < max_ls) {
    if (std::abs(br[1] - br[0]) * d_norm < tolerance_change) break;
    t = cubic_interpolate(br[0], br_f[0], br_gtd[0], br[1], br_f[1], br_gtd[1]);
    // Too close to an end of the bracket: move to 0.1 of its length from it when
    // the last step also made little progress, or t is at or past an end.
    const double hi = std::max(br[0], br[1]), lo = std::min(br[0], br[1]), eps = 0.1 * (hi - lo);
    if (std::min(hi - t, t - lo) < eps) {
      if (insufficient_progress || t >= hi || t <= lo) {
        t = std::abs(t - hi) < std::abs(t - lo) ? hi - eps : lo + eps;
        insufficient_progress = false;
      } else {
        insufficient_progress = true;
      }
    } else {
      insufficient_progress = false;
    }
    e = evaluate_at(closure, x, t, d);
    ++evals;
    f_new = e.loss, g_new = e.grad, gtd_new = dot(g_new, d);
    ++ls_iter;
    if (f_new > f + c1 * t * gtd || f_new >= br_f[low]) {  // Armijo fails, or no lower than the low end
      br[high] = t, br_f[high] = f_new, br_g[high] = g_new, br_gtd[high] = gtd_new;
      low = br_f[0] <= br_f[1] ? 0 : 1, high = 1 - low;
    } else {
      if (std::abs(gtd_new) <= -c2 * gtd) {
        done = true;
      } else if (gtd_new * (br[high] - br[low]) >= 0) {  // the old high end becomes the new low end
        br[high] = br[low], br_f[high] = br_f[low], br_g[high] = br_g[low], br_gtd[high] = br_gtd[low];
      }
      br[low] = t, br_f[low] = f_new, br_g[low] = g_new, br_gtd[low] = gtd_new;
    }
  }
  return {br_f[low], br[low], br_g[low], evals};
}

Tensor LBFGS::step(const Closure& closure) {
  WEFT_CHECK(static_cast<bool>(closure), kStep, ": the closure is empty");
  const ParamGroup& group = param_groups()[0];
  numel();  // one group, one dtype and device
  const double lr = group.get("lr"), tolerance_grad = group.get("tolerance_grad"),
               tolerance_change = group.get("tolerance_change");
  const int64_t max_iter = as_count(group.options, "max_iter"), max_eval = as_count(group.options, "max_eval"),
                history_size = as_count(group.options, "history_size");
  const bool line_search = group.get("line_search_fn") != 0.0;
  NoGradGuard no_grad;
  if (params().empty()) {
    EnableGradGuard grad_on;
    return closure();
  }

  Eval e = evaluate(closure);
  const Tensor orig_loss = e.value;
  double loss = e.loss;
  Tensor flat = e.grad;  // (n)
  int64_t current_evals = 1;
  ++func_evals_;
  bool opt_cond = max_abs(flat) <= tolerance_grad;
  if (opt_cond) return orig_loss;

  for (int64_t n_iter = 1; n_iter <= max_iter; ++n_iter) {
    ++n_iter_;
    // The direction: the negative gradient first, then the two-loop recursion.
    if (n_iter_ == 1) {
      d_ = neg(flat);
      old_dirs_.clear(), old_stps_.clear(), ro_.clear();
      h_diag_ = 1;
    } else {
      const Tensor y = sub(flat, prev_flat_grad_), s = d_ * t_;  // (n)
      const double ys = dot(y, s);
      if (ys > 1e-10) {
        if (static_cast<int64_t>(old_dirs_.size()) >= history_size) {
          const auto drop = old_dirs_.size() - static_cast<size_t>(history_size) + 1;
          old_dirs_.erase(old_dirs_.begin(), old_dirs_.begin() + static_cast<std::ptrdiff_t>(drop));
          old_stps_.erase(old_stps_.begin(), old_stps_.begin() + static_cast<std::ptrdiff_t>(drop));
          ro_.erase(ro_.begin(), ro_.begin() + static_cast<std::ptrdiff_t>(drop));
        }
        old_dirs_.push_back(y), old_stps_.push_back(s), ro_.push_back(1.0 / ys);
        h_diag_ = ys / dot(y, y);
      }
      const size_t k = old_dirs_.size();
      std::vector<double> al(k);
      Tensor q = neg(flat);
      for (size_t i = k; i-- > 0;) {
        al[i] = dot(old_stps_[i], q) * ro_[i];
        add_(q, old_dirs_[i], -al[i]);
      }
      Tensor r = q * h_diag_;
      for (size_t i = 0; i < k; ++i) {
        const double be = dot(old_dirs_[i], r) * ro_[i];
        add_(r, old_stps_[i], al[i] - be);
      }
      d_ = r;
    }
    prev_flat_grad_ = flat;  // flat is never changed in place: each evaluation makes a new one
    prev_loss_ = loss;
    // The step: scaled by the gradient's 1-norm on the very first iteration.
    t_ = n_iter_ == 1 ? std::min(1.0, 1.0 / abs(flat).sum().item<double>()) * lr : lr;
    const double gtd = dot(flat, d_);
    if (gtd > -tolerance_change) break;  // not a descent direction any more

    int64_t ls_evals = 0;
    if (line_search) {
      Search s = strong_wolfe(closure, t_, d_, loss, flat, gtd, max_eval - current_evals);
      loss = s.loss, flat = s.grad, t_ = s.t, ls_evals = s.evals;
      add_to_params(t_, d_);
      opt_cond = max_abs(flat) <= tolerance_grad;
    } else {
      add_to_params(t_, d_);
      if (n_iter != max_iter) {  // the last iteration's loss is not needed
        e = evaluate(closure);
        loss = e.loss, flat = e.grad, ls_evals = 1;
        opt_cond = max_abs(flat) <= tolerance_grad;
      }
    }
    current_evals += ls_evals;
    func_evals_ += ls_evals;

    if (n_iter == max_iter || current_evals >= max_eval || opt_cond) break;
    if (max_abs(d_ * t_) <= tolerance_change) break;  // no progress in the parameters
    if (std::abs(loss - prev_loss_) < tolerance_change) break;
  }
  return orig_loss;
}

// ---- state dict ----

OptimizerStateDict LBFGS::state_dict() const {
  OptimizerStateDict sd = Optimizer::state_dict();
  if (func_evals_ == 0) return sd;
  const TensorOptions i64{DType::Int64}, f64{DType::Float64};
  sd["lbfgs.func_evals"] = scalar_tensor(func_evals_, i64);
  sd["lbfgs.n_iter"] = scalar_tensor(n_iter_, i64);
  if (!d_.defined()) return sd;
  const int64_t n = d_.numel();
  sd["lbfgs.d"] = d_;
  sd["lbfgs.prev_flat_grad"] = prev_flat_grad_;
  sd["lbfgs.t"] = scalar_tensor(t_, f64);
  sd["lbfgs.H_diag"] = scalar_tensor(h_diag_, f64);
  sd["lbfgs.prev_loss"] = scalar_tensor(prev_loss_, f64);
  sd["lbfgs.old_dirs"] = old_dirs_.empty() ? empty({0, n}, d_.options()) : stack(old_dirs_);  // (k, n)
  sd["lbfgs.old_stps"] = old_stps_.empty() ? empty({0, n}, d_.options()) : stack(old_stps_);  // (k, n)
  sd["lbfgs.ro"] = tensor(ro_, {static_cast<int64_t>(ro_.size())}).to(DType::Float64);        // (k)
  return sd;
}

void LBFGS::load_state_dict(const OptimizerStateDict& sd) {
  OptimizerStateDict base, mine;
  for (const auto& [k, v] : sd) (k.rfind("lbfgs.", 0) == 0 ? mine : base)[k] = v;
  // Check every entry of the history before anything changes.
  static const std::set<std::string> kKeys = {
      "lbfgs.func_evals", "lbfgs.n_iter",    "lbfgs.d",        "lbfgs.prev_flat_grad", "lbfgs.t",
      "lbfgs.H_diag",     "lbfgs.prev_loss", "lbfgs.old_dirs", "lbfgs.old_stps",       "lbfgs.ro"};
  for (const auto& [k, v] : mine) WEFT_CHECK(kKeys.count(k), kLoad, ": unexpected key ", k);
  auto get = [&](const std::string& k) -> const Tensor& {
    auto it = mine.find(k);
    WEFT_CHECK(it != mine.end(), kLoad, ": missing key ", k);
    return it->second;
  };
  auto scalar = [&](const std::string& k) {
    const Tensor& t = get(k);
    WEFT_CHECK(t.dim() == 0, kLoad, ": ", k, " must be 0-dim, got shape ", shape_str(t.sizes()));
    return t.item<double>();
  };
  const bool has_history = !mine.empty() && (mine.count("lbfgs.d") || scalar("lbfgs.n_iter") > 0);
  const int64_t n = numel();
  const Tensor* first = params().empty() ? nullptr : &params()[0];
  if (has_history) {
    WEFT_CHECK(first != nullptr, kLoad, ": a history for an optimizer without parameters");
    auto vec = [&](const std::string& k, Shape shape) {
      const Tensor& t = get(k);
      WEFT_CHECK(t.sizes() == shape && t.dtype() == first->dtype(), kLoad, ": ", k, " must be ", shape_str(shape),
                 " of ", first->dtype(), " (the parameters' ", n, " elements), got ", shape_str(t.sizes()), " of ",
                 t.dtype());
    };
    vec("lbfgs.d", {n});
    vec("lbfgs.prev_flat_grad", {n});
    const int64_t k = get("lbfgs.ro").numel();
    vec("lbfgs.old_dirs", {k, n});
    vec("lbfgs.old_stps", {k, n});
    WEFT_CHECK(get("lbfgs.ro").dim() == 1, kLoad, ": lbfgs.ro must be 1-dim");
    auto hs = base.find("param_groups.0.history_size");
    const double history = hs != base.end() ? hs->second.item<double>() : param_groups()[0].get("history_size");
    WEFT_CHECK(static_cast<double>(k) <= history, kLoad, ": ", k, " history pairs, more than history_size ", history);
    scalar("lbfgs.t"), scalar("lbfgs.H_diag"), scalar("lbfgs.prev_loss");
  }
  Optimizer::load_state_dict(base);
  func_evals_ = mine.empty() ? 0 : static_cast<int64_t>(scalar("lbfgs.func_evals"));
  n_iter_ = mine.empty() ? 0 : static_cast<int64_t>(scalar("lbfgs.n_iter"));
  d_ = prev_flat_grad_ = Tensor();
  old_dirs_.clear(), old_stps_.clear(), ro_.clear();
  t_ = 0, h_diag_ = 1, prev_loss_ = 0;
  if (!has_history) return;
  const Device dev = first->device();
  d_ = get("lbfgs.d").to(dev).clone();
  prev_flat_grad_ = get("lbfgs.prev_flat_grad").to(dev).clone();
  t_ = scalar("lbfgs.t"), h_diag_ = scalar("lbfgs.H_diag"), prev_loss_ = scalar("lbfgs.prev_loss");
  const Tensor dirs = get("lbfgs.old_dirs").to(dev), stps = get("lbfgs.old_stps").to(dev);
  const Tensor ro = get("lbfgs.ro").to(DType::Float64).contiguous();
  for (int64_t i = 0; i < ro.numel(); ++i) {
    old_dirs_.push_back(dirs.select(0, i).clone());
    old_stps_.push_back(stps.select(0, i).clone());
    ro_.push_back(ro.data_ptr<double>()[i]);
  }
}

}  // namespace weft::optim
