// PReLU's constructor (the other activation layers are inline in nn/activations.h).
#include "nn/activations.h"

#include "core/ops.h"

namespace weft::nn {

PReLU::PReLU(int64_t n, double init) : Module("PReLU"), num_parameters(n) {
  WEFT_CHECK(n > 0, "PReLU: num_parameters must be positive, got ", n);
  weight = register_parameter("weight", full({n}, init));
}

}  // namespace weft::nn
