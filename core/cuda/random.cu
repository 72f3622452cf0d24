// CUDA kernels for the random tables (core/kernels/random.h): uniform_, normal_,
// randint, dropout_mask, bernoulli.
//
// Contract: element i reads the Philox4x32-10 values [i*K, (i+1)*K) of the draw
// at `s` (Note [philox counter layout], core/rng.h) and transforms them with the
// formulas of the CPU kernels in core/ops/random.cc, so for one (seed, offset)
// the GPU produces the CPU's numbers: bit for bit for uniform_, randint,
// dropout_mask and bernoulli; normal_ within the ulp differences of the CUDA and
// host log/cos (every other operation is spelled out unfused, see ew_math.cuh).
// Each thread computes one Philox block (4 values) and writes the 4 / K elements
// that use it. Outputs are contiguous.
#include "core/cuda/ew_math.cuh"
#include "core/cuda/loops.cuh"
#include "core/kernels/random.h"

namespace weft::cuda {
namespace {

__device__ __forceinline__ uint4 philox_block(uint64_t block, uint32_t k0, uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t c0 = static_cast<uint32_t>(block), c1 = static_cast<uint32_t>(block >> 32), c2 = 0, c3 = 0;
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += kW0;
      k1 += kW1;
    }
    uint32_t hi0 = __umulhi(kM0, c0), lo0 = kM0 * c0;
    uint32_t hi1 = __umulhi(kM1, c2), lo1 = kM1 * c2;
    uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
  }
  return make_uint4(c0, c1, c2, c3);
}

// f(i, v) for every element i < n with its K values v[0..K).
template <int K, typename F>
__global__ void philox_kernel(int64_t n, uint64_t seed, uint64_t offset, F f) {
  constexpr int kPerBlock = 4 / K;  // elements per Philox block
  const int64_t nblocks = (n + kPerBlock - 1) / kPerBlock;
  const uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  const uint64_t base = offset / 4;
  for (int64_t b = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; b < nblocks;
       b += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    uint4 r = philox_block(base + static_cast<uint64_t>(b), k0, k1);
    const uint32_t v[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int j = 0; j < kPerBlock; ++j) {
      int64_t e = b * kPerBlock + j;
      if (e < n) f(e, v + j * K);
    }
  }
}

template <int K, typename F>
void launch_philox(const Tensor& out, PhiloxState s, const F& f, const char* name) {
  const int64_t n = out.numel();
  if (n == 0) return;
  DeviceGuard guard(out.device().index);
  const int64_t nblocks = (n + (4 / K) - 1) / (4 / K);
  philox_kernel<K, F><<<grid_for(nblocks), kThreads, 0, stream_for(out)>>>(n, s.seed, s.offset, f);
  WEFT_CUDA_KERNEL_CHECK(name);
}

// ---- value transforms (core/rng.h, core/ops/random.cc) ----
__device__ __forceinline__ float uniform_float(uint32_t x) { return static_cast<float>(x >> 8) * (1.0f / 16777216.0f); }
__device__ __forceinline__ double uniform_double(uint32_t hi, uint32_t lo) {
  uint64_t x = (static_cast<uint64_t>(hi) << 32) | lo;
  return static_cast<double>(x >> 11) * (1.0 / 9007199254740992.0);
}

template <typename T>
constexpr int kUniformValues = std::is_same_v<T, double> ? 2 : 1;

template <typename T>
__device__ __forceinline__ opmath_t<T> uniform_of(const uint32_t* v) {
  if constexpr (std::is_same_v<T, double>) return uniform_double(v[0], v[1]);
  else return uniform_float(v[0]);
}
// As many random bits as T's significand holds (exactly representable in T).
template <typename T>
__device__ __forceinline__ opmath_t<T> uniform_repr(const uint32_t* v) {
  if constexpr (std::is_same_v<T, double>) return uniform_double(v[0], v[1]);
  else if constexpr (std::is_same_v<T, BFloat16>) return static_cast<float>(v[0] >> 24) * (1.0f / 256.0f);
  else if constexpr (std::is_same_v<T, Half>) return static_cast<float>(v[0] >> 21) * (1.0f / 2048.0f);
  else return uniform_float(v[0]);
}

// lo + scale * x as the host compiles `lo + scale * x` in core/ops/random.cc:
// g++ (C++ mode, -O3 -march=native) contracts it into one fma, which
// a probe of the CPU kernel confirmed (10000/10000 float32 and float64
// values equal fma(range, u, lo); the unfused form matched only ~55%).
template <typename M>
__device__ __forceinline__ M affine(M lo, M scale, M x) {
  return fma_rn(scale, x, lo);
}

// Value v in opmath rounded to T and back.
template <typename T>
__device__ __forceinline__ opmath_t<T> round_to(opmath_t<T> v) {
  if constexpr (std::is_same_v<T, Half>) return __half2float(__float2half_rn(v));
  else if constexpr (std::is_same_v<T, BFloat16>) return __bfloat162float(__float2bfloat16_rn(v));
  else return v;
}

template <typename T>
struct UniformFn {
  using M = opmath_t<T>;
  T* p;
  M lo, range, high;
  __device__ __forceinline__ void operator()(int64_t i, const uint32_t* v) const {
    M x = round_to<T>(affine(lo, range, uniform_repr<T>(v)));
    // rounding of low + range * u can reach `high`; keep the interval half-open
    if (!(x < high) && range > M(0)) x = round_to<T>(lo);
    store<T>(p + i, x);
  }
};

