// embedding: row lookup out[i, :] = weight[indices[i], :] (PyTorch's F.embedding
// with padding_idx, max_norm and scale_grad_by_freq; sparse gradients aside).
//
// Contract: indices are int64 of any shape; weight is (V, D); the result is
// (*indices.shape, D) in weight's dtype. Every index must lie in [0, V); the
// error names the first bad index and V. The forward copies rows in parallel
// over indices. The backward accumulates gradient rows into a dense (V, D)
// gradient deterministically: each thread owns a range of weight rows and adds
// the contributions to its rows in index order, so results do not depend on the
// thread count. Float16/BFloat16 accumulate in float32. The padding_idx row's
// gradient is zero (the forward still reads that row, as PyTorch's).
#include "core/kernels/embedding.h"

#include <cstring>

#include "core/autograd_meta.h"
#include "core/dispatch.h"
#include "core/nn_ops.h"
#include "core/ops/elementwise_util.h"
#include "core/parallel.h"

namespace weft {

EmbeddingKernel& embedding_table() {
  static EmbeddingKernel t("embedding");
  return t;
}
EmbeddingBackwardKernel& embedding_backward_table() {
  static EmbeddingBackwardKernel t("embedding_backward");
  return t;
}

namespace {

// Compute type: float64 for float64, float32 otherwise (float16/bfloat16; the
// registrar also instantiates kernels for types outside the registered set).
template <typename T>
using acc_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

template <typename T>
void cpu_embedding(const Tensor& out, const Tensor& weight, const Tensor& idx) {
  const int64_t n = idx.numel(), D = weight.size(1);
  const int64_t* pi = idx.data_ptr<int64_t>();
  const T* pw = weight.data_ptr<T>();
  T* po = out.data_ptr<T>();
  parallel_for(0, n, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(D, 1)), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) std::memcpy(po + i * D, pw + pi[i] * D, sizeof(T) * static_cast<size_t>(D));
  });
}

template <typename T>
void cpu_embedding_backward(const Tensor& grad_weight, const Tensor& g, const Tensor& idx) {
  using S = acc_t<T>;
  const int64_t n = idx.numel(), V = grad_weight.size(0), D = grad_weight.size(1);
  const int64_t* pi = idx.data_ptr<int64_t>();
  const T* pg = g.data_ptr<T>();
  T* pgw = grad_weight.data_ptr<T>();
  // rows [b, e) of the gradient belong to one chunk; each chunk scans all indices in order.
  const int64_t grain = std::max<int64_t>(1, V / std::max(1, get_num_threads()));
  parallel_for(0, V, n * D < kGrainSize ? V : grain, [&](int64_t b, int64_t e) {
    if constexpr (std::is_same_v<S, T>) {
      for (int64_t i = 0; i < n; ++i) {
        const int64_t r = pi[i];
        if (r < b || r >= e) continue;
        T* dst = pgw + r * D;
        const T* src = pg + i * D;
        for (int64_t d = 0; d < D; ++d) dst[d] += src[d];
      }
    } else {
      std::vector<S> acc(static_cast<size_t>((e - b) * D), S(0));
      for (int64_t i = 0; i < n; ++i) {
        const int64_t r = pi[i];
        if (r < b || r >= e) continue;
        S* dst = acc.data() + (r - b) * D;
        const T* src = pg + i * D;
        for (int64_t d = 0; d < D; ++d) dst[d] += static_cast<S>(src[d]);
      }
      for (int64_t k = 0; k < (e - b) * D; ++k) pgw[b * D + k] = static_cast<T>(acc[k]);
    }
  });
}

WEFT_REGISTER_KERNEL(embedding_table(), DeviceType::CPU, kNumericTypes, cpu_embedding);
WEFT_REGISTER_KERNEL(embedding_backward_table(), DeviceType::CPU, kFloatingTypes, cpu_embedding_backward);

}  // namespace

