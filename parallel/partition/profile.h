// Profiling a Sequential's children on a sample micro-batch (smp's trace with
// trace_execution_times and trace_memory_usage, fairscale's profile_times and
// profile_sizes), and sharing the result so every rank partitions alike.
//
// Contract:
// - profile_layers runs the children one after another on `sample` (one
//   micro-batch), in the model's current train/eval mode. Child k gets child
//   k-1's output detached, requiring grad when floating (child 0 gets the
//   sample detached, requiring grad only if the sample does: the first stage
//   computes no input gradient); those inputs are kept, so every child is
//   profiled on the same input. One iteration of a child is its forward
//   (timed) then the backward of a gradient of ones through every output that
//   requires grad (timed). `warmup` untimed then `repeats` timed rounds run
//   one iteration of every child each, in order (Note [profile rounds] in
//   profile.cc); forward_s and backward_s are the medians. On a non-CPU device
//   each timing waits for the device (one element of the result copied to the
//   host).
// - Bytes: num_parameters / param_bytes over the child's parameters;
//   grad_bytes over those that require grad; optimizer_state_bytes =
//   optimizer_state_factor x grad_bytes (0 for SGD, 1 with momentum, 2 for
//   Adam/AdamW); buffer_bytes over its buffers; output_bytes over its outputs.
//   activation_bytes is an estimate, not a measurement (core's allocators keep
//   no live-byte statistics): the child's input bytes plus its output bytes,
//   which is what a layer that saves its input (linear, conv) and whose
//   consumer saves its output keeps; exact for a pipeline stage that
//   checkpoints (it stashes only its input), low for layers with large
//   internal activations (attention scores, an MLP's hidden layer). A
//   parameter shared by two children is counted in both.
// - Side effects: none visible. Parameter gradients are set aside and restored
//   (profiling accumulates into fresh ones, then drops them), the default RNG
//   state is restored (dropout draws do not shift training's), the model's
//   mode is untouched.
// - broadcast_profile makes every rank of `group` hold root's profile (names,
//   types, times, bytes) over the group's collectives (CPU tensors: the MPI or
//   in-process group); other ranks' inputs are ignored (they may be empty).
//   profile_on_root measures on `root` only and broadcasts (should root's
//   profiling throw, the others fail at the broadcast's timeout). Profile
//   before attaching a reducer or DDP: the profile's backwards run the
//   parameters' hooks.
#pragma once

#include <memory>
#include <vector>

#include "core/tensor.h"
#include "nn/container.h"
#include "parallel/comm/process_group.h"
#include "parallel/partition/layer_profile.h"

namespace weft::parallel::partition {

struct ProfileOptions {
  int warmup = 1;
  int repeats = 5;
  double optimizer_state_factor = 0;  // optimizer-state bytes per trainable parameter byte
};

std::vector<LayerProfile> profile_layers(nn::Sequential& model, const nn::Tensors& sample,
                                         const ProfileOptions& options = {});
std::vector<LayerProfile> profile_layers(nn::Sequential& model, const Tensor& sample,
                                         const ProfileOptions& options = {});

std::vector<LayerProfile> broadcast_profile(const std::vector<LayerProfile>& profile, ProcessGroup& group,
                                            int root = 0);
std::vector<LayerProfile> profile_on_root(nn::Sequential& model, const nn::Tensors& sample, ProcessGroup& group,
                                          int root = 0, const ProfileOptions& options = {});

}  // namespace weft::parallel::partition
