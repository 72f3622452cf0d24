// The op surface: every tensor operation weft offers, as free functions.
//
// Contract: each op is declared here once and defined in one file under
// core/ops/ (named in the section comments), where it infers shapes and dtypes,
// dispatches to the kernel registered for (device, dtype) (core/dispatch.h) and
// declares its backward with record_function (core/autograd_meta.h). Errors name
// the op and the offending shapes/dtypes/devices. Ops that take `dim` accept
// negative dims. Binary ops broadcast like NumPy and promote dtypes like PyTorch.
#pragma once

#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "core/scalar.h"
#include "core/tensor.h"

namespace weft {

// ---- factories (core/ops/factory.cc) ----
// Every factory takes TensorOptions, a DType or a Device (TensorOptions converts
// implicitly from either, as in libtorch): zeros({n}, kInt64), ones({n}, kCUDA).
Tensor empty(const Shape& sizes, const TensorOptions& opts = {});
Tensor zeros(const Shape& sizes, const TensorOptions& opts = {});
Tensor ones(const Shape& sizes, const TensorOptions& opts = {});
// Without options the dtype follows the value, like libtorch: an integer gives
// int64, a bool gives bool, a floating value float32.
Tensor full(const Shape& sizes, const Scalar& value);
Tensor full(const Shape& sizes, const Scalar& value, const TensorOptions& opts);
// *_like: the source's shape and options; a DType or a Device changes only that
// field (zeros_like(x, kInt64) stays on x's device), TensorOptions replace all.
Tensor empty_like(const Tensor& t);
Tensor empty_like(const Tensor& t, DType dtype);
Tensor empty_like(const Tensor& t, Device device);
Tensor empty_like(const Tensor& t, const TensorOptions& opts);
Tensor zeros_like(const Tensor& t);
Tensor zeros_like(const Tensor& t, DType dtype);
Tensor zeros_like(const Tensor& t, Device device);
Tensor zeros_like(const Tensor& t, const TensorOptions& opts);
Tensor ones_like(const Tensor& t);
Tensor ones_like(const Tensor& t, DType dtype);
Tensor ones_like(const Tensor& t, Device device);
Tensor ones_like(const Tensor& t, const TensorOptions& opts);
Tensor full_like(const Tensor& t, const Scalar& value);
Tensor full_like(const Tensor& t, const Scalar& value, DType dtype);
Tensor full_like(const Tensor& t, const Scalar& value, Device device);
Tensor full_like(const Tensor& t, const Scalar& value, const TensorOptions& opts);
// [start, end) with `step`. Without options the dtype follows the arguments,
// like libtorch: int64 when all are integers, else float32.
Tensor arange(const Scalar& end);
Tensor arange(const Scalar& end, const TensorOptions& opts);
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step = 1);
Tensor arange(const Scalar& start, const Scalar& end, const TensorOptions& opts);
Tensor arange(const Scalar& start, const Scalar& end, const Scalar& step, const TensorOptions& opts);
Tensor linspace(double start, double end, int64_t steps, const TensorOptions& opts = {});
Tensor eye(int64_t n, const TensorOptions& opts = {});
// A 0-dim tensor holding `value` (wrapped_number marks it as coming from C++).
Tensor scalar_tensor(const Scalar& value, const TensorOptions& opts = {});
Tensor wrapped_scalar(const Scalar& value, DType dtype, Device device);
// Copies `values` into a new tensor of shape `sizes` (default: 1-D).
template <typename T>
Tensor tensor(const std::vector<T>& values, const Shape& sizes = {}, const TensorOptions& opts = {dtype_of<T>});
Tensor tensor(std::initializer_list<float> values, const Shape& sizes = {});
// Wraps external memory without copying; `deleter` runs when the last view dies.
Tensor from_blob(void* data, const Shape& sizes, DType dtype, std::function<void(void*)> deleter = nullptr);

