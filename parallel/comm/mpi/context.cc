// DistributedContext and rank0_first. Contract in context.h.
#include "parallel/comm/mpi/context.h"

#include <mpi.h>

#include <exception>

#include "parallel/comm/mpi/process_group_mpi.h"

namespace weft::parallel {

DistributedContext::DistributedContext() {
  int inited = 0;
  MPI_Initialized(&inited);
  owns_mpi_ = !inited;
  owns_world_ = !is_initialized();
  world_ = init_process_group();  // initialises MPI when owns_mpi_
}

DistributedContext::~DistributedContext() {
  bool abandoning = std::uncaught_exceptions() > 0 || had_collective_failure();
  world_.reset();
  if (owns_world_) destroy_process_group();
  if (!owns_mpi_ || abandoning) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

int DistributedContext::local_rank() const { return weft::parallel::local_rank(); }

void rank0_first(ProcessGroup& pg, const std::function<void()>& fn) {
  if (pg.rank() == 0) fn();
  pg.barrier()->wait();
  if (pg.rank() != 0) fn();
  pg.barrier()->wait();
}

}  // namespace weft::parallel
