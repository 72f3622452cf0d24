// Guide, chapter 7: a training checkpoint in one file. Trains, saves the
// model, the optimizer's state and the random generator's state with the
// step, trains on; then a fresh model loads the checkpoint and repeats those
// last steps with exactly the same losses.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/rng.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "nn/nn.h"
#include "optim/sgd.h"

namespace nn = weft::nn;
using weft::Tensor;

std::shared_ptr<nn::Sequential> make_model() {
  return nn::Sequential::of(std::make_shared<nn::Linear>(4, 16), std::make_shared<nn::ReLU>(),
                            std::make_shared<nn::Linear>(16, 1));
}

// `steps` SGD steps on batches drawn from the global random generator; the losses.
std::vector<double> train(nn::Module& model, weft::optim::SGD& opt, int steps) {
  std::vector<double> losses;
  for (int i = 0; i < steps; ++i) {
    Tensor x = weft::randn({32, 4});    // (32, 4)
    Tensor y = x.sum({1}, true) * 0.5;  // (32, 1)
    Tensor loss = weft::mse_loss(model(x), y);
    opt.zero_grad();
    loss.backward();
    opt.step();
    losses.push_back(loss.item<double>());
  }
  return losses;
}

int main(int argc, char** argv) {
  const std::filesystem::path dir = argc > 1 ? argv[1] : std::filesystem::temp_directory_path();
  const std::string path = (dir / "guide_checkpoint.safetensors").string();

  weft::manual_seed(0);
  auto model = make_model();
  weft::optim::SGD opt(model->named_parameters(), {.lr = 0.05, .momentum = 0.9});  // knows the parameters' names
  train(*model, opt, 20);

  weft::io::CheckpointContents saved;
  saved.model = model->state_dict();
  saved.optimizer = opt.state_dict_by_name();  // "state.0.weight.momentum_buffer", ...
  saved.rng = weft::get_rng_state();           // the batches to come depend on it
  saved.step = 20;
  weft::io::save_checkpoint(path, saved);  // atomic and checksummed
  const std::vector<double> uninterrupted = train(*model, opt, 10);

  // The file is plain safetensors: list what it holds.
  for (const auto& [name, entry] : weft::io::read_safetensors_header(path).entries) {
    std::printf("  %s %s\n", name.c_str(), weft::shape_str(entry.shape).c_str());
  }

  // A fresh model (other initial weights) resumes from the file.
  weft::manual_seed(123);
  auto resumed = make_model();
  weft::optim::SGD resumed_opt(resumed->named_parameters(), {.lr = 0.05, .momentum = 0.9});
  weft::io::CheckpointContents loaded = weft::io::load_checkpoint(path);
  weft::io::check_model_state(loaded.model, resumed->state_dict().items(), path);  // names and shapes
  resumed->load_state_dict(loaded.model);
  resumed_opt.load_state_dict_by_name(loaded.optimizer);
  weft::set_rng_state(loaded.rng);
  const std::vector<double> after_resume = train(*resumed, resumed_opt, 10);

  const bool same = after_resume == uninterrupted;
  std::printf("step %lld: losses after resuming %s the uninterrupted run's (last %.6f)\n",
              static_cast<long long>(loaded.step), same ? "equal" : "DIFFER FROM", after_resume.back());
  return same ? 0 : 1;
}
