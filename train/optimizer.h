// How a Trainer makes its optimizer: a factory over named parameters, called
// once the model is placed (for a pipeline, over this rank's stages only; with
// ZeRO, over the flat shards "shard0", ...), so state is keyed by parameter
// name and any layout saves and loads it.
//
// Contract:
// - OptimizerFactory(params, before_step): make the optimizer over `params`;
//   when `before_step` is set (gradient clipping under ZeRO-1, where the
//   shard optimizer holds the gradients), it must run at the start of every
//   step() before any update (parallel::hybrid::ClipBeforeStep does this).
// - make_optimizer<Opt>(options) is that factory for any weft optimizer
//   constructible as Opt(named_params, options); sgd(), adam(), adamw(),
//   rmsprop(), adagrad(), radam(), adamax() and adadelta() are its common forms:
//   train::sgd({.lr = 0.05, .momentum = 0.9}).
#pragma once

#include <functional>
#include <memory>

#include "optim/adadelta.h"
#include "optim/adagrad.h"
#include "optim/adam.h"
#include "optim/adamax.h"
#include "optim/optimizer.h"
#include "optim/radam.h"
#include "optim/rmsprop.h"
#include "optim/sgd.h"
#include "parallel/hybrid/clip_grad.h"

namespace weft::train {

using BeforeStep = std::function<void(optim::Optimizer&)>;
using OptimizerFactory =
    std::function<std::unique_ptr<optim::Optimizer>(const optim::NamedParameters& params, const BeforeStep& before)>;

template <class Opt, class Options>
OptimizerFactory make_optimizer(Options options) {
  return [options](const optim::NamedParameters& p, const BeforeStep& before) -> std::unique_ptr<optim::Optimizer> {
    if (before) return std::make_unique<parallel::hybrid::ClipBeforeStep<Opt>>(before, p, options);
    return std::make_unique<Opt>(p, options);
  };
}

inline OptimizerFactory sgd(const optim::SGDOptions& o) { return make_optimizer<optim::SGD>(o); }
inline OptimizerFactory adam(const optim::AdamOptions& o) { return make_optimizer<optim::Adam>(o); }
inline OptimizerFactory adamw(const optim::AdamWOptions& o) { return make_optimizer<optim::AdamW>(o); }
inline OptimizerFactory rmsprop(const optim::RMSpropOptions& o) { return make_optimizer<optim::RMSprop>(o); }
inline OptimizerFactory adagrad(const optim::AdagradOptions& o) { return make_optimizer<optim::Adagrad>(o); }
inline OptimizerFactory radam(const optim::RAdamOptions& o) { return make_optimizer<optim::RAdam>(o); }
inline OptimizerFactory adamax(const optim::AdamaxOptions& o) { return make_optimizer<optim::Adamax>(o); }
inline OptimizerFactory adadelta(const optim::AdadeltaOptions& o) { return make_optimizer<optim::Adadelta>(o); }

}  // namespace weft::train
