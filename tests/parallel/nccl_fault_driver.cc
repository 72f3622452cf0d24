// Driver for the NCCL desync tests (nccl_desync_test.sh), the NCCL twin of
// fault_driver.cc's op and count scenarios.
//
// Usage: nccl_fault_driver gpus              prints the number of visible GPUs
//        nccl_fault_driver MODE VICTIM STEP  under mpirun, one GPU per rank
//   op    : on the NCCL world group, rank VICTIM issues a broadcast instead of
//           the allreduce at STEP
//   count : rank VICTIM's allreduce at STEP has one element more
//   sub   : as op, on a sub-group of every rank in reverse order (group rank r
//           is world rank size-1-r), so the fingerprints travel on the
//           matching MPI sub-group
// Every rank runs 10 operations on 8 float32 elements. A rank that catches a
// weft::Error prints "rank R: error: <what>" to stderr and exits 1; a rank that
// finishes prints "rank R: done" and exits 0.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "core/ops.h"
#include "parallel/comm/mpi/context.h"
#include "parallel/comm/nccl/process_group_nccl.h"

int main(int argc, char** argv) {
  using namespace weft;
  using namespace weft::parallel;
  if (argc == 2 && std::string(argv[1]) == "gpus") {
    std::printf("%d\n", cuda_device_count());
    return 0;
  }
  if (argc != 4) {
    std::fprintf(stderr, "usage: nccl_fault_driver gpus | op|count|sub VICTIM STEP\n");
    return 2;
  }
  std::string mode = argv[1];
  int victim = std::atoi(argv[2]), step = std::atoi(argv[3]);
  int rank = -1;
  try {
    DistributedContext ctx;
    rank = ctx.rank();
    auto nccl = ProcessGroupNCCL::create(ctx.world_ptr());  // GPU local_rank() % visible GPUs
    std::shared_ptr<ProcessGroup> pg = nccl;
    if (mode == "sub") {
      std::vector<int> rev;
      for (int r = ctx.size() - 1; r >= 0; --r) rev.push_back(r);
      pg = nccl->new_group(rev);
    }
    for (int i = 0; i < 10; ++i) {
      bool me = rank == victim && i == step;
      Tensor t = full({me && mode == "count" ? 9 : 8}, 1.0).to(nccl->device());
      if (me && mode != "count") pg->broadcast(t, {0})->wait();
      else pg->allreduce(t)->wait();
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "rank %d: error: %s\n", rank, e.what());
    return 1;
  }
  std::fprintf(stderr, "rank %d: done\n", rank);
  return 0;
}
