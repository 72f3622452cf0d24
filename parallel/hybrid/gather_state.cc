// Gathering name -> tensor maps (contract in gather_state.h).
#include "parallel/hybrid/gather_state.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/ops.h"
#include "io/safetensors.h"

namespace weft::parallel::hybrid {

std::map<std::string, Tensor> allgather_tensor_maps(ProcessGroup& group, const std::map<std::string, Tensor>& mine) {
  std::map<std::string, Tensor> cpu;
  for (const auto& [k, t] : mine) cpu[k] = t.detach().to(kCPU).contiguous();
  const std::string bytes = io::safetensors_serialize(cpu);
  const int n = group.size();
  Tensor len = full({1}, static_cast<int64_t>(bytes.size()), DType::Int64);
  std::vector<Tensor> lens(n);
  for (auto& l : lens) l = empty({1}, DType::Int64);
  group.allgather(lens, len)->wait();
  int64_t most = 1;
  for (auto& l : lens) most = std::max(most, l.item<int64_t>());
  Tensor buf = zeros({most}, DType::UInt8);  // (most,)
  std::memcpy(buf.data_ptr<uint8_t>(), bytes.data(), bytes.size());
  std::vector<Tensor> all(n);
  for (auto& t : all) t = empty({most}, DType::UInt8);
  group.allgather(all, buf)->wait();
  std::map<std::string, Tensor> out;
  for (int r = 0; r < n; ++r) {
    const std::string theirs(reinterpret_cast<const char*>(all[r].data_ptr<uint8_t>()),
                             static_cast<size_t>(lens[r].item<int64_t>()));
    for (auto& [k, t] : io::safetensors_deserialize(theirs, "the state of rank " + std::to_string(r)).tensors)
      out.emplace(k, t);
  }
  return out;
}

}  // namespace weft::parallel::hybrid
