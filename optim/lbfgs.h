// L-BFGS (torch.optim.LBFGS): a quasi-Newton method that keeps the last
// history_size (s, y) pairs of steps and gradient changes, with an optional
// strong-Wolfe line search.
//
// Contract (PyTorch's, option for option):
// - One parameter group (PyTorch refuses groups too); its parameters share one
//   floating dtype and device and are treated as one flat vector.
// - step(closure) calls closure() (which clears the gradients, computes the
//   loss, runs backward and returns the loss) up to max_eval times, with grad
//   mode on, and runs up to max_iter iterations; it returns the loss of the
//   first call. step() without a closure is an error.
// - Each iteration: the two-loop recursion over the history gives the
//   direction d (the negative gradient on the first iteration); the step t
//   is min(1, 1 / |g|_1) * lr on the very first iteration, lr afterwards; with
//   LineSearch::StrongWolfe t comes from PyTorch's strong-Wolfe search (cubic
//   interpolation, c1 1e-4, c2 0.9, at most max_eval minus the evaluations so
//   far), else the parameters move by t d and the closure is evaluated again
//   (except on the last iteration). A pair enters the history when y.s > 1e-10.
// - It stops early when max |g| <= tolerance_grad, the directional derivative
//   is above -tolerance_change, max |t d| <= tolerance_change, or the loss
//   changes by less than tolerance_change.
// - maximize: the closure's loss and gradients are negated inside the method.
// - The history persists across step() calls and is in state_dict() (keys
//   "lbfgs.*": func_evals, n_iter, d, t, old_dirs and old_stps (k, n), ro (k),
//   H_diag, prev_flat_grad, prev_loss); load_state_dict() checks them against
//   the parameters before changing anything. The by-name state dicts hold the
//   options only.
// Scalars (step sizes, dot products, losses) are computed in double.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "optim/optimizer.h"

namespace weft::optim {

enum class LineSearch { None, StrongWolfe };

struct LBFGSOptions {
  double lr = 1;
  int64_t max_iter = 20;
  std::optional<int64_t> max_eval;  // default max_iter * 5 / 4
  double tolerance_grad = 1e-7;
  double tolerance_change = 1e-9;
  int64_t history_size = 100;
  LineSearch line_search = LineSearch::None;  // PyTorch's line_search_fn: None or "strong_wolfe"
  bool maximize = false;
  OptionMap to_map() const;  // line_search_fn: 0 none, 1 strong_wolfe
};

class LBFGS : public Optimizer {
 public:
  using Closure = std::function<Tensor()>;
  LBFGS(std::vector<Tensor> params, const LBFGSOptions& options = {});
  LBFGS(const NamedParameters& named_params, const LBFGSOptions& options = {});

  using Optimizer::step;  // refused: L-BFGS needs a closure
  Tensor step(const Closure& closure);

  OptimizerStateDict state_dict() const override;
  void load_state_dict(const OptimizerStateDict& sd) override;

  int64_t func_evals() const { return func_evals_; }
  int64_t n_iter() const { return n_iter_; }

 protected:
  void validate(const OptionMap& o) const override;
  void update(ParamGroup& group) override;
  std::vector<std::string> state_names() const override { return {}; }

 private:
  struct Eval {
    double loss;   // negated with maximize
    Tensor grad;   // (n) flat, negated with maximize
    Tensor value;  // what the closure returned
  };
  std::vector<Tensor>& params();
  int64_t numel();
  Tensor flat_grad();                             // (n), the gradients (zeros where undefined), negated with maximize
  void add_to_params(double t, const Tensor& d);  // p += t d, piece by piece
  Eval evaluate(const Closure& closure);          // closure() under grad mode, then the flat gradient
  Eval evaluate_at(const Closure& closure, const std::vector<Tensor>& x, double t, const Tensor& d);
  struct Search {
    double loss, t;
    Tensor grad;
    int64_t evals;
  };
  Search strong_wolfe(const Closure& closure, double t, const Tensor& d, double f, const Tensor& g, double gtd,
                      int64_t max_ls);

  // The history (PyTorch keeps it as the first parameter's state).
  int64_t func_evals_ = 0, n_iter_ = 0;
  Tensor d_, prev_flat_grad_;
  double t_ = 0, h_diag_ = 1, prev_loss_ = 0;
  std::vector<Tensor> old_dirs_, old_stps_;
  std::vector<double> ro_;
};

}  // namespace weft::optim
