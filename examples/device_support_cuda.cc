// device_support for builds with the CUDA backend (//core/cuda).
#include <cuda_runtime_api.h>

#include "core/cuda/runtime.h"
#include "core/ops.h"
#include "examples/device_support.h"

namespace weft::examples {

bool cuda_built() { return true; }

Device parse_device(const std::string& spec) {
  Device d(spec);
  if (d.is_cuda()) {
    cuda::check_device(d);              // without a GPU: the driver's reason
    cuda::set_process_device(d.index);  // Note [process device]: no context on GPU 0 for cuda:N
  }
  return d;
}

// Not through cuda::pin_memory: it allocates (cudaHostAlloc) and fills a fresh pinned
// buffer per call, which costs more than the pageable copy it would speed up, and the
// asynchronous copy would read a buffer freed on return. A reusable pinned staging
// buffer belongs in the data loader (TODO).
Tensor move_to(const Tensor& t, Device d) { return t.to(d); }

void synchronize(Device d) {
  if (d.is_cuda()) cuda::synchronize(d.index);
}

}  // namespace weft::examples
