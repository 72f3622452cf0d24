// DistributedModel over MPI, one process per rank (mpirun -np 2 and 4): the
// grids that tile the world (np 2: 1x2 and 2x1; np 4: 2x2, 4x1 and 1x4) train
// SGD and AdamW steps equal to one process on the global batches
// (dm_cases.h), with zb-h1 and zbv (even, and measured with ZeRO-1) on 2 x
// dp and backward_passes_per_step 2, and with ZeRO-1 (AdamW) on every grid;
// the gathered model and optimizer states
// equal the reference's on every rank.
#include <gtest/gtest.h>

#include "parallel/comm/mpi/process_group_mpi.h"
#include "tests/parallel/hybrid/dm_cases.h"

namespace weft::parallel::hybrid {
namespace {

using namespace testcases;  // NOLINT

void check(const Case& c) {
  SCOPED_TRACE(describe(c));
  auto world = init_process_group();
  const Reference ref = reference(c, 4);
  compare(ref, train_rank(c, ref, rank_model(c, world->rank()), world), world->rank());
}

TEST(DistributedModelMPI, EveryGridEqualsOneProcess) {
  const int n = init_process_group()->size();
  for (int pp = 1; pp <= n; ++pp) {
    if (n % pp) continue;
    check({pp, n / pp});
    check({pp, n / pp, Opt::kAdamW});
  }
}

TEST(DistributedModelMPI, ZeroBubbleAndAccumulation) {
  const int n = init_process_group()->size();
  Case zb{2, n / 2};
  zb.schedule = pipe::ScheduleKind::kZeroBubbleH1;
  check(zb);
  Case acc{2, n / 2};
  acc.passes = 2;
  check(acc);
  // zbv: two stages per rank in a V (rank 0 holds the first and the last), with and without ZeRO-1.
  Case v{2, n / 2};
  v.schedule = pipe::ScheduleKind::kZeroBubbleV;
  v.virtual_stages = 2;
  check(v);
  v.zero = true;
  v.measured = true;
  check(v);
}

TEST(DistributedModelMPI, ZeroOneOnEveryGrid) {
  const int n = init_process_group()->size();
  for (int pp = 1; pp <= n; ++pp) {
    if (n % pp) continue;
    Case c{pp, n / pp, Opt::kAdamW};
    c.zero = true;
    check(c);
  }
}

}  // namespace
}  // namespace weft::parallel::hybrid
