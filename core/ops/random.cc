// Random ops: rand, randn, randint, randperm, bernoulli, uniform_, normal_,
// dropout. All draw from the default Philox generator (core/rng.h) following
// Note [philox counter layout], so results depend only on (seed, offset) and
// never on the thread count. Each op reserves its values from the generator
// (advancing its offset) on the calling thread, then kernels fill in parallel.
#include "core/kernels/random.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/autograd_meta.h"
#include "core/dispatch.h"
#include "core/ops.h"
#include "core/parallel.h"
#include "core/rng.h"

namespace weft {

#define WEFT_RANDOM_TABLE(type, name) \
  type& name##_table() {              \
    static type t(#name);             \
    return t;                         \
  }
WEFT_RANDOM_TABLE(RandomFillKernel, uniform_)
WEFT_RANDOM_TABLE(RandomFillKernel, normal_)
WEFT_RANDOM_TABLE(RandintKernel, randint)
WEFT_RANDOM_TABLE(RandomFillKernel, dropout_mask)
WEFT_RANDOM_TABLE(BernoulliKernel, bernoulli)

namespace {

constexpr int64_t kRandomGrain = 8192;

// Values per element (Note [philox counter layout]): 53-bit uniforms for double.
template <typename T>
constexpr int kUniformValues = std::is_same_v<T, double> ? 2 : 1;

// Calls f(i, vals) for every element i in [0, n) with its K consecutive values.
template <int K, typename F>
void philox_for_each(int64_t n, PhiloxState s, const F& f) {
  parallel_for(0, n, kRandomGrain, [&](int64_t b, int64_t e) {
    PhiloxReader r(s);
    uint32_t v[K];
    for (int64_t i = b; i < e; ++i) {
      for (int k = 0; k < K; ++k) v[k] = r.value(static_cast<uint64_t>(i) * K + k);
      f(i, v);
    }
  });
}

// Uniform in [0, 1) at opmath precision (for comparisons and transforms).
template <typename T>
opmath_t<T> uniform_of(const uint32_t* v) {
  if constexpr (std::is_same_v<T, double>) return uniform_double(v[0], v[1]);
  else return uniform_float(v[0]);
}

// Uniform in [0, 1) with as many random bits as T's significand holds, so the
// value is exactly representable in T and never rounds up to 1.
template <typename T>
opmath_t<T> uniform_repr(const uint32_t* v) {
  if constexpr (std::is_same_v<T, double>) return uniform_double(v[0], v[1]);
  else if constexpr (std::is_same_v<T, BFloat16>) return static_cast<float>(v[0] >> 24) * (1.0f / 256.0f);
  else if constexpr (std::is_same_v<T, Half>) return static_cast<float>(v[0] >> 21) * (1.0f / 2048.0f);
  else return uniform_float(v[0]);
}

template <typename T>
void cpu_uniform(const Tensor& out, PhiloxState s, double low, double high) {
  using M = opmath_t<T>;
  T* p = out.data_ptr<T>();
  M lo = static_cast<M>(low), range = static_cast<M>(high - low);
  philox_for_each<kUniformValues<T>>(out.numel(), s, [&](int64_t i, const uint32_t* v) {
    T x = static_cast<T>(lo + range * uniform_repr<T>(v));
    // rounding of low + range * u can reach `high`; keep the interval half-open
    if (!(static_cast<M>(x) < static_cast<M>(high)) && range > M(0)) x = static_cast<T>(lo);
    p[i] = x;
  });
}

// Box-Muller: z = sqrt(-2 ln(1 - u1)) cos(2 pi u2), u1, u2 in [0, 1).
template <typename T>
void cpu_normal(const Tensor& out, PhiloxState s, double mean, double std) {
  using M = opmath_t<T>;
  constexpr int K = 2 * kUniformValues<T>;
  T* p = out.data_ptr<T>();
  M mu = static_cast<M>(mean), sd = static_cast<M>(std);
  const M two_pi = static_cast<M>(6.283185307179586);
  philox_for_each<K>(out.numel(), s, [&](int64_t i, const uint32_t* v) {
    M u1 = uniform_of<T>(v), u2 = uniform_of<T>(v + K / 2);
    M z = std::sqrt(M(-2) * std::log(M(1) - u1)) * std::cos(two_pi * u2);
    p[i] = static_cast<T>(mu + sd * z);
  });
}

template <typename T>
void cpu_randint(const Tensor& out, PhiloxState s, int64_t low, int64_t high) {
  T* p = out.data_ptr<T>();
  uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  philox_for_each<2>(out.numel(), s, [&](int64_t i, const uint32_t* v) {
    uint64_t x = (static_cast<uint64_t>(v[0]) << 32) | v[1];
    p[i] = static_cast<T>(static_cast<opmath_t<T>>(low + static_cast<int64_t>(x % range)));
  });
}

// mask[i] = scale with probability keep, else 0.
template <typename T>
void cpu_dropout_mask(const Tensor& mask, PhiloxState s, double keep, double scale) {
  using M = opmath_t<T>;
  T* p = mask.data_ptr<T>();
  M k = static_cast<M>(keep);
  T on = static_cast<T>(static_cast<M>(scale)), off = static_cast<T>(M(0));
  philox_for_each<kUniformValues<T>>(mask.numel(), s,
                                     [&](int64_t i, const uint32_t* v) { p[i] = uniform_of<T>(v) < k ? on : off; });
}

template <typename T>
void cpu_bernoulli(const Tensor& out, const Tensor& prob, PhiloxState s) {
  using M = opmath_t<T>;
  T* o = out.data_ptr<T>();
  const T* pr = prob.data_ptr<T>();
  philox_for_each<kUniformValues<T>>(out.numel(), s, [&](int64_t i, const uint32_t* v) {
    o[i] = static_cast<T>(uniform_of<T>(v) < static_cast<M>(pr[i]) ? M(1) : M(0));
  });
}

WEFT_REGISTER_KERNEL(uniform__table(), DeviceType::CPU, kFloatingTypes, cpu_uniform);
WEFT_REGISTER_KERNEL(normal__table(), DeviceType::CPU, kFloatingTypes, cpu_normal);
WEFT_REGISTER_KERNEL(randint_table(), DeviceType::CPU, kNumericTypes, cpu_randint);
WEFT_REGISTER_KERNEL(dropout_mask_table(), DeviceType::CPU, kFloatingTypes, cpu_dropout_mask);
WEFT_REGISTER_KERNEL(bernoulli_table(), DeviceType::CPU, kFloatingTypes, cpu_bernoulli);

int values_per_element(DType dt, int k_float) { return dt == DType::Float64 ? 2 * k_float : k_float; }

// Fills `t` (any strides) in place with `table`, drawing k values per element.
Tensor& fill_random(const char* op, RandomFillKernel& table, Tensor& t, int k, double a, double b) {
  check_inplace(op, t);
  auto fn = table.lookup(t.device(), t.dtype());  // "<op> has no kernel for ..." before drawing
  PhiloxState s = default_generator().reserve(static_cast<uint64_t>(t.numel()) * k);
  if (t.is_contiguous()) {
    fn(t, s, a, b);
    t.bump_version();
  } else {
    Tensor tmp = empty(t.sizes(), t.options());
    fn(tmp, s, a, b);
    NoGradGuard no_grad;
    copy_(t, tmp);
  }
  return t;
}

Tensor finish(Tensor t, const TensorOptions& opts) {
  if (opts.requires_grad) t.requires_grad_(true);
  return t;
}

}  // namespace

Tensor& uniform_(Tensor& t, double low, double high) {
  WEFT_CHECK(low <= high, "uniform_: expected low <= high, got low=", low, " high=", high);
  return fill_random("uniform_", uniform__table(), t, values_per_element(t.dtype(), 1), low, high);
}

Tensor& normal_(Tensor& t, double mean, double std) {
  WEFT_CHECK(std >= 0, "normal_: expected std >= 0, got ", std);
  return fill_random("normal_", normal__table(), t, values_per_element(t.dtype(), 2), mean, std);
}

Tensor rand(const Shape& sizes, const TensorOptions& opts) {
  WEFT_CHECK(is_floating(opts.dtype), "rand: expected a floating dtype, got ", opts.dtype);
  Tensor t = empty(sizes, {opts.dtype, opts.device});
  uniform_(t, 0.0, 1.0);
  return finish(t, opts);
}

Tensor randn(const Shape& sizes, const TensorOptions& opts) {
  WEFT_CHECK(is_floating(opts.dtype), "randn: expected a floating dtype, got ", opts.dtype);
  Tensor t = empty(sizes, {opts.dtype, opts.device});
  normal_(t, 0.0, 1.0);
  return finish(t, opts);
}

Tensor randint(int64_t low, int64_t high, const Shape& sizes, const TensorOptions& opts) {
  WEFT_CHECK(low < high, "randint: expected low < high, got low=", low, " high=", high);
  Tensor t = empty(sizes, {opts.dtype, opts.device});
  auto fn = randint_table().lookup(t.device(), t.dtype());
  PhiloxState s = default_generator().reserve(static_cast<uint64_t>(t.numel()) * 2);
  fn(t, s, low, high);
  return finish(t, opts);
}

Tensor randperm(int64_t n, const TensorOptions& opts) {
  WEFT_CHECK(n >= 0, "randperm: n must be non-negative, got ", n);
  // Sort indices by a random 64-bit key (ties broken by index): a uniformly random
  // permutation up to negligible key collisions, and thread-count independent.
  std::vector<uint64_t> keys(static_cast<size_t>(n));
  PhiloxState s = default_generator().reserve(static_cast<uint64_t>(n) * 2);
  philox_for_each<2>(n, s, [&](int64_t i, const uint32_t* v) { keys[i] = (static_cast<uint64_t>(v[0]) << 32) | v[1]; });
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(),
            [&](int64_t a, int64_t b) { return keys[a] != keys[b] ? keys[a] < keys[b] : a < b; });
  Tensor out = tensor<int64_t>(idx, {n});
  if (opts.dtype != DType::Int64 || !opts.device.is_cpu()) out = out.to(TensorOptions{opts.dtype, opts.device});
  return finish(out, opts);
}

