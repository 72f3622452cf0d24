// Driver for the fault and desync tests (fault_test.sh, desync_test.sh).
//
// Usage: fault_driver MODE VICTIM STEP
//   kill   : rank VICTIM SIGKILLs itself before collective STEP
//   exit   : rank VICTIM exits (status 0, without MPI_Finalize) before STEP
//   op     : rank VICTIM issues a broadcast instead of the allreduce at STEP
//   count  : rank VICTIM's allreduce at STEP has one element more
// Every rank runs 10 allreduces of 8 float32 elements. A rank that catches a
// weft::Error prints "rank R: error: <what>" to stderr and exits 1; a rank that
// finishes prints "rank R: done" and exits 0.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/ops.h"
#include "parallel/comm/mpi/context.h"

int main(int argc, char** argv) {
  using namespace weft;
  using namespace weft::parallel;
  if (argc != 4) {
    std::fprintf(stderr, "usage: fault_driver kill|exit|op|count VICTIM STEP\n");
    return 2;
  }
  std::string mode = argv[1];
  int victim = std::atoi(argv[2]), step = std::atoi(argv[3]);
  int rank = -1;
  try {
    DistributedContext ctx;
    rank = ctx.rank();
    ProcessGroup& pg = ctx.world();
    for (int i = 0; i < 10; ++i) {
      bool me = rank == victim && i == step;
      if (me && mode == "kill") raise(SIGKILL);
      if (me && mode == "exit") std::_Exit(0);
      Tensor t = full({me && mode == "count" ? 9 : 8}, 1.0);
      if (me && mode == "op") pg.broadcast(t, {0})->wait();
      else pg.allreduce(t)->wait();
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "rank %d: error: %s\n", rank, e.what());
    return 1;
  }
  std::fprintf(stderr, "rank %d: done\n", rank);
  return 0;
}
