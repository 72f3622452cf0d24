// DistributedContext and rank0_first: the RAII entry point of weft's parallel
// package (fastai's distrib_ctx, in C++).
//
// Contract:
// - DistributedContext initialises MPI (MPI_Init_thread, asking for
//   MPI_THREAD_MULTIPLE) if nobody did, creates the world process group if none
//   exists, and on destruction tears down only what it created: the world
//   group it made, then MPI_Finalize if it initialised MPI. It skips
//   MPI_Finalize when it is destroyed by an exception in flight or after a
//   collective failed (a dead peer would make MPI_Finalize hang); the process
//   is expected to exit non-zero then.
// - Contexts nest: an inner context finds MPI and the world group present and
//   owns nothing.
// - rank0_first(pg, fn): rank 0 runs fn, then (after a barrier) every other
//   rank runs it; a final barrier keeps ranks together. For work that must
//   happen once first, e.g. downloading or unpacking a data set.
#pragma once

#include <functional>
#include <memory>

#include "parallel/comm/process_group.h"

namespace weft::parallel {

class DistributedContext {
 public:
  DistributedContext();
  ~DistributedContext();
  DistributedContext(const DistributedContext&) = delete;
  DistributedContext& operator=(const DistributedContext&) = delete;

  ProcessGroup& world() const { return *world_; }
  const std::shared_ptr<ProcessGroup>& world_ptr() const { return world_; }
  int rank() const { return world_->rank(); }
  int size() const { return world_->size(); }
  int local_rank() const;
  bool owns_mpi() const { return owns_mpi_; }
  bool owns_world() const { return owns_world_; }

 private:
  std::shared_ptr<ProcessGroup> world_;
  bool owns_mpi_ = false;
  bool owns_world_ = false;
};

void rank0_first(ProcessGroup& pg, const std::function<void()>& fn);

}  // namespace weft::parallel
