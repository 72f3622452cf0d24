// Activation checkpointing: run a segment without keeping its activations, and
// recompute it during backward.
//
// Contract:
// - checkpoint(fn, inputs) runs fn(inputs) under NoGradGuard (no graph, so no
//   activations are kept) and returns its outputs. It saves the inputs
//   (version-checked aliases, Note [saved tensors]) and the default generator's
//   RNG state (core/rng.h) taken just before fn ran.
// - When grad mode is on, the outputs get one node. Its backward restores the
//   saved RNG state (so dropout draws the same masks), recomputes fn with grad
//   enabled on detached copies of the inputs, restores the RNG state it found,
//   and runs a (nested) backward through the recomputed graph with the incoming
//   gradients. Leaves that fn captures (parameters in closures) thus accumulate
//   .grad as they would without checkpointing; the inputs' gradients flow on
//   through the node's edges. Inside autograd::grad no .grad is touched, as
//   without checkpointing; grad() with respect to a parameter that only fn
//   uses finds no path to it (pass it as an input).
// - The node is recorded even if no input requires grad, so parameters inside fn
//   still get gradients (the outputs then report requires_grad; if nothing in
//   fn needs grad, backward recomputes and does nothing).
// - The recomputed graph is backpropagated by a nested backward, so a leaf used
//   both inside and outside one checkpointed segment accumulates (and runs its
//   post-accumulate hooks) once per graph it appears in; end-of-backward
//   callbacks still run once, after the outermost backward.
// - fn must be deterministic given its inputs and the RNG state; backward
//   through the same checkpoint twice needs retain_graph on the first backward.
// - Under create_graph (Note [double backward] in core/autograd_meta.h) the
//   recomputation sees the inputs with their history and is differentiated
//   with grad(create_graph), so the gradients differentiate again, as without
//   checkpointing; captured parameters then get a .grad with history, through
//   their own accumulators and hooks.
#pragma once

#include <functional>
#include <vector>

#include "core/tensor.h"

namespace weft::autograd {

using CheckpointFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
using CheckpointFn1 = std::function<Tensor(const std::vector<Tensor>&)>;

std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs,
                               bool preserve_rng_state = true);
// One-output convenience form.
Tensor checkpoint(const CheckpointFn1& fn, const std::vector<Tensor>& inputs, bool preserve_rng_state = true);

}  // namespace weft::autograd
