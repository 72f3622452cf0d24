// fashion_mnist: trains the reference CNN on Fashion-MNIST on the CPU or a GPU
// (--device cuda[:N]; --amp bf16 for bfloat16 autocast).
//
//   ./bazelw run //examples:fashion_mnist -- [flags]
//
// Reads Debian's dataset-fashion-mnist (or --data DIR), shows a progress bar per
// epoch, evaluates on the test set after each epoch, writes metrics (JSON lines)
// and an SVG plot, optionally checkpoints every epoch (--save) and resumes
// (--resume), and ends with the line `test_accuracy=0.XXXX`. A resumed run
// reproduces the uninterrupted run's per-epoch losses exactly: the data order
// is seeded by (seed, epoch), kernels do not depend on the thread count, and the
// checkpoint holds model, optimizer, schedule, RNG state, step and epoch.
#include "io/fashion_mnist.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>

#include "core/autograd_meta.h"
#include "core/nn_ops.h"
#include "core/parallel.h"
#include "core/rng.h"
#include "examples/device_support.h"
#include "examples/flags.h"
#include "examples/models.h"
#include "examples/train_flags.h"
#include "examples/train_report.h"
#include "io/checkpoint.h"
#include "io/dataloader.h"
#include "optim/lr_scheduler.h"
#include "optim/sgd.h"

