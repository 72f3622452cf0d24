// Gathering name -> tensor maps (contract in gather_state.h).
#include "parallel/hybrid/gather_state.h"

#include <vector>

#include "core/ops.h"
#include "io/safetensors.h"
#include "parallel/comm/collectives.h"

namespace weft::parallel::hybrid {

std::map<std::string, Tensor> allgather_tensor_maps(ProcessGroup& group, const std::map<std::string, Tensor>& mine) {
  std::map<std::string, Tensor> cpu;
  for (const auto& [k, t] : mine) cpu[k] = t.detach().to(kCPU).contiguous();
  const std::vector<std::string> all = allgather_bytes(group, io::safetensors_serialize(cpu));
  std::map<std::string, Tensor> out;
  for (size_t r = 0; r < all.size(); ++r)
    for (auto& [k, t] : io::safetensors_deserialize(all[r], "the state of rank " + std::to_string(r)).tensors)
      out.emplace(k, t);
  return out;
}

}  // namespace weft::parallel::hybrid