// ---- random (core/ops/random.cc; Philox, see core/rng.h) ----
Tensor rand(const Shape& sizes, const TensorOptions& opts = {});   // U[0, 1)
Tensor randn(const Shape& sizes, const TensorOptions& opts = {});  // N(0, 1)
Tensor randint(int64_t low, int64_t high, const Shape& sizes, const TensorOptions& opts = {DType::Int64});
Tensor randperm(int64_t n, const TensorOptions& opts = {DType::Int64});
Tensor bernoulli(const Tensor& p);
Tensor& uniform_(Tensor& t, double low = 0.0, double high = 1.0);
Tensor& normal_(Tensor& t, double mean = 0.0, double std = 1.0);
// Inverted dropout: zeroes with probability p and scales survivors by 1/(1-p).
Tensor dropout(const Tensor& x, double p, bool training = true);

// ---- copies and conversions (core/ops/copy.cc) ----
Tensor to_dtype(const Tensor& t, DType dtype);
Tensor to_device(const Tensor& t, Device device);
Tensor clone(const Tensor& t);
Tensor contiguous(const Tensor& t);
// Copies src into dst (broadcasting src to dst's shape, converting dtype).
Tensor& copy_(Tensor& dst, const Tensor& src);
Tensor& fill_(Tensor& t, const Scalar& value);
Tensor& zero_(Tensor& t);

