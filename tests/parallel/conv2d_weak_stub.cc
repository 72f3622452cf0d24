// TEMPORARY (until the conv2d kernels are merged into main): a weak conv2d so
// test binaries that link //nn can link. The real (strong) definition replaces
// it as soon as it exists; this stub is never called by these tests.
#include "core/nn_ops.h"

namespace weft {
__attribute__((weak)) Tensor conv2d(const Tensor&, const Tensor&, const Tensor&, std::array<int64_t, 2>,
                                    std::array<int64_t, 2>, std::array<int64_t, 2>, int64_t) {
  WEFT_ERROR("conv2d: not linked in this build");
}
}  // namespace weft
