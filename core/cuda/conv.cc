// CUDA conv2d kernels (core/kernels/conv.h) on cuDNN's convolution API: forward
// (+ bias through cudnnAddTensor), backward data, filter and bias, for float32
// (TF32 only when set_allow_tf32(true)), float64, float16 and bfloat16 (float32
// compute). NCHW, all tensors contiguous (the front end guarantees it).
//
// Algorithms: the cuDNN heuristics (cudnnGet*Algorithm_v7), first candidate that
// reports success, cached per (device, dtype, shapes, params, TF32 flag). When the
// heuristics offer none (likely for float16/bfloat16 NCHW on the legacy API), a
// 16-bit convolution is computed in float32 and converted back (one line on
// stderr the first time; core/cuda/conv_algo_policy.h); float32/float64 throw. Results
// are not guaranteed bitwise deterministic across algorithms (as in PyTorch with
// cudnn.deterministic = False). Outputs are written with beta = 0: cuDNN does not
// read them, so uninitialised (poisoned) outputs are fine. Workspaces come from
// the caching allocator for the duration of one call, on the current stream.
#include "core/kernels/conv.h"

#include <climits>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "core/cuda/blas.h"
#include "core/cuda/conv_algo_policy.h"
#include "core/cuda/cudnn_handle.h"
#include "core/cuda/library_check.h"
#include "core/cuda/runtime.h"
#include "core/dispatch.h"
#include "core/ops.h"

namespace weft::cuda {
namespace {

template <typename T>
constexpr bool kConvType =
    std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

template <typename T>
cudnnDataType_t data_type() {
  if constexpr (std::is_same_v<T, double>) return CUDNN_DATA_DOUBLE;
  else if constexpr (std::is_same_v<T, Half>) return CUDNN_DATA_HALF;
  else if constexpr (std::is_same_v<T, BFloat16>) return CUDNN_DATA_BFLOAT16;
  else return CUDNN_DATA_FLOAT;
}

int to_int(int64_t v, const char* what) {
  WEFT_CHECK(v >= 0 && v <= INT_MAX, "conv2d: ", what, " = ", v, " exceeds cuDNN's 32-bit limits");
  return static_cast<int>(v);
}

// Descriptors of one convolution, destroyed with the object.
struct ConvDescs {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, b = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnDataType_t dt;
  bool fp32_no_tf32;

  // x (N, C_in, H, W), w (C_out, C_in/g, kH, kW), y (N, C_out, OH, OW)
  ConvDescs(cudnnDataType_t dtype, const Tensor& xt, const Tensor& wt, const Tensor& yt, const Conv2dParams& p)
      : dt(dtype), fp32_no_tf32(dtype == CUDNN_DATA_FLOAT && !allow_tf32()) {
    try {
      WEFT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x));
      WEFT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&y));
      WEFT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&b));
      WEFT_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w));
      WEFT_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv));
      WEFT_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, dt, to_int(xt.size(0), "N"),
                                                  to_int(xt.size(1), "C_in"), to_int(xt.size(2), "H"),
                                                  to_int(xt.size(3), "W")));
      WEFT_CUDNN_CHECK(cudnnSetTensor4dDescriptor(y, CUDNN_TENSOR_NCHW, dt, to_int(yt.size(0), "N"),
                                                  to_int(yt.size(1), "C_out"), to_int(yt.size(2), "OH"),
                                                  to_int(yt.size(3), "OW")));
      WEFT_CUDNN_CHECK(cudnnSetTensor4dDescriptor(b, CUDNN_TENSOR_NCHW, dt, 1, to_int(yt.size(1), "C_out"), 1, 1));
      WEFT_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w, dt, CUDNN_TENSOR_NCHW, to_int(wt.size(0), "C_out"),
                                                  to_int(wt.size(1), "C_in / groups"), to_int(wt.size(2), "kH"),
                                                  to_int(wt.size(3), "kW")));
      const cudnnDataType_t compute = dt == CUDNN_DATA_DOUBLE ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
      WEFT_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(
          conv, to_int(p.pH, "padding"), to_int(p.pW, "padding"), to_int(p.sH, "stride"), to_int(p.sW, "stride"),
          to_int(p.dH, "dilation"), to_int(p.dW, "dilation"), CUDNN_CROSS_CORRELATION, compute));
      WEFT_CUDNN_CHECK(cudnnSetConvolutionGroupCount(conv, to_int(p.groups, "groups")));
      set_math(CUDNN_DEFAULT_MATH);
    } catch (...) {
      destroy();
      throw;
    }
  }
  ~ConvDescs() { destroy(); }
  ConvDescs(const ConvDescs&) = delete;
  ConvDescs& operator=(const ConvDescs&) = delete;

  // float32 without TF32 stays on FMA math whatever the algorithm prefers;
  // 16-bit types may use tensor cores.
  void set_math(cudnnMathType_t preferred) {
    cudnnMathType_t m = fp32_no_tf32                                           ? CUDNN_FMA_MATH
                        : (dt == CUDNN_DATA_HALF || dt == CUDNN_DATA_BFLOAT16) ? CUDNN_TENSOR_OP_MATH
                                                                               : preferred;
    if (dt == CUDNN_DATA_DOUBLE) m = CUDNN_DEFAULT_MATH;
    WEFT_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, m));
  }

  void destroy() {
    if (x) cudnnDestroyTensorDescriptor(x);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (b) cudnnDestroyTensorDescriptor(b);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
    x = y = b = nullptr;
    w = nullptr;
    conv = nullptr;
  }
};