// ---- views (core/ops/view.cc); all share storage with the input ----
Tensor view(const Tensor& t, const Shape& shape);
Tensor reshape(const Tensor& t, const Shape& shape);  // a view when possible, else a copy
Tensor flatten(const Tensor& t, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor transpose(const Tensor& t, int64_t d0, int64_t d1);
Tensor permute(const Tensor& t, const std::vector<int64_t>& dims);
Tensor slice(const Tensor& t, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end, int64_t step = 1);
Tensor narrow(const Tensor& t, int64_t dim, int64_t start, int64_t length);
Tensor select(const Tensor& t, int64_t dim, int64_t index);
Tensor expand(const Tensor& t, const Shape& sizes);  // -1 keeps a size
Tensor squeeze(const Tensor& t);
Tensor squeeze(const Tensor& t, int64_t dim);
Tensor unsqueeze(const Tensor& t, int64_t dim);
// The diagonal of dims (dim1, dim2), `offset` above (> 0) or below (< 0) the main
// one, as a view whose last dim runs along it (PyTorch's diagonal).
Tensor diagonal(const Tensor& t, int64_t offset = 0, int64_t dim1 = 0, int64_t dim2 = 1);
// Sums `grad` over broadcast dims so it has shape `sizes` (inverse of expand).
Tensor sum_to(const Tensor& grad, const Shape& sizes);

// ---- elementwise (core/ops/unary.cc, core/ops/binary.cc) ----
Tensor add(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);  // a + alpha * b
Tensor sub(const Tensor& a, const Tensor& b, const Scalar& alpha = 1);  // a - alpha * b
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);  // true division: ints give float32
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Scalar& exponent);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor neg(const Tensor& a);
Tensor exp(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor rsqrt(const Tensor& a);
Tensor abs(const Tensor& a);
Tensor sign(const Tensor& a);
Tensor relu(const Tensor& a);
enum class GeluApproximation { None, Tanh };
Tensor gelu(const Tensor& a, GeluApproximation approximate = GeluApproximation::None);
Tensor silu(const Tensor& a);
// Piecewise activations (core/ops/piecewise.cc, composed of where):
// x where x > 0, else negative_slope * x
Tensor leaky_relu(const Tensor& a, double negative_slope = 0.01);
// log(1 + exp(beta x)) / beta, and x where beta x > threshold
Tensor softplus(const Tensor& a, double beta = 1.0, double threshold = 20.0);
// x where x > 0, else alpha (exp(x) - 1)
Tensor elu(const Tensor& a, double alpha = 1.0);
Tensor sigmoid(const Tensor& a);
Tensor tanh(const Tensor& a);
Tensor sin(const Tensor& a);
Tensor cos(const Tensor& a);
Tensor erf(const Tensor& a);
Tensor log1p(const Tensor& a);       // log(1 + x), accurate for small x
Tensor expm1(const Tensor& a);       // exp(x) - 1, accurate for small x
Tensor reciprocal(const Tensor& a);  // 1 / x; integers give float32
// keep the dtype (integers unchanged); zero gradient; round is half to even like torch.round
Tensor floor(const Tensor& a);
Tensor ceil(const Tensor& a);
Tensor round(const Tensor& a);
Tensor clamp(const Tensor& a, std::optional<Scalar> min, std::optional<Scalar> max);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
// comparisons give bool
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_xor(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& a);
// Value predicates (core/ops/piecewise.cc): bool results, no gradient.
Tensor isnan(const Tensor& a);
Tensor isinf(const Tensor& a);
Tensor isfinite(const Tensor& a);
// NaN -> nan, +inf -> posinf, -inf -> neginf (default: the dtype's largest and
// lowest finite values); the gradient passes where a is finite.
Tensor nan_to_num(const Tensor& a, double nan = 0.0, std::optional<double> posinf = std::nullopt,
                  std::optional<double> neginf = std::nullopt);
// Whether any / every element is nonzero, over `dims` (all when empty).
Tensor any(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor all(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
// in place (bump the version counter; autograd-aware)
Tensor& add_(Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor& sub_(Tensor& a, const Tensor& b, const Scalar& alpha = 1);
Tensor& mul_(Tensor& a, const Tensor& b);
Tensor& div_(Tensor& a, const Tensor& b);
Tensor& neg_(Tensor& a);
Tensor& exp_(Tensor& a);
Tensor& sqrt_(Tensor& a);
Tensor& relu_(Tensor& a);
Tensor& sigmoid_(Tensor& a);
Tensor& tanh_(Tensor& a);
Tensor& clamp_(Tensor& a, std::optional<Scalar> min, std::optional<Scalar> max);
// a <- a + value * t1 * t2 and a <- a + value * t1 / t2 (optimizers use these)
Tensor& addcmul_(Tensor& a, const Tensor& t1, const Tensor& t2, const Scalar& value = 1);
Tensor& addcdiv_(Tensor& a, const Tensor& t1, const Tensor& t2, const Scalar& value = 1);
// a <- a + weight * (end - a)
Tensor& lerp_(Tensor& a, const Tensor& end, const Scalar& weight);

// ---- reductions (core/ops/reduce.cc); empty dims = all dims ----
Tensor sum(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false,
           std::optional<DType> dtype = std::nullopt);
Tensor mean(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor prod(const Tensor& a, int64_t dim, bool keepdim = false);
Tensor amax(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& a, const std::vector<int64_t>& dims = {}, bool keepdim = false);
// (values, indices); on ties the first index wins
std::tuple<Tensor, Tensor> max(const Tensor& a, int64_t dim, bool keepdim = false);
std::tuple<Tensor, Tensor> min(const Tensor& a, int64_t dim, bool keepdim = false);
Tensor max(const Tensor& a);  // over all elements
Tensor min(const Tensor& a);
// no dim: index into the flattened tensor
Tensor argmax(const Tensor& a, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& a, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
// correction 1 = unbiased (PyTorch's default)
Tensor var(const Tensor& a, const std::vector<int64_t>& dims = {}, int64_t correction = 1, bool keepdim = false);
Tensor std(const Tensor& a, const std::vector<int64_t>& dims = {}, int64_t correction = 1, bool keepdim = false);
Tensor logsumexp(const Tensor& a, const std::vector<int64_t>& dims, bool keepdim = false);
Tensor norm(const Tensor& a, double p = 2.0, const std::vector<int64_t>& dims = {}, bool keepdim = false);
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);
bool equal(const Tensor& a, const Tensor& b);  // same shape and exactly equal values

// ---- softmax (core/ops/softmax.cc) ----
Tensor softmax(const Tensor& a, int64_t dim);
Tensor log_softmax(const Tensor& a, int64_t dim);

// ---- linear algebra (core/ops/matmul.cc; GEMM through Eigen on CPU) ----
// 1-D·1-D dot, 2-D mm, batched with broadcasting of batch dims, vector promotion.
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor mm(const Tensor& a, const Tensor& b);
Tensor bmm(const Tensor& a, const Tensor& b);
// y = x W^T + b  (W: (out, in)); bias may be undefined
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
// PyTorch's einsum ("bij,bjk->bik", "ii->", "...ij,...jk", implicit outputs), composed
// of diagonal, sum, permute, reshape and bmm (core/ops/einsum.cc).
Tensor einsum(const std::string& equation, const std::vector<Tensor>& operands);

// ---- indexing and joining (core/ops/index.cc, core/ops/join.cc) ----
Tensor gather(const Tensor& a, int64_t dim, const Tensor& index);
Tensor scatter_add(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src);
Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index);
// out[index[i]] += src[i] along dim (index_select's adjoint)
Tensor index_add(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src);
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& a, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& a, const std::vector<int64_t>& sizes, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int64_t dim = 0);
Tensor one_hot(const Tensor& index, int64_t num_classes = -1);  // int64 result
Tensor masked_fill(const Tensor& a, const Tensor& mask, const Scalar& value);
Tensor& masked_fill_(Tensor& a, const Tensor& mask, const Scalar& value);
Tensor tril(const Tensor& a, int64_t diagonal = 0);
Tensor triu(const Tensor& a, int64_t diagonal = 0);

// ---- rearranging and padding (core/ops/rearrange.cc, composed of the ops above) ----
Tensor flip(const Tensor& a, const std::vector<int64_t>& dims);
// Rolls by shifts[i] along dims[i]; without dims, the flattened tensor by shifts[0].
Tensor roll(const Tensor& a, const std::vector<int64_t>& shifts, const std::vector<int64_t>& dims = {});
// At least one count per dim; extra counts add leading dims.
Tensor repeat(const Tensor& a, const std::vector<int64_t>& repeats);
// repeat, with leading counts of 1 where `reps` has fewer than the tensor's dims.
Tensor tile(const Tensor& a, const std::vector<int64_t>& reps);
// PyTorch's F.pad in constant mode: (before, after) amounts from the last dim
// backwards; a negative amount crops.
Tensor pad(const Tensor& a, const std::vector<int64_t>& pads, const Scalar& value = 0);
// The other modes of F.pad, on any dims: Reflect mirrors without repeating the edge
// (amounts below the size), Replicate repeats the edge, Circular wraps around
// (amounts up to the size); amounts non-negative. Constant is pad above.
enum class PadMode { Constant, Reflect, Replicate, Circular };
Tensor pad(const Tensor& a, const std::vector<int64_t>& pads, PadMode mode, const Scalar& value = 0);
// The slices along `dim`, as views.
std::vector<Tensor> unbind(const Tensor& a, int64_t dim = 0);
// Running sums along `dim` (floating dtypes; Note [cumsum by blocks]).
Tensor cumsum(const Tensor& a, int64_t dim);

// ---- sorting (core/ops/sort.cc) ----
// Ascending (or descending) along `dim`: the values and their int64 positions.
// Ties keep their order; NaN sorts above every number.
std::tuple<Tensor, Tensor> sort(const Tensor& a, int64_t dim = -1, bool descending = false);
Tensor argsort(const Tensor& a, int64_t dim = -1, bool descending = false);
// The k largest (or smallest) along `dim`, sorted, and their positions.
std::tuple<Tensor, Tensor> topk(const Tensor& a, int64_t k, int64_t dim = -1, bool largest = true);

// ---- operators ----
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a);
Tensor operator+(const Tensor& a, const Scalar& b);
Tensor operator-(const Tensor& a, const Scalar& b);
Tensor operator*(const Tensor& a, const Scalar& b);
Tensor operator/(const Tensor& a, const Scalar& b);
Tensor operator+(const Scalar& a, const Tensor& b);
Tensor operator-(const Scalar& a, const Tensor& b);
Tensor operator*(const Scalar& a, const Tensor& b);
Tensor operator/(const Scalar& a, const Tensor& b);
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, const Scalar& b);
Tensor operator<(const Tensor& a, const Scalar& b);
Tensor operator>(const Tensor& a, const Scalar& b);

}  // namespace weft

#include "core/tensor_methods.h"
