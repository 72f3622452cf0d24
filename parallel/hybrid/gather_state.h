// Gathering name -> tensor maps (state dicts, optimizer state by name) over a
// process group, for the whole-model views of a partitioned model.
//
// Contract: allgather_tensor_maps(group, mine) is collective; every rank gets
// the union of all ranks' maps (each encoded with safetensors_serialize, so
// any dtype and shape travels, and decoded on arrival). A key held by several
// ranks is taken from the lowest of them; callers pass empty maps from ranks
// whose copy is a replica. Tensors are moved to the CPU first.
#pragma once

#include <map>
#include <string>

#include "core/tensor.h"
#include "parallel/comm/process_group.h"

namespace weft::parallel::hybrid {

std::map<std::string, Tensor> allgather_tensor_maps(ProcessGroup& group, const std::map<std::string, Tensor>& mine);

}  // namespace weft::parallel::hybrid
