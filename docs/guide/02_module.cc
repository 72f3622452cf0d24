// Guide, chapter 2: a Module. Defines a two-layer network as an nn::Module
// with named children, lists its parameters, and copies its state dict into a
// second instance, which then computes the same output.
#include <iostream>
#include <memory>

#include "core/rng.h"
#include "nn/nn.h"

namespace nn = weft::nn;
using weft::Tensor;

// input (N, 4) -> logits (N, 3)
class TwoLayer : public nn::Module {
 public:
  TwoLayer() : Module("TwoLayer") {
    hidden = register_module("hidden", std::make_shared<nn::Linear>(4, 16));
    out = register_module("out", std::make_shared<nn::Linear>(16, 3));
  }
  Tensor forward(const Tensor& x) override { return (*out)(weft::relu((*hidden)(x))); }

  std::shared_ptr<nn::Linear> hidden, out;
};

int main() {
  weft::manual_seed(1);
  auto model = std::make_shared<TwoLayer>();
  std::cout << model->repr() << "\n";
  for (const auto& [name, p] : model->named_parameters()) {
    std::cout << "  " << name << " " << weft::shape_str(p.sizes()) << "\n";
  }
  std::cout << "parameters: " << model->num_parameters() << "\n";

  Tensor x = weft::randn({5, 4});  // (5, 4)
  Tensor y = (*model)(x);          // (5, 3)
  std::cout << "output shape: " << weft::shape_str(y.sizes()) << "\n";

  // A second instance starts from other weights; loading the state dict
  // (parameters and buffers by name) makes it compute the same function.
  auto copy = std::make_shared<TwoLayer>();
  std::cout << "before loading, same output: " << (weft::equal((*copy)(x), y) ? "yes" : "no") << "\n";
  copy->load_state_dict(model->state_dict());
  const bool same = weft::equal((*copy)(x), y);
  std::cout << "after loading, same output: " << (same ? "yes" : "no") << "\n";
  return same ? 0 : 1;
}
