// CUDA copy_ and fill_: device<->device (same GPU: one kernel or cudaMemcpyAsync;
// across GPUs: a synchronous peer copy), host->device and device->host, converting dtypes.
//
// Synchronisation (core/cuda/stream.h): all work runs on the current stream of the
// CUDA operand's device. Device->host copies synchronise that stream before
// returning, then report deferred index errors (Note [deferred index checks]). Host->device copies from pinned memory
// are asynchronous; from pageable memory the runtime stages the bytes before returning, so the host buffer may be
// reused at once.
#include "core/cuda/check.h"
#include "core/cuda/index_checks.h"
#include "core/cuda/loops.cuh"
#include "core/kernels/copy.h"
#include "core/ops.h"

namespace weft::cuda {
namespace {

bool same_layout_dense(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.sizes() == b.sizes() && a.is_contiguous() && b.is_contiguous();
}

template <typename Dst>
void device_to_device(const Tensor& dst, const Tensor& src) {
  cudaStream_t stream = stream_for(dst);
  if (same_layout_dense(dst, src)) {
    if (dst.raw_data() != src.raw_data())
      WEFT_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), src.raw_data(), dst.nbytes(), cudaMemcpyDeviceToDevice, stream));
    return;
  }
  dispatch(src.dtype(), "copy_", [&](auto tag) {
    using Src = typename decltype(tag)::type;
    elementwise<Dst, Src>(dst, {src}, Identity{});
  });
}

template <typename Dst>
void cuda_copy(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  if (dst.device().is_cuda() && src.device().is_cuda()) {
    DeviceGuard g(dst.device().index);
    if (dst.device() != src.device()) {
      // peer copy of a dense source into a staging tensor on dst's GPU
      Tensor s = src.contiguous();
      Tensor staged = empty(s.sizes(), {s.dtype(), dst.device()});
      {
        // the source's writes are done (a null stream names the legacy stream of the
        // *current* device, so the source's device must be current here)
        DeviceGuard gs(s.device().index);
        WEFT_CUDA_CHECK(cudaStreamSynchronize(stream_for(s)));
      }
      WEFT_CUDA_CHECK(cudaMemcpyPeerAsync(staged.raw_data(), dst.device().index, s.raw_data(), s.device().index,
                                          s.nbytes(), stream_for(dst)));
      // s (maybe a temporary freed on return into the source device's cache) must not
      // be reused or overwritten by the source's stream before the copy has read it
      WEFT_CUDA_CHECK(cudaStreamSynchronize(stream_for(dst)));
      device_to_device<Dst>(dst, staged);
      return;
    }
    device_to_device<Dst>(dst, src);
    return;
  }
  if (src.device().is_cpu()) {  // host -> device
    DeviceGuard g(dst.device().index);
    Tensor s = src.to(dst.dtype()).contiguous();
    cudaStream_t stream = stream_for(dst);
    if (dst.is_contiguous()) {
      WEFT_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), s.raw_data(), s.nbytes(), cudaMemcpyHostToDevice, stream));
      return;
    }
    Tensor staged = empty(s.sizes(), {s.dtype(), dst.device()});
    WEFT_CUDA_CHECK(cudaMemcpyAsync(staged.raw_data(), s.raw_data(), s.nbytes(), cudaMemcpyHostToDevice, stream));
    device_to_device<Dst>(dst, staged);
    return;
  }
  // device -> host: convert and densify on the GPU, then one transfer
  DeviceGuard g(src.device().index);
  Tensor s = src;
  if (src.dtype() != dst.dtype() || !src.is_contiguous() || src.sizes() != dst.sizes()) {
    s = empty(dst.sizes(), {dst.dtype(), src.device()});
    device_to_device<Dst>(s, src);
  }
  cudaStream_t stream = stream_for(s);
  if (dst.is_contiguous()) {
    WEFT_CUDA_CHECK(cudaMemcpyAsync(dst.raw_data(), s.raw_data(), s.nbytes(), cudaMemcpyDeviceToHost, stream));
    WEFT_CUDA_CHECK(cudaStreamSynchronize(stream));
    flush_index_checks(src.device().index);  // Note [deferred index checks]: the host waited anyway
    return;
  }
  Tensor host = empty(s.sizes(), {s.dtype(), kCPU});
  WEFT_CUDA_CHECK(cudaMemcpyAsync(host.raw_data(), s.raw_data(), s.nbytes(), cudaMemcpyDeviceToHost, stream));
  WEFT_CUDA_CHECK(cudaStreamSynchronize(stream));
  flush_index_checks(src.device().index);
  copy_table()(kCPU, dst.dtype(), dst, host);
}

template <typename T>
void cuda_fill(const Tensor& dst, const Scalar& value) {
  opmath_t<T> v = static_cast<opmath_t<T>>(value.to<T>());
  elementwise<T>(dst, {}, [v] __device__() { return v; });
}

WEFT_REGISTER_KERNEL(copy_table(), DeviceType::CUDA, kAllTypes, cuda_copy);
WEFT_REGISTER_KERNEL(fill_table(), DeviceType::CUDA, kAllTypes, cuda_fill);

}  // namespace
}  // namespace weft::cuda