// Box-Muller: z = sqrt(-2 ln(1 - u1)) cos(2 pi u2).
template <typename T>
struct NormalFn {
  using M = opmath_t<T>;
  static constexpr int K = 2 * kUniformValues<T>;
  T* p;
  M mu, sd;
  __device__ __forceinline__ void operator()(int64_t i, const uint32_t* v) const {
    const M two_pi = static_cast<M>(6.283185307179586);
    M u1 = uniform_of<T>(v), u2 = uniform_of<T>(v + K / 2);
    M r = sqrt_rn(mul_rn(M(-2), math_log(sub_rn(M(1), u1))));
    M z = mul_rn(r, math_cos(mul_rn(two_pi, u2)));
    store<T>(p + i, affine(mu, sd, z));
  }
};

template <typename T>
struct RandintFn {
  T* p;
  int64_t low;
  uint64_t range;
  __device__ __forceinline__ void operator()(int64_t i, const uint32_t* v) const {
    uint64_t x = (static_cast<uint64_t>(v[0]) << 32) | v[1];
    store<T>(p + i, static_cast<opmath_t<T>>(low + static_cast<int64_t>(x % range)));
  }
};

template <typename T>
struct DropoutFn {
  using M = opmath_t<T>;
  T* p;
  M keep, on;
  __device__ __forceinline__ void operator()(int64_t i, const uint32_t* v) const {
    store<T>(p + i, uniform_of<T>(v) < keep ? on : M(0));
  }
};

template <typename T>
struct BernoulliFn {
  using M = opmath_t<T>;
  T* out;
  const T* prob;
  __device__ __forceinline__ void operator()(int64_t i, const uint32_t* v) const {
    store<T>(out + i, uniform_of<T>(v) < load<T>(prob + i) ? M(1) : M(0));
  }
};

template <typename T>
void cuda_uniform(const Tensor& out, PhiloxState s, double low, double high) {
  using M = opmath_t<T>;
  if constexpr (in_set(dtype_of<T>, kFloatingTypes)) {
    UniformFn<T> f{static_cast<T*>(out.raw_data()), static_cast<M>(low), static_cast<M>(high - low),
                   static_cast<M>(high)};
    launch_philox<kUniformValues<T>>(out, s, f, "uniform_");
  }
}
template <typename T>
void cuda_normal(const Tensor& out, PhiloxState s, double mean, double std) {
  using M = opmath_t<T>;
  if constexpr (in_set(dtype_of<T>, kFloatingTypes)) {
    NormalFn<T> f{static_cast<T*>(out.raw_data()), static_cast<M>(mean), static_cast<M>(std)};
    launch_philox<NormalFn<T>::K>(out, s, f, "normal_");
  }
}
template <typename T>
void cuda_randint(const Tensor& out, PhiloxState s, int64_t low, int64_t high) {
  if constexpr (in_set(dtype_of<T>, kNumericTypes)) {
    RandintFn<T> f{static_cast<T*>(out.raw_data()), low, static_cast<uint64_t>(high) - static_cast<uint64_t>(low)};
    launch_philox<2>(out, s, f, "randint");
  }
}
template <typename T>
void cuda_dropout_mask(const Tensor& mask, PhiloxState s, double keep, double scale) {
  using M = opmath_t<T>;
  if constexpr (in_set(dtype_of<T>, kFloatingTypes)) {
    // on = T(M(scale)) as on the CPU: round to T here, store<T> keeps it
    M on = static_cast<M>(static_cast<T>(static_cast<M>(scale)));
    DropoutFn<T> f{static_cast<T*>(mask.raw_data()), static_cast<M>(keep), on};
    launch_philox<kUniformValues<T>>(mask, s, f, "dropout_mask");
  }
}
template <typename T>
void cuda_bernoulli(const Tensor& out, const Tensor& p, PhiloxState s) {
  if constexpr (in_set(dtype_of<T>, kFloatingTypes)) {
    WEFT_CHECK(p.is_contiguous() && out.is_contiguous() && p.numel() == out.numel() && p.device() == out.device(),
               "bernoulli (cuda): expected contiguous probabilities on ", out.device(), " with ", out.numel(),
               " elements");
    BernoulliFn<T> f{static_cast<T*>(out.raw_data()), static_cast<const T*>(p.raw_data())};
    launch_philox<kUniformValues<T>>(out, s, f, "bernoulli");
  }
}

WEFT_REGISTER_KERNEL(uniform__table(), DeviceType::CUDA, kFloatingTypes, cuda_uniform);
WEFT_REGISTER_KERNEL(normal__table(), DeviceType::CUDA, kFloatingTypes, cuda_normal);
WEFT_REGISTER_KERNEL(randint_table(), DeviceType::CUDA, kNumericTypes, cuda_randint);
WEFT_REGISTER_KERNEL(dropout_mask_table(), DeviceType::CUDA, kFloatingTypes, cuda_dropout_mask);
WEFT_REGISTER_KERNEL(bernoulli_table(), DeviceType::CUDA, kFloatingTypes, cuda_bernoulli);

}  // namespace
}  // namespace weft::cuda