// Algorithm cache key: which pass, device, dtype, shapes, params, TF32 flag.
using AlgoKey = std::tuple<int, int, int, std::array<int64_t, 12>, std::array<int64_t, 7>, bool>;

struct AlgoChoice {
  int algo;
  cudnnMathType_t math;
  size_t workspace;
};

std::mutex g_algo_mu;
std::map<AlgoKey, AlgoChoice>& algo_cache() {
  static auto* m = new std::map<AlgoKey, AlgoChoice>();
  return *m;
}

AlgoKey make_key(int pass, int dev, cudnnDataType_t dt, const Tensor& x, const Tensor& w, const Tensor& y,
                 const Conv2dParams& p) {
  return AlgoKey(pass, dev, static_cast<int>(dt),
                 std::array<int64_t, 12>{x.size(0), x.size(1), x.size(2), x.size(3), w.size(0), w.size(1), w.size(2),
                                         w.size(3), y.size(0), y.size(1), y.size(2), y.size(3)},
                 std::array<int64_t, 7>{p.sH, p.sW, p.pH, p.pW, p.dH, p.dW, p.groups}, allow_tf32());
}

// The first heuristic candidate that reports success (perf results are sorted
// best first); algo -1 when there is none (conv_algo_policy.h decides what then).
template <typename Perf>
AlgoChoice pick(const Perf* perf, int n, std::string* why) {
  std::vector<AlgoCandidate> c;
  for (int i = 0; i < n; ++i)
    c.push_back({static_cast<int>(perf[i].algo), static_cast<int>(perf[i].status), static_cast<int>(perf[i].mathType),
                 perf[i].memory});
  const int i = first_usable(c.data(), n, static_cast<int>(CUDNN_STATUS_SUCCESS));
  if (i >= 0) return {c[i].algo, perf[i].mathType, perf[i].memory};
  *why = detail::str_cat(n, " candidates, first status ", n > 0 ? cudnnGetErrorString(perf[0].status) : "none");
  return {-1, CUDNN_DEFAULT_MATH, 0};
}

enum Pass { kFwd = 0, kBwdData = 1, kBwdFilter = 2 };

const char* pass_name(Pass pass) {
  return pass == kFwd ? "forward" : pass == kBwdData ? "backward-data" : "backward-filter";
}