Tensor bernoulli(const Tensor& p) {
  WEFT_CHECK(is_floating(p.dtype()), "bernoulli: expected a floating probability tensor, got dtype ", p.dtype());
  auto fn = bernoulli_table().lookup(p.device(), p.dtype());
  Tensor pc = p.detach().contiguous();
  {
    // as PyTorch: every probability in [0, 1] (NaN is not)
    Tensor zero = scalar_tensor(0.0, pc.options()), one = scalar_tensor(1.0, pc.options());
    const int64_t bad = sum(logical_not(logical_and(ge(pc, zero), le(pc, one))).to(DType::Int64)).item<int64_t>();
    WEFT_CHECK(bad == 0, "bernoulli: ", bad, " of the ", pc.numel(), " probabilities (shape ", shape_str(pc.sizes()),
               ") are outside [0, 1] or NaN");
  }
  Tensor out = empty(p.sizes(), p.options());
  PhiloxState s = default_generator().reserve(static_cast<uint64_t>(p.numel()) * values_per_element(p.dtype(), 1));
  fn(out, pc, s);
  return out;
}

Tensor dropout(const Tensor& x, double p, bool training) {
  WEFT_CHECK(p >= 0.0 && p <= 1.0, "dropout: probability has to be between 0 and 1, but got ", p);
  WEFT_CHECK(is_floating(x.dtype()), "dropout: expected a floating tensor, got dtype ", x.dtype());
  if (!training || p == 0.0) return x;
  Tensor mask = empty(x.sizes(), x.options());  // values 0 or 1/(1-p)
  if (p == 1.0) {
    zero_(mask);
  } else {
    auto fn = dropout_mask_table().lookup(x.device(), x.dtype());
    PhiloxState s = default_generator().reserve(static_cast<uint64_t>(x.numel()) * values_per_element(x.dtype(), 1));
    fn(mask, s, 1.0 - p, 1.0 / (1.0 - p));
  }
  Tensor out;
  {
    NoGradGuard no_grad;
    out = mul(x, mask);
  }
  record_differentiable("DropoutBackward", {x}, {out},
                        [mask](const std::vector<Tensor>& g) { return std::vector<Tensor>{mul(g[0], mask)}; });
  return out;
}

}  // namespace weft
