// device_support for builds without a CUDA toolkit: only the CPU exists.
#include "core/ops.h"
#include "examples/device_support.h"

namespace weft::examples {

bool cuda_built() { return false; }

Device parse_device(const std::string& spec) {
  Device d(spec);
  WEFT_CHECK(d.is_cpu(), "device ", d, " requested but this binary was built without CUDA support (no CUDA toolkit)");
  return d;
}

Tensor move_to(const Tensor& t, Device d) { return t.to(d); }

void synchronize(Device) {}

}  // namespace weft::examples