namespace weft::examples {
namespace {

// The shared training flags (examples/train_flags.h) and this example's own.
struct Flags : TrainFlags {
  int64_t stop_after = 0;  // 0 = run all epochs
  std::string device = "cpu";
  std::string amp = "none";
};

// The flags, or std::nullopt after --help printed them.
std::optional<Flags> parse(int argc, char** argv) {
  Flags f;
  FlagParser p("usage: fashion_mnist [flags]");
  add_train_flags(p, f, {.program = "fashion_mnist"});
  p.add("--stop-after-epoch K", &f.stop_after, "stop after epoch K as if interrupted (to test --resume)", "none")
      .add("--device D", &f.device, "cpu, cuda or cuda:N")
      .add_choice("--amp", &f.amp, {"none", "bf16"}, "bfloat16 autocast for forward passes");
  if (!p.parse(argc, argv, std::cout)) return std::nullopt;
  resolve_train_flags(f);
  return f;
}

std::shared_ptr<io::TensorDataset> limit(const io::TensorDataset& ds, int64_t n) {
  if (n <= 0 || n >= ds.size()) return std::make_shared<io::TensorDataset>(ds.data(), ds.targets());
  return std::make_shared<io::TensorDataset>(ds.data().narrow(0, 0, n), ds.targets().narrow(0, 0, n));
}

std::map<std::string, Tensor> to_map(const nn::StateDict& sd) {
  std::map<std::string, Tensor> m;
  for (auto& [k, v] : sd) m[k] = v.to(kCPU).clone();
  return m;
}

// Mean loss and accuracy of `model` over `loader`.
std::pair<double, double> evaluate(nn::Module& model, io::DataLoader& loader, Device dev, const std::string& amp) {
  NoGradGuard ng;
  model.eval();
  double loss_sum = 0;
  int64_t correct = 0, seen = 0;
  for (auto& batch : loader) {
    Tensor x = move_to(batch.data, dev), target = move_to(batch.target, dev);
    AmpScope autocast(amp, dev);
    Tensor logits = model(x);  // (B, 10)
    loss_sum += cross_entropy(logits, target, Reduction::Sum).item<double>();
    correct += (argmax(logits, 1) == target).sum().item<int64_t>();
    seen += batch.data.size(0);
  }
  model.train();
  return {loss_sum / std::max<int64_t>(seen, 1), static_cast<double>(correct) / std::max<int64_t>(seen, 1)};
}

int run(const Flags& f) {
  const Device dev = parse_device(f.device);  // fails early and clearly without a GPU
  if (f.threads > 0) set_num_threads(f.threads);
  std::cerr << "fashion_mnist: loading " << f.data << "\n";
  auto train_ds = limit(io::load_fashion_mnist(f.data, true), f.limit_train);
  auto test_ds = limit(io::load_fashion_mnist(f.data, false), f.limit_test);
  // Normalise with Fashion-MNIST's mean/std (0.2860, 0.3530).
  auto normalize = [](const io::Example& e, Generator&) { return io::Example{(e.data - 0.2860) / 0.3530, e.target}; };
  io::DataLoader train(train_ds, {f.batch_size, true, f.seed, false, f.workers, 2}, normalize);
  io::DataLoader test(test_ds, {1000, false, 0, false, f.workers, 2}, normalize);

  manual_seed(f.seed);
  std::shared_ptr<nn::Sequential> model = f.model == "cnn" ? fashion_cnn() : fashion_mlp();
  model->to(dev);  // initialised on the CPU (same values on every device), then moved
  optim::SGD opt(model->parameters(), {f.lr, f.momentum, 0.0, f.weight_decay, false});
  optim::CosineAnnealingLR sched(opt, f.epochs);
  std::vector<EpochMetrics> history;
  int64_t start_epoch = 0, step = 0;

  if (!f.resume.empty()) {
    io::CheckpointContents ck = io::load_checkpoint(f.resume);
    io::check_model_state(ck.model, model->state_dict().items(), f.resume);
    nn::StateDict sd;
    for (auto& [k, v] : ck.model) sd.insert(k, v);
    model->load_state_dict(sd);
    opt.load_state_dict(ck.optimizer);
    sched.load_state_dict(ck.scheduler);
    set_rng_state(ck.rng);
    start_epoch = ck.epoch;
    step = ck.step;
    for (int64_t e = 1; e <= start_epoch; ++e) {
      auto it = ck.metadata.find("history." + std::to_string(e));
      if (it != ck.metadata.end()) history.push_back(decode_metrics(e, it->second));
    }
    std::cerr << "fashion_mnist: resumed from " << f.resume << " after epoch " << start_epoch << "\n";
  } else {
    std::remove(f.metrics.c_str());
  }
  std::cerr << "fashion_mnist: " << f.model << " with " << model->num_parameters() << " parameters, "
            << train_ds->size() << " training / " << test_ds->size() << " test images, " << get_num_threads()
            << " threads, device " << dev << (f.amp == "none" ? "" : ", autocast " + f.amp) << "\n";

  for (int64_t epoch = start_epoch; epoch < f.epochs; ++epoch) {
    train.set_epoch(epoch);
    model->train();
    ProgressBar bar("epoch " + std::to_string(epoch + 1) + "/" + std::to_string(f.epochs), train.num_batches(),
                    f.progress);
    auto t0 = std::chrono::steady_clock::now();
    double loss_sum = 0;
    int64_t correct = 0, seen = 0, b = 0;
    for (auto& batch : train) {
      Tensor x = move_to(batch.data, dev), target = move_to(batch.target, dev);
      Tensor logits, loss;
      {
        AmpScope autocast(f.amp, dev);
        logits = (*model)(x);  // (B, 10)
        loss = cross_entropy(logits, target);
      }
      opt.zero_grad();
      loss.backward();
      opt.step();
      ++step;
      int64_t n = batch.data.size(0);
      loss_sum += loss.item<double>() * static_cast<double>(n);
      correct += (argmax(logits.detach(), 1) == target).sum().item<int64_t>();
      seen += n;
      bar.update(++b, loss_sum / seen, static_cast<double>(correct) / seen, seen);
    }
    bar.finish();
    synchronize(dev);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    sched.step();
    auto [test_loss, test_acc] = evaluate(*model, test, dev, f.amp);
    EpochMetrics m{epoch + 1, loss_sum / seen, static_cast<double>(correct) / seen, test_loss, test_acc, seen / secs,
                   secs};
    history.push_back(m);
    std::printf("epoch %lld/%lld: train_loss=%.6f train_acc=%.4f test_loss=%.4f test_acc=%.4f (%.1fs, %.0f img/s)\n",
                static_cast<long long>(epoch + 1), static_cast<long long>(f.epochs), m.train_loss, m.train_accuracy,
                m.test_loss, m.test_accuracy, secs, m.images_per_second);
    std::fflush(stdout);
    append_metrics_jsonl(f.metrics, m);
    write_svg_plot(f.plot, history, "weft: Fashion-MNIST " + f.model);
    if (!f.save.empty()) {
      io::CheckpointContents ck;
      ck.model = to_map(model->state_dict());
      for (auto& [k, v] : opt.state_dict()) ck.optimizer[k] = v.to(kCPU).clone();
      ck.scheduler = sched.state_dict();
      ck.rng = get_rng_state();
      ck.step = step;
      ck.epoch = epoch + 1;
      for (const auto& h : history) ck.metadata["history." + std::to_string(h.epoch)] = encode_metrics(h);
      io::save_checkpoint(f.save, ck);
    }
    if (f.stop_after > 0 && epoch + 1 >= f.stop_after) {
      std::cerr << "fashion_mnist: stopping after epoch " << epoch + 1 << " (--stop-after-epoch)\n";
      return 0;
    }
  }
  std::cerr << "fashion_mnist: metrics in " << f.metrics << ", plot in " << f.plot << "\n";
  double final_acc = history.empty() ? 0.0 : history.back().test_accuracy;
  std::printf("test_accuracy=%.4f\n", final_acc);
  return 0;
}

}  // namespace
}  // namespace weft::examples

int main(int argc, char** argv) {
  return weft::examples::run_main("fashion_mnist", [&] {
    auto flags = weft::examples::parse(argc, argv);
    return flags ? weft::examples::run(*flags) : 0;
  });
}