namespace {
// The checked, flattened indices (n).
Tensor checked_indices(const char* op, const Tensor& indices, const Tensor& weight) {
  detail::check_devices(op, {indices, weight});
  WEFT_CHECK(indices.dtype() == DType::Int64, op, ": indices must be int64, got dtype ", indices.dtype());
  WEFT_CHECK(weight.dim() == 2, op, ": weight must be 2-D (num_embeddings, embedding_dim), got shape ",
             shape_str(weight.sizes()));
  WEFT_CHECK(indices.device() == weight.device(), op, ": indices and weight are on different devices");
  const int64_t V = weight.size(0);
  Tensor idx = indices.detach().contiguous().view({indices.numel()});
  if (idx.device().is_cpu()) {  // device indices are range-checked by the CUDA kernel
    const int64_t* pi = idx.data_ptr<int64_t>();
    for (int64_t i = 0; i < idx.numel(); ++i)
      WEFT_CHECK(pi[i] >= 0 && pi[i] < V, op, ": index ", pi[i], " is out of range for num_embeddings ", V,
                 " (weight shape ", shape_str(weight.sizes()), ")");
  }
  return idx;
}

// 1 / (how often idx names each row), 1 for rows it does not name: (V, 1).
Tensor inverse_frequency(const Tensor& idx, int64_t V, const TensorOptions& opts) {
  NoGradGuard no_grad;
  Tensor count = index_add(zeros({V}, opts), 0, idx, ones({idx.numel()}, opts));
  return reciprocal(clamp(count, 1.0, std::nullopt)).view({V, 1});
}
}  // namespace

void embedding_renorm_(const Tensor& weight, const Tensor& indices, double max_norm, double norm_type) {
  Tensor idx = checked_indices("embedding_renorm_", indices, weight);
  WEFT_CHECK(max_norm >= 0.0, "embedding_renorm_: max_norm must be non-negative, got ", max_norm);
  NoGradGuard no_grad;
  // each named row once, in increasing order
  Tensor rows = std::get<0>(sort(idx.cpu()));
  std::vector<int64_t> unique;
  const int64_t* pr = rows.data_ptr<int64_t>();
  for (int64_t i = 0; i < rows.numel(); ++i)
    if (unique.empty() || unique.back() != pr[i]) unique.push_back(pr[i]);
  if (unique.empty()) return;
  Tensor u = tensor(unique, {static_cast<int64_t>(unique.size())}).to(weight.device());
  // the named rows' norms in one op; then only the rows above max_norm change
  Tensor n = norm(index_select(weight, 0, u).to(DType::Float64), norm_type, {1}).cpu();
  const double* pn = n.data_ptr<double>();
  for (size_t k = 0; k < unique.size(); ++k)
    if (pn[k] > max_norm) weight.select(0, unique[k]).mul_(max_norm / (pn[k] + 1e-7));
}

Tensor embedding(const Tensor& indices, const Tensor& weight, std::optional<int64_t> padding_idx,
                 std::optional<double> max_norm, double norm_type, bool scale_grad_by_freq) {
  Tensor idx = checked_indices("embedding", indices, weight);
  const int64_t V = weight.size(0), D = weight.size(1);
  if (padding_idx) {
    WEFT_CHECK(*padding_idx < V && *padding_idx >= -V, "embedding: padding_idx ", *padding_idx,
               " must be within num_embeddings ", V, " (or -", V, " to -1)");
    if (*padding_idx < 0) padding_idx = *padding_idx + V;
  }
  const int64_t pad = padding_idx.value_or(-1);
  if (max_norm) embedding_renorm_(weight, idx, *max_norm, norm_type);
  Tensor w = weight.detach().contiguous();
  Tensor out = empty({idx.numel(), D}, weight.options());
  embedding_table()(weight.device(), weight.dtype(), out, w, idx);
  Shape out_shape = indices.sizes();
  out_shape.push_back(D);
  out = out.view(out_shape);
  if (any_requires_grad({weight})) {
    Tensor saved_idx = idx;  // indices are not differentiable; keep the checked copy
    SavedTensor si(saved_idx);
    const bool freq = scale_grad_by_freq;
    record_differentiable(
        "EmbeddingBackward", {weight}, {out}, [si, V, D, pad, freq](const std::vector<Tensor>& grads) {
          Tensor ix = si.get("EmbeddingBackward");
          if (GradMode::is_enabled()) {  // Note [double backward]: the rows summed by recorded ops
            Tensor gw = index_add(zeros({V, D}, grads[0].options()), 0, ix, grads[0].reshape({ix.numel(), D}));
            if (freq) gw = gw * inverse_frequency(ix, V, gw.options());
            if (pad < 0) return std::vector<Tensor>{gw};
            Tensor keep = ones({V, 1}, gw.options());
            {
              NoGradGuard no_grad;
              keep.select(0, pad).zero_();
            }
            return std::vector<Tensor>{gw * keep};
          }
          Tensor g = grads[0].contiguous().view({ix.numel(), D});
          Tensor gw = zeros({V, D}, g.options());
          embedding_backward_table()(g.device(), g.dtype(), gw, g, ix);
          if (freq) gw.mul_(inverse_frequency(ix, V, gw.options()));
          if (pad >= 0) gw.select(0, pad).zero_();
          return std::vector<Tensor>{gw};
        });
  }
  return out;
}

}  // namespace weft
