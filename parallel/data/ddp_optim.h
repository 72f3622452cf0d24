// optimizer_update: the `update` of DistributedDataParallel's non-blocking
// mode (DDPOptions::update) made from an optimizer. Its own target
// (//parallel/data:ddp_optim) so that //parallel/data:ddp does not depend on //optim.
#pragma once

#include "optim/optimizer.h"
#include "parallel/data/ddp.h"

namespace weft::parallel {

// An update function stepping `opt` for a subset of its parameters: the other
// parameters' gradients are hidden during the step. `opt` must outlive it.
ParamUpdateFn optimizer_update(optim::Optimizer& opt);

}  // namespace weft::parallel
