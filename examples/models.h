// The reference models shared by the examples and the benchmarks (same
// architectures as the PyTorch peers in bench/).
#pragma once

#include <memory>

#include "nn/nn.h"

namespace weft::examples {

// conv(1->32,3x3,pad1)-relu-maxpool2-conv(32->64,3x3,pad1)-relu-maxpool2-fc(3136->128)-relu-fc(128->10)
// input (N, 1, 28, 28) -> logits (N, 10)
inline std::shared_ptr<nn::Sequential> fashion_cnn() {
  nn::Conv2dOptions pad1;
  pad1.padding = {1, 1};
  return nn::Sequential::of(std::make_shared<nn::Conv2d>(1, 32, 3, pad1), std::make_shared<nn::ReLU>(),
                            std::make_shared<nn::MaxPool2d>(2), std::make_shared<nn::Conv2d>(32, 64, 3, pad1),
                            std::make_shared<nn::ReLU>(), std::make_shared<nn::MaxPool2d>(2),
                            std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(3136, 128),
                            std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(128, 10));
}

// MLP 784-512-256-10; input (N, 784) (or (N, 1, 28, 28), flattened) -> logits (N, 10)
inline std::shared_ptr<nn::Sequential> fashion_mlp() {
  return nn::Sequential::of(std::make_shared<nn::Flatten>(), std::make_shared<nn::Linear>(784, 512),
                            std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(512, 256),
                            std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(256, 10));
}

// (N, 1, H, W) -> (N, H, W): each image row is one step of a sequence.
class ImageRows : public nn::Module {
 public:
  ImageRows() : nn::Module("ImageRows") {}
  Tensor forward(const Tensor& x) override { return x.reshape({x.size(0), x.size(-2), x.size(-1)}); }
};
// (N, T, F) -> (N, F): a sequence's last step. After a recurrent layer in a
// Sequential it receives {output, h_n[, c_n]} and takes the output's.
class LastStep : public nn::Module {
 public:
  LastStep() : nn::Module("LastStep") {}
  Tensor forward(const Tensor& x) override { return x.select(1, -1); }
  nn::Tensors forward_multi(const nn::Tensors& xs) override {
    WEFT_CHECK(!xs.empty(), "LastStep: no input");
    return {forward(xs[0])};
  }
};

// A recurrent classifier: the 28 rows of an image are 28 steps of an LSTM
// (28 -> 128, batch first), whose last output feeds fc(128->10).
// input (N, 1, 28, 28) -> logits (N, 10)
inline std::shared_ptr<nn::Sequential> fashion_lstm() {
  return nn::Sequential::of(std::make_shared<ImageRows>(),
                            std::make_shared<nn::LSTM>(28, 128, nn::LSTMOptions{.batch_first = true}),
                            std::make_shared<LastStep>(), std::make_shared<nn::Linear>(128, 10));
}

}  // namespace weft::examples
