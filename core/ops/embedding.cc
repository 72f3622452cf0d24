// embedding: row lookup out[i, :] = weight[indices[i], :] (PyTorch's F.embedding
// with padding_idx, without max_norm).
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

Tensor embedding(const Tensor& indices, const Tensor& weight, std::optional<int64_t> padding_idx) {
  detail::check_devices("embedding", {indices, weight});
  WEFT_CHECK(indices.dtype() == DType::Int64, "embedding: indices must be int64, got dtype ", indices.dtype());
  WEFT_CHECK(weight.dim() == 2, "embedding: weight must be 2-D (num_embeddings, embedding_dim), got shape ",
             shape_str(weight.sizes()));
  WEFT_CHECK(indices.device() == weight.device(), "embedding: indices and weight are on different devices");
  const int64_t V = weight.size(0), D = weight.size(1);
  if (padding_idx) {
    WEFT_CHECK(*padding_idx < V && *padding_idx >= -V, "embedding: padding_idx ", *padding_idx,
               " must be within num_embeddings ", V, " (or -", V, " to -1)");
    if (*padding_idx < 0) padding_idx = *padding_idx + V;
  }
  const int64_t pad = padding_idx.value_or(-1);
  Tensor idx = indices.detach().contiguous().view({indices.numel()});
  if (idx.device().is_cpu()) {  // device indices are range-checked by the CUDA kernel
    const int64_t* pi = idx.data_ptr<int64_t>();
    for (int64_t i = 0; i < idx.numel(); ++i)
      WEFT_CHECK(pi[i] >= 0 && pi[i] < V, "embedding: index ", pi[i], " is out of range for num_embeddings ", V,
                 " (weight shape ", shape_str(weight.sizes()), ")");
  }
  Tensor w = weight.detach().contiguous();
  Tensor out = empty({idx.numel(), D}, weight.options());
  embedding_table()(weight.device(), weight.dtype(), out, w, idx);
  Shape out_shape = indices.sizes();
  out_shape.push_back(D);
  out = out.view(out_shape);
  if (any_requires_grad({weight})) {
    Tensor saved_idx = idx;  // indices are not differentiable; keep the checked copy
    SavedTensor si(saved_idx);
    record_differentiable("EmbeddingBackward", {weight}, {out}, [si, V, D, pad](const std::vector<Tensor>& grads) {
      Tensor ix = si.get("EmbeddingBackward");
      if (GradMode::is_enabled()) {  // Note [double backward]: the rows summed by recorded ops
        Tensor gw = index_add(zeros({V, D}, grads[0].options()), 0, ix, grads[0].reshape({ix.numel(), D}));
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
      if (pad >= 0) gw.select(0, pad).zero_();
      return std::vector<Tensor>{gw};
    });
  }
  return out;
}

}  // namespace weft