// The cached choice for this configuration; algo -1 when cuDNN offers none (why set).
AlgoChoice choose(Pass pass, int dev, cudnnHandle_t h, ConvDescs& d, const Tensor& x, const Tensor& w, const Tensor& y,
                  const Conv2dParams& p, std::string* why) {
  AlgoKey key = make_key(pass, dev, d.dt, x, w, y, p);
  {
    std::lock_guard<std::mutex> lk(g_algo_mu);
    auto it = algo_cache().find(key);
    if (it != algo_cache().end()) {
      if (it->second.algo < 0) *why = "no algorithm (cached)";
      return it->second;
    }
  }
  AlgoChoice c{};
  int returned = 0;
  if (pass == kFwd) {
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    WEFT_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.conv, d.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
                                                            &returned, perf));
    c = pick(perf, returned, why);
  } else if (pass == kBwdData) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    WEFT_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
        h, d.w, d.y, d.conv, d.x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &returned, perf));
    c = pick(perf, returned, why);
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    WEFT_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        h, d.x, d.y, d.conv, d.w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &returned, perf));
    c = pick(perf, returned, why);
  }
  if (c.algo >= 0) {
    // the workspace for the math type actually used (set_math may override the heuristic's)
    d.set_math(c.math);
    if (pass == kFwd)
      WEFT_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(
          h, d.x, d.w, d.conv, d.y, static_cast<cudnnConvolutionFwdAlgo_t>(c.algo), &c.workspace));
    else if (pass == kBwdData)
      WEFT_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(
          h, d.w, d.y, d.conv, d.x, static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo), &c.workspace));
    else
      WEFT_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(
          h, d.x, d.y, d.conv, d.w, static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo), &c.workspace));
  }
  std::lock_guard<std::mutex> lk(g_algo_mu);
  algo_cache().emplace(key, c);
  return c;
}

// No algorithm for `pass`: true when the caller should compute in float32
// (conv_algo_policy.h), else throws naming the pass and dtype.
bool fall_back_to_float32(Pass pass, DType dtype, const std::string& why, const Tensor& x, const Tensor& w) {
  const ConvPlan plan = plan_for(false, dtype);
  WEFT_CHECK(plan == ConvPlan::kFloat32, "conv2d: cuDNN found no ", pass_name(pass), " algorithm for this ", dtype,
             " configuration (", why, ")");
  if (note_float32_fallback())
    std::fprintf(stderr,
                 "weft: conv2d: cuDNN offers no %s %s algorithm for input %s, weight %s (%s); computing in float32 "
                 "(reported once)\n",
                 pass_name(pass), std::string(dtype_name(dtype)).c_str(), shape_str(x.sizes()).c_str(),
                 shape_str(w.sizes()).c_str(), why.c_str());
  return true;
}

template <typename T>
void cuda_conv2d(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p);
template <typename T>
void cuda_conv2d_backward(const Tensor& gx, const Tensor& gw, const Tensor& gb, const Tensor& go, const Tensor& x,
                          const Tensor& w, const Conv2dParams& p);

Tensor f32(const Tensor& t) { return t.defined() ? t.to(DType::Float32) : Tensor(); }
Tensor f32_like(const Tensor& t) { return t.defined() ? empty(t.sizes(), {DType::Float32, t.device()}) : Tensor(); }
void copy_back(const Tensor& dst, const Tensor& src32) {
  if (!dst.defined()) return;
  Tensor d = dst;
  copy_(d, src32);
}

template <typename T>
void cuda_conv2d(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dParams& p) {
  if constexpr (!kConvType<T>) {
    WEFT_CHECK(false, "conv2d: no CUDA kernel for dtype ", dtype_of<T>);
  } else {
    if (out.numel() == 0) return;
    const int dev = out.device().index;
    DeviceGuard guard(dev);
    cudnnHandle_t h = cudnn_handle(dev);
    ConvDescs d(data_type<T>(), x, w, out, p);
    using S = std::conditional_t<std::is_same_v<T, double>, double, float>;
    const S one = 1, zero = 0;
    if (x.numel() == 0 || w.numel() == 0) {  // empty reduction (C_in = 0 cannot happen; N = 0 returned above)
      Tensor o = out;
      zero_(o);
    } else {
      std::string why;
      AlgoChoice c = choose(kFwd, dev, h, d, x, w, out, p, &why);
      if (c.algo < 0 && fall_back_to_float32(kFwd, dtype_of<T>, why, x, w)) {
        Tensor o32 = f32_like(out);
        cuda_conv2d<float>(o32, f32(x), f32(w), f32(b), p);
        copy_back(out, o32);
        return;
      }
      d.set_math(c.math);
      Tensor ws = cudnn_workspace(dev, c.workspace);
      WEFT_CUDNN_CHECK(cudnnConvolutionForward(
          h, &one, d.x, x.raw_data(), d.w, w.raw_data(), d.conv, static_cast<cudnnConvolutionFwdAlgo_t>(c.algo),
          ws.defined() ? ws.raw_data() : nullptr, c.workspace, &zero, d.y, out.raw_data()));
    }
    if (b.defined()) {
      const cudnnStatus_t st = cudnnAddTensor(h, &one, d.b, b.raw_data(), &one, d.y, out.raw_data());
      if (st == CUDNN_STATUS_NOT_SUPPORTED || st == CUDNN_STATUS_BAD_PARAM) {
        // some cuDNN builds lack 16-bit AddTensor: the elementwise add kernels instead
        Tensor o = out;
        copy_(o, add(out, b.view({1, b.size(0), 1, 1})));
      } else {
        WEFT_CUDNN_CHECK(st);
      }
    }
  }
}

