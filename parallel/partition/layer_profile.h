// LayerProfile: what the partitioner knows about one layer (one child of a
// Sequential) on one micro-batch: its measured forward and backward times and
// the bytes it costs a pipeline stage.
//
// Contract:
// - Times are seconds per micro-batch; bytes are bytes. A stage holding layers
//   [b, e) keeps every layer's resident bytes (parameters, gradients, optimizer
//   state and buffers) once, and each layer's activation_bytes once per live
//   micro-batch (Note [stage cost model] in balance.h).
// - output_bytes is what crosses a stage boundary placed right after the layer
//   (the activation forward, and its gradient of the same size backward).
// - Plain data: profile.h measures it, tests and users may write it by hand.
#pragma once

#include <cstdint>
#include <string>

namespace weft::parallel::partition {

struct LayerProfile {
  std::string name;  // the child's name in its Sequential ("0", "ln_f")
  std::string type;  // the module's type name ("Linear")
  double forward_s = 0;
  double backward_s = 0;  // the whole backward (input and weight gradients)
  int64_t num_parameters = 0;
  int64_t param_bytes = 0;
  int64_t grad_bytes = 0;             // trainable parameters' gradients
  int64_t optimizer_state_bytes = 0;  // e.g. 2x the trainable bytes for Adam
  int64_t buffer_bytes = 0;           // running statistics and other buffers
  int64_t activation_bytes = 0;       // kept per micro-batch until its backward
  int64_t output_bytes = 0;           // crosses a boundary placed after this layer

  double time_s() const { return forward_s + backward_s; }
  // Bytes the layer holds whatever the number of micro-batches in flight.
  int64_t resident_bytes() const { return param_bytes + grad_bytes + optimizer_state_bytes + buffer_bytes; }
  friend bool operator==(const LayerProfile&, const LayerProfile&) = default;
};

// "layer 5 (Linear)", or "layer 5 'ln_f' (LayerNorm)" when the name is not the index.
inline std::string layer_label(const LayerProfile& layer, int index) {
  std::string s = "layer " + std::to_string(index);
  if (!layer.name.empty() && layer.name != std::to_string(index)) s += " '" + layer.name + "'";
  if (!layer.type.empty()) s += " (" + layer.type + ")";
  return s;
}

}  // namespace weft::parallel::partition
