// Ranks that oversubscribe their host's cores: whether they do, and how fast a
// pipeline's ranks compute when several compute at once (the speeds of Note
// [processor sharing] in parallel/pipe/simulate.h, which the plan's simulated
// step uses).
//
// Contract:
// - RankCores is one rank's view: its host name, its process id, the CPUs
//   its affinity mask allows, and the threads its process computes with
//   (core's get_num_threads()).
// - shared_cores(ranks, pipeline_ranks) is pure. Per host, the pool is the
//   union of its ranks' CPUs and the demand the sum of the threads of its
//   distinct processes (the ranks of an in-process group are threads of one
//   process and share its thread pool: they count once). A host whose demand
//   exceeds its pool runs each thread at pool / demand of a core while all
//   compute; a pipeline of `pipeline_ranks` ranks (data-parallel replicas
//   mirror it, computing at the same moments) then has pipeline_ranks x pool
//   / demand ranks' worth of cores. The result is that figure on the most
//   oversubscribed host, or 0 when no host is oversubscribed (nothing is
//   shared). With several hosts this is an approximation: the slowest host
//   sets it.
// - measure_compute_speeds(world, pipeline_rank, pipeline_ranks, workload,
//   repeats) is collective over `world`, every rank passing its place in its
//   pipeline and the same workload (one run of it, returning its seconds).
//   The workload runs first on world rank 0 alone (the condition of
//   profile_on_root's profile: the other ranks wait in a collective), then,
//   for k = 1 .. pipeline_ranks, on every rank whose pipeline_rank < k at
//   once (k ranks of every replica compute while the rest wait, as in a
//   pipeline's fill); each phase `repeats` times after a barrier, each rank
//   keeping its median. speed[k-1] = the time alone / the mean over the
//   computing ranks. Every rank returns the same vector.
// - model_workload(model, sample, group, root): the workload of the model
//   itself, what the pipeline computes: one forward and backward of every
//   child on root's sample micro-batch, through profile_layers (its side
//   effects undone: gradients, RNG). Collective: root's sample (any dtype) is
//   broadcast so every rank runs the same batch.
// - plan_compute_speeds(world, pipeline_rank, pipeline_ranks, workload) is
//   collective: measure_compute_speeds (3 repeats) when shared_cores of every
//   rank's RankCores (allgathered) is positive, else an empty vector (every
//   rank at full speed), on every rank alike. `workload` is made only then.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "nn/container.h"
#include "parallel/comm/process_group.h"

namespace weft::parallel::partition {

struct RankCores {
  std::string host;
  long pid = 0;
  std::vector<int> cpus;  // the CPU numbers its affinity mask allows
  int threads = 1;
};

// This process's RankCores.
RankCores local_rank_cores();

double shared_cores(const std::vector<RankCores>& ranks, int pipeline_ranks);

using Workload = std::function<double()>;  // runs once, returns its seconds

std::vector<double> measure_compute_speeds(ProcessGroup& world, int pipeline_rank, int pipeline_ranks,
                                           const Workload& workload, int repeats = 3);

Workload model_workload(nn::Sequential& model, const Tensor& sample, ProcessGroup& group, int root);

std::vector<double> plan_compute_speeds(ProcessGroup& world, int pipeline_rank, int pipeline_ranks,
                                        const std::function<Workload()>& make_workload);

}  // namespace weft::parallel::partition
