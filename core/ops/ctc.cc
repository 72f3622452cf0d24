// ctc_loss: the connectionist temporal classification loss (PyTorch's
// F.ctc_loss), contract in core/nn_ops.h.
//
// First order: per sample, the forward (alpha) recursion over the extended
// label sequence (blanks around and between the labels) in log space, in double;
// the backward recomputes alpha, runs the beta recursion and gives
// d nll / d log_probs[t, c] = -exp(logsumexp_{s: l'(s) = c}(alpha_t(s) + beta_t(s)) + nll - log_probs[t, c])
// for t < the sample's input length, 0 after it. This is the derivative with
// respect to log_probs themselves; PyTorch's kernels add exp(log_probs), which
// log_softmax's backward cancels, so the gradients of the logits are the same.
// Samples run in parallel; the sums inside a sample are sequential, so results
// do not depend on the thread count. CUDA tensors are computed on the host.
//
// Double backward: the composite below (Note [composite double backward]) runs
// the same recursion with recorded ops in probability space, each step
// rescaled to sum 1 (Rabiner's scaling), so no -inf enters an op's derivative.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/autograd_meta.h"
#include "core/nn_ops.h"
#include "core/ops/elementwise_util.h"
#include "core/parallel.h"

namespace weft {
namespace {

constexpr const char* kOp = "ctc_loss";
constexpr double kNegInf = -std::numeric_limits<double>::infinity();

double log_add(double a, double b) {
  if (a == kNegInf) return b;
  if (b == kNegInf) return a;
  const double m = std::max(a, b);
  return m + std::log(std::exp(a - m) + std::exp(b - m));
}

// The checked lengths and labels of a batch.
struct Problem {
  int64_t T = 0, N = 0, C = 0, max_target = 0;
  std::vector<int64_t> input_len, target_len, target_off, labels;  // labels: every sample's, concatenated
  int64_t blank = 0;
  int64_t ext(int64_t n) const { return 2 * target_len[static_cast<size_t>(n)] + 1; }
  // The label at position s of sample n's extended sequence: blank at even s.
  int64_t label(int64_t n, int64_t s) const {
    return s % 2 == 0 ? blank : labels[static_cast<size_t>(target_off[static_cast<size_t>(n)] + s / 2)];
  }
};

std::vector<int64_t> int_values(const char* name, const Tensor& t, int64_t n) {
  WEFT_CHECK(t.defined() && (t.dtype() == DType::Int64 || t.dtype() == DType::Int32), kOp, ": ", name,
             " must be an int64 or int32 tensor, got ", t.defined() ? dtype_name(t.dtype()) : "an undefined tensor");
  WEFT_CHECK(t.numel() == n && t.dim() <= 1, kOp, ": ", name, " must hold one value per sample (", n, "), got shape ",
             shape_str(t.sizes()));
  const Tensor c = t.to(kCPU).to(DType::Int64).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + n);
}

Problem check(const Tensor& lp, const Tensor& targets, const Tensor& input_lengths, const Tensor& target_lengths,
              int64_t blank) {
  Problem p;
  WEFT_CHECK(lp.dim() == 3 && is_floating(lp.dtype()), kOp,
             ": log_probs must be floating (T, N, C) (or unbatched (T, C)), got ", shape_str(lp.sizes()), " of ",
             lp.dtype());
  p.T = lp.size(0), p.N = lp.size(1), p.C = lp.size(2), p.blank = blank;
  WEFT_CHECK(blank >= 0 && blank < p.C, kOp, ": blank ", blank, " must be in [0, ", p.C, ")");
  p.input_len = int_values("input_lengths", input_lengths, p.N);
  p.target_len = int_values("target_lengths", target_lengths, p.N);
  WEFT_CHECK(targets.defined() && (targets.dtype() == DType::Int64 || targets.dtype() == DType::Int32), kOp,
             ": targets must be int64 or int32");
  const Tensor tg = targets.to(kCPU).to(DType::Int64).contiguous();
  const int64_t* tv = tg.data_ptr<int64_t>();
  const bool padded = tg.dim() == 2;
  WEFT_CHECK(padded ? tg.size(0) == p.N : tg.dim() == 1, kOp, ": targets must be padded (N, S) = (", p.N,
             ", S) or concatenated (sum(target_lengths)), got ", shape_str(tg.sizes()));
  int64_t off = 0;
  for (int64_t n = 0; n < p.N; ++n) {
    const int64_t il = p.input_len[static_cast<size_t>(n)], tl = p.target_len[static_cast<size_t>(n)];
    WEFT_CHECK(il >= 0 && il <= p.T, kOp, ": input_lengths[", n, "] = ", il, " must be in [0, T = ", p.T, "]");
    WEFT_CHECK(tl >= 0, kOp, ": target_lengths[", n, "] = ", tl, " is negative");
    const int64_t start = padded ? n * tg.size(1) : off;
    WEFT_CHECK(padded ? tl <= tg.size(1) : off + tl <= tg.numel(), kOp, ": target_lengths[", n, "] = ", tl,
               padded ? " exceeds the padded targets' length " : " runs past the concatenated targets' ",
               padded ? tg.size(1) : tg.numel());
    p.target_off.push_back(static_cast<int64_t>(p.labels.size()));
    for (int64_t i = 0; i < tl; ++i) {
      const int64_t c = tv[start + i];
      WEFT_CHECK(c >= 0 && c < p.C && c != blank, kOp, ": target ", c, " of sample ", n,
                 " must be a class in [0, C = ", p.C, ") other than blank ", blank);
      p.labels.push_back(c);
    }
    off += tl;
    p.max_target = std::max(p.max_target, tl);
  }
  return p;
}

// alpha (Tn x ext) of sample n in log space; returns the sample's nll.
double forward_sample(const Problem& p, const double* lp, int64_t n, std::vector<double>& alpha) {
  const int64_t Tn = p.input_len[static_cast<size_t>(n)], S = p.ext(n), N = p.N, C = p.C;
  if (Tn == 0) return p.target_len[static_cast<size_t>(n)] == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  alpha.assign(static_cast<size_t>(Tn * S), kNegInf);
  auto at = [&](int64_t t, int64_t c) { return lp[(t * N + n) * C + c]; };
  alpha[0] = at(0, p.blank);
  if (S > 1) alpha[1] = at(0, p.label(n, 1));
  for (int64_t t = 1; t < Tn; ++t) {
    const double* prev = &alpha[static_cast<size_t>((t - 1) * S)];
    double* cur = &alpha[static_cast<size_t>(t * S)];
    for (int64_t s = 0; s < S; ++s) {
      const int64_t l = p.label(n, s);
      double a = prev[s];
      if (s > 0) a = log_add(a, prev[s - 1]);
      if (s > 1 && l != p.blank && l != p.label(n, s - 2)) a = log_add(a, prev[s - 2]);
      cur[s] = a == kNegInf ? kNegInf : a + at(t, l);
    }
  }
  const double* last = &alpha[static_cast<size_t>((Tn - 1) * S)];
  return -(S > 1 ? log_add(last[S - 1], last[S - 2]) : last[S - 1]);
}

// d nll_n / d log_probs[t, n, :] * g into grad (T, N, C), zero-initialised.
void backward_sample(const Problem& p, const double* lp, int64_t n, double nll, double g, double* grad) {
  const int64_t Tn = p.input_len[static_cast<size_t>(n)], S = p.ext(n), N = p.N, C = p.C;
  if (Tn == 0 || g == 0.0) return;
  std::vector<double> alpha;
  forward_sample(p, lp, n, alpha);
  std::vector<double> beta(static_cast<size_t>(Tn * S), kNegInf);
  auto at = [&](int64_t t, int64_t c) { return lp[(t * N + n) * C + c]; };
  double* end = &beta[static_cast<size_t>((Tn - 1) * S)];
  end[S - 1] = at(Tn - 1, p.label(n, S - 1));
  if (S > 1) end[S - 2] = at(Tn - 1, p.label(n, S - 2));
  for (int64_t t = Tn - 2; t >= 0; --t) {
    const double* next = &beta[static_cast<size_t>((t + 1) * S)];
    double* cur = &beta[static_cast<size_t>(t * S)];
    for (int64_t s = 0; s < S; ++s) {
      const int64_t l = p.label(n, s);
      double b = next[s];
      if (s + 1 < S) b = log_add(b, next[s + 1]);
      if (s + 2 < S && p.label(n, s + 2) != p.blank && p.label(n, s + 2) != l) b = log_add(b, next[s + 2]);
      cur[s] = b == kNegInf ? kNegInf : b + at(t, l);
    }
  }
  std::vector<double> lcab(static_cast<size_t>(C));
  for (int64_t t = 0; t < Tn; ++t) {
    std::fill(lcab.begin(), lcab.end(), kNegInf);
    for (int64_t s = 0; s < S; ++s) {
      const size_t i = static_cast<size_t>(t * S + s);
      double& slot = lcab[static_cast<size_t>(p.label(n, s))];
      slot = log_add(slot, alpha[i] + beta[i]);
    }
    double* row = grad + (t * N + n) * C;
    for (int64_t c = 0; c < C; ++c) {
      const double v = lcab[static_cast<size_t>(c)];
      if (v != kNegInf) row[c] = -std::exp(v + nll - at(t, c)) * g;
    }
  }
}

// The per-sample nll (N) of the composite (Note [composite double backward]):
// alpha in probability space, each step divided by its sum, with recorded ops.
Tensor ctc_composite(const Tensor& lp, const Problem& p, bool zero_infinity) {
  const int64_t T = p.T, N = p.N, S = 2 * p.max_target + 1;
  std::vector<int64_t> ext(static_cast<size_t>(N * S), p.blank), skip(static_cast<size_t>(N * S), 0),
      first(static_cast<size_t>(N * S), 0), final_mask(static_cast<size_t>(N * S), 0),
      valid(static_cast<size_t>(N * S), 0);
  for (int64_t n = 0; n < N; ++n) {
    const int64_t Sn = p.ext(n);
    for (int64_t s = 0; s < Sn; ++s) {
      const size_t i = static_cast<size_t>(n * S + s);
      ext[i] = p.label(n, s);
      skip[i] = s > 1 && ext[i] != p.blank && ext[i] != p.label(n, s - 2);
      first[i] = s < 2;
      final_mask[i] = s >= Sn - 2;
      valid[i] = 1;
    }
  }
  const TensorOptions i64{DType::Int64, lp.device()};
  auto mask_of = [&](const std::vector<int64_t>& v) { return tensor(v, {N, S}).to(lp.device()).to(lp.dtype()); };
  const Tensor idx = tensor(ext, {1, N, S}).to(lp.device()).expand({T, N, S});
  const Tensor e = exp(gather(lp, 2, idx));  // (T, N, S) emission probabilities
  const Tensor skip_m = mask_of(skip), final_m = mask_of(final_mask), valid_m = mask_of(valid);
  const Tensor len = tensor(p.input_len, {N, 1}).to(lp.device());
  const Tensor zeros_col = zeros({N, 1}, lp.options()), zeros_two = zeros({N, 2}, lp.options());
  Tensor alpha = e.select(0, 0) * mask_of(first);  // (N, S)
  Tensor c = sum(alpha, {1}, true);                // (N, 1)
  Tensor log_norm = log(c);
  alpha = alpha / c;
  for (int64_t t = 1; t < T; ++t) {
    const Tensor shift1 = cat({zeros_col, alpha.narrow(1, 0, S - 1)}, 1);
    const Tensor shift2 = S > 2 ? cat({zeros_two, alpha.narrow(1, 0, S - 2)}, 1) * skip_m : zeros_like(alpha);
    Tensor a = (alpha + shift1 + shift2) * e.select(0, t) * valid_m;        // states past a sample's end stay 0
    const Tensor active = gt(len, full({1}, static_cast<double>(t), i64));  // (N, 1): t < input length
    Tensor ct = sum(a, {1}, true);
    const Tensor one = ones_like(ct);
    ct = where(active, ct, one);
    alpha = where(active, a / ct, alpha);
    log_norm = log_norm + log(ct);
  }
  Tensor nll = -(log_norm + log(sum(alpha * final_m, {1}, true))).squeeze(1);  // (N)
  if (zero_infinity) nll = where(isinf(nll), zeros_like(nll), nll);
  return nll;
}

}  // namespace

Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                const Tensor& target_lengths, const CtcLossOptions& o) {
  WEFT_CHECK(log_probs.defined(), kOp, ": log_probs is undefined");
  const bool batched = log_probs.dim() != 2;
  const Tensor lp = batched ? log_probs : log_probs.unsqueeze(1);  // (T, N, C)
  const Tensor tg = batched ? targets : targets.unsqueeze(0);
  const Tensor il = input_lengths.defined() ? input_lengths.reshape({-1}) : input_lengths;
  const Tensor tl = target_lengths.defined() ? target_lengths.reshape({-1}) : target_lengths;
  const Problem p = check(lp, tg, il, tl, o.blank);
  const Tensor lp64 = lp.detach().to(kCPU).to(DType::Float64).contiguous();  // (T, N, C)
  const double* lpv = lp64.data_ptr<double>();
  std::vector<double> nll(static_cast<size_t>(p.N));
  parallel_for(0, p.N, 1, [&](int64_t b, int64_t e) {
    std::vector<double> alpha;
    for (int64_t n = b; n < e; ++n) {
      double v = forward_sample(p, lpv, n, alpha);
      if (o.zero_infinity && std::isinf(v)) v = 0.0;
      nll[static_cast<size_t>(n)] = v;
    }
  });
  Tensor out = tensor(nll, {p.N}).to(lp.dtype()).to(lp.device());  // (N)
  if (any_requires_grad({lp})) {
    SavedTensor saved(lp.detach());
    const bool zero_infinity = o.zero_infinity;
    record_function(
        "CtcLossBackward", {lp}, {out},
        [saved, p, nll, zero_infinity](const std::vector<Tensor>& grads) {
          const Tensor lps = saved.get("CtcLossBackward");
          const Tensor l64 = lps.to(kCPU).to(DType::Float64).contiguous();
          const Tensor g = grads[0].detach().to(kCPU).to(DType::Float64).contiguous();
          Tensor grad = zeros({p.T, p.N, p.C}, TensorOptions{DType::Float64});
          double* gv = grad.data_ptr<double>();
          const double* lv = l64.data_ptr<double>();
          const double* go = g.data_ptr<double>();
          parallel_for(0, p.N, 1, [&](int64_t b, int64_t e) {
            for (int64_t n = b; n < e; ++n) {
              const double v = nll[static_cast<size_t>(n)];
              if (zero_infinity && std::isinf(v)) continue;
              backward_sample(p, lv, n, v, go[n], gv);
            }
          });
          return std::vector<Tensor>{grad.to(lps.dtype()).to(lps.device())};
        },
        [p, zero_infinity](const std::vector<Tensor>& in) {
          return std::vector<Tensor>{ctc_composite(in[0], p, zero_infinity)};
        });
  }
  // Reductions: Mean divides each loss by its target length (at least 1), then averages.
  Tensor losses = out;
  if (o.reduction == Reduction::Mean) {
    std::vector<double> lens(p.target_len.begin(), p.target_len.end());
    for (double& v : lens) v = std::max(v, 1.0);
    return mean(losses / tensor(lens, {p.N}).to(losses.dtype()).to(losses.device()));
  }
  if (o.reduction == Reduction::Sum) return sum(losses);
  return batched ? losses : losses.squeeze(0);
}

}  // namespace weft
