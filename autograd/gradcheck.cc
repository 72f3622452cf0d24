#include "autograd/gradcheck.h"

#include <cmath>
#include <sstream>

#include "autograd/engine.h"
#include "core/ops.h"

namespace weft::autograd {
namespace {

// Deterministic projection vector in [-1, 1] (splitmix64), independent of weft's RNG.
Tensor projection(const Shape& sizes, uint64_t seed) {
  Tensor v = empty(sizes, {DType::Float64});
  double* p = v.data_ptr<double>();
  uint64_t s = seed + 0x9e3779b97f4a7c15ull;
  for (int64_t i = 0; i < v.numel(); ++i) {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    p[i] = static_cast<double>(z >> 11) / static_cast<double>(1ull << 53) * 2.0 - 1.0;
  }
  return v;
}

double dot(const Tensor& a, const Tensor& v) {
  Tensor c = a.detach().cpu().to(DType::Float64).contiguous();
  const double* x = c.data_ptr<double>();
  const double* y = v.data_ptr<double>();
  double s = 0;
  for (int64_t i = 0; i < c.numel(); ++i) s += x[i] * y[i];
  return s;
}

}  // namespace

GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& opts) {
  GradcheckResult res;
  std::vector<Tensor> diff_inputs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& in = inputs[i];
    if (!in.defined() || !in.requires_grad()) continue;
    WEFT_CHECK(in.dtype() == DType::Float64, "gradcheck: input ", i, " must be float64, got ", in.dtype());
    WEFT_CHECK(in.is_leaf(), "gradcheck: input ", i, " must be a leaf tensor");
    diff_inputs.push_back(in);
  }
  WEFT_CHECK(!diff_inputs.empty(), "gradcheck: no input requires grad");

  Tensor out = fn(inputs);
  WEFT_CHECK(out.dtype() == DType::Float64, "gradcheck: output must be float64, got ", out.dtype());
  Tensor v = projection(out.sizes(), opts.seed);
  std::vector<Tensor> analytical;
  if (out.requires_grad()) {
    analytical = grad({out}, diff_inputs, {v.to(out.device())}, false, /*create_graph=*/false, /*allow_unused=*/true);
  } else {
    analytical.resize(diff_inputs.size());
  }

  NoGradGuard no_grad;
  for (size_t k = 0; k < diff_inputs.size(); ++k) {
    const Tensor& x = diff_inputs[k];
    // Perturb a host buffer: x itself when it is a contiguous CPU tensor, else a
    // host mirror copied into x (any device) after every change.
    WEFT_CHECK(x.is_contiguous(), "gradcheck: inputs must be contiguous");
    const bool direct = x.device().is_cpu();
    Tensor host = direct ? x : x.detach().cpu().contiguous();
    Tensor alias = x.detach();
    double* p = host.data_ptr<double>();
    auto sync = [&] {
      if (!direct) copy_(alias, host);
    };
    Tensor a = analytical[k].defined() ? analytical[k].cpu().to(DType::Float64).contiguous()
                                       : zeros(x.sizes(), {DType::Float64});
    const double* ap = a.data_ptr<double>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      double orig = p[i];
      p[i] = orig + opts.eps;
      sync();
      double fp = dot(fn(inputs), v);
      p[i] = orig - opts.eps;
      sync();
      double fm = dot(fn(inputs), v);
      p[i] = orig;
      sync();
      double num = (fp - fm) / (2 * opts.eps);
      if (!(std::abs(num - ap[i]) <= opts.atol + opts.rtol * std::abs(num))) {
        std::ostringstream os;
        os << "gradcheck: mismatch for differentiable input " << k << " (shape " << shape_str(x.sizes())
           << ") at flat index " << i << ": numerical " << num << " vs analytical " << ap[i];
        res.ok = false;
        res.message = os.str();
        return res;
      }
    }
  }
  return res;
}

GradcheckResult gradgradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                              const std::vector<Tensor>& inputs, const GradcheckOptions& opts) {
  Tensor w;
  {
    NoGradGuard no_grad;
    const Tensor out = fn(inputs);
    WEFT_CHECK(out.dtype() == DType::Float64, "gradgradcheck: output must be float64, got ", out.dtype());
    w = projection(out.sizes(), opts.seed + 1).to(out.device());
  }
  auto first = [&](const std::vector<Tensor>& in) {
    EnableGradGuard grad_mode;  // gradcheck perturbs under NoGradGuard
    std::vector<Tensor> diff;
    for (const Tensor& t : in)
      if (t.defined() && t.requires_grad()) diff.push_back(t);
    const Tensor out = fn(in);
    std::vector<Tensor> gs;
    if (out.requires_grad())
      gs = grad({sum(out * w)}, diff, {}, std::nullopt, /*create_graph=*/true, /*allow_unused=*/true);
    std::vector<Tensor> flat;
    for (size_t i = 0; i < diff.size(); ++i)
      flat.push_back((i < gs.size() && gs[i].defined() ? gs[i] : zeros_like(diff[i])).reshape({-1}));
    return cat(flat, 0);
  };
  return gradcheck(first, inputs, opts);
}

}  // namespace weft::autograd