template <typename T>
void cuda_conv2d_backward(const Tensor& gx, const Tensor& gw, const Tensor& gb, const Tensor& go, const Tensor& x,
                          const Tensor& w, const Conv2dParams& p) {
  if constexpr (!kConvType<T>) {
    WEFT_CHECK(false, "conv2d_backward: no CUDA kernel for dtype ", dtype_of<T>);
  } else {
    const int dev = go.device().index;
    DeviceGuard guard(dev);
    using S = std::conditional_t<std::is_same_v<T, double>, double, float>;
    const S one = 1, zero = 0;
    if (go.numel() == 0) {  // nothing flows back: zero gradients
      for (Tensor t : {gx, gw, gb})
        if (t.defined()) zero_(t);
      return;
    }
    cudnnHandle_t h = cudnn_handle(dev);
    ConvDescs d(data_type<T>(), x, w, go, p);
    std::string why;
    AlgoChoice cd = gx.defined() ? choose(kBwdData, dev, h, d, x, w, go, p, &why) : AlgoChoice{0, {}, 0};
    AlgoChoice cf = gw.defined() && cd.algo >= 0 ? choose(kBwdFilter, dev, h, d, x, w, go, p, &why) : cd;
    if ((cd.algo < 0 || cf.algo < 0) &&
        fall_back_to_float32(cd.algo < 0 ? kBwdData : kBwdFilter, dtype_of<T>, why, x, w)) {
      Tensor gx32 = f32_like(gx), gw32 = f32_like(gw), gb32 = f32_like(gb);
      cuda_conv2d_backward<float>(gx32, gw32, gb32, f32(go), f32(x), f32(w), p);
      copy_back(gx, gx32);
      copy_back(gw, gw32);
      copy_back(gb, gb32);
      return;
    }
    if (gx.defined()) {
      AlgoChoice c = cd;
      d.set_math(c.math);
      Tensor ws = cudnn_workspace(dev, c.workspace);
      WEFT_CUDNN_CHECK(cudnnConvolutionBackwardData(
          h, &one, d.w, w.raw_data(), d.y, go.raw_data(), d.conv, static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo),
          ws.defined() ? ws.raw_data() : nullptr, c.workspace, &zero, d.x, gx.raw_data()));
    }
    if (gw.defined()) {
      AlgoChoice c = cf;
      d.set_math(c.math);
      Tensor ws = cudnn_workspace(dev, c.workspace);
      WEFT_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
          h, &one, d.x, x.raw_data(), d.y, go.raw_data(), d.conv, static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo),
          ws.defined() ? ws.raw_data() : nullptr, c.workspace, &zero, d.w, gw.raw_data()));
    }
    if (gb.defined()) {
      const cudnnStatus_t st = cudnnConvolutionBackwardBias(h, &one, d.y, go.raw_data(), &zero, d.b, gb.raw_data());
      if (st == CUDNN_STATUS_NOT_SUPPORTED || st == CUDNN_STATUS_BAD_PARAM) {
        // some cuDNN builds lack 16-bit BackwardBias: a float32 sum over (N, OH, OW) instead
        Tensor g = gb;
        copy_(g, sum(go.to(DType::Float32), {0, 2, 3}));
      } else {
        WEFT_CUDNN_CHECK(st);
      }
    }
  }
}

constexpr uint32_t kCudnnTypes = (1u << int(DType::Float32)) | (1u << int(DType::Float64)) |
                                 (1u << int(DType::Float16)) | (1u << int(DType::BFloat16));
WEFT_REGISTER_KERNEL(conv2d_table(), DeviceType::CUDA, kCudnnTypes, cuda_conv2d);
WEFT_REGISTER_KERNEL(conv2d_backward_table(), DeviceType::CUDA, kCudnnTypes, cuda_conv2d_backward);

}  // namespace
}  // namespace weft::cuda
