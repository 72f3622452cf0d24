// Batched point-to-point on ProcessGroupNCCL (Note [nccl batched p2p]) under
// mpirun, one GPU per rank: two ranks exchanging both ways at once, a ring in
// both directions, and in debug mode tags and message counts that differ named
// on both ranks before anything reaches NCCL. Tagged "gpu": every test skips
// when fewer GPUs than ranks are visible (all ranks skip alike).
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/ops.h"
#include "parallel/comm/mpi/process_group_mpi.h"
#include "parallel/comm/nccl/process_group_nccl.h"
#include "tests/testing.h"

namespace weft::parallel {
namespace {

#define SKIP_WITHOUT_GPUS()                                                                                            \
  if (cuda_device_count() < init_process_group()->size())                                                              \
  GTEST_SKIP() << "needs one GPU per rank: " << cuda_device_count() << " visible for " << init_process_group()->size() \
               << " ranks"

std::shared_ptr<ProcessGroupNCCL> nccl() {
  static std::shared_ptr<ProcessGroupNCCL> g = ProcessGroupNCCL::create(init_process_group());
  return g;
}

double value(int src, int dst, int k, int64_t i) { return double((i * 3 + src * 7 + dst * 5 + k * 11) % 17); }

Tensor message(int src, int dst, int k, int64_t n, Device d) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = value(src, dst, k, i);
  return tensor<double>(v, {n}).to(DType::Float32).to(d);
}

void expect_message(const Tensor& got, int src, int dst, int k) {
  Tensor h = got.to(kCPU).to(DType::Float64).contiguous();
  const double* p = h.data_ptr<double>();
  for (int64_t i = 0; i < h.numel(); ++i) ASSERT_EQ(p[i], value(src, dst, k, i)) << "from " << src << " at " << i;
}

TEST(NcclBatchP2P, TwoRanksExchangeBothWaysAtOnce) {
  SKIP_WITHOUT_GPUS();
  auto g = nccl();
  const int me = g->rank(), other = me ^ 1;
  if (other >= g->size()) return;
  const int64_t n = int64_t(1) << 22;  // 16 MiB each way
  Tensor out = message(me, other, 0, n, g->device()), in = zeros({n}, {g->device()});
  g->batch_isend_irecv({P2POp::send(out, other), P2POp::recv(in, other)})->wait();
  expect_message(in, other, me, 0);
}

TEST(NcclBatchP2P, RingBothDirections) {
  SKIP_WITHOUT_GPUS();
  auto g = nccl();
  const int n = g->size(), me = g->rank(), next = (me + 1) % n, prev = (me + n - 1) % n;
  Tensor from_prev = zeros({41}, {g->device()}), from_next = zeros({43}, {g->device()});
  // NCCL matches one direction in issue order: with 2 ranks (next == prev)
  // the 41-element message goes first both ways.
  g->batch_isend_irecv({P2POp::send(message(me, next, 1, 41, g->device()), next, 1), P2POp::recv(from_prev, prev, 1),
                        P2POp::send(message(me, prev, 2, 43, g->device()), prev, 2), P2POp::recv(from_next, next, 2)})
      ->wait();
  expect_message(from_prev, prev, me, 1);
  expect_message(from_next, next, me, 2);
  EXPECT_TRUE(g->batch_isend_irecv({})->is_completed());
}

TEST(NcclBatchP2P, DebugModeNamesTagAndCountMismatches) {
  SKIP_WITHOUT_GPUS();
  auto world = init_process_group();
  setenv("WEFT_DEBUG_COLLECTIVES", "1", 1);
  auto g = ProcessGroupNCCL::create(world);  // reads the variable
  unsetenv("WEFT_DEBUG_COLLECTIVES");
  const int me = g->rank(), other = me ^ 1;
  if (other < g->size()) {
    const int lo = std::min(me, other), hi = std::max(me, other);
    const std::string los = std::to_string(lo), his = std::to_string(hi);
    Tensor t = zeros({4}, {g->device()});
    // The lower rank sends with tag 1, the higher receives with tag 2.
    std::vector<P2POp> ops = {me == lo ? P2POp::send(t, other, 1) : P2POp::recv(t, other, 2)};
    EXPECT_WEFT_ERROR(g->batch_isend_irecv(ops),
                      "send/recv desync on nccl:world (first divergence: reduce op / root / rank list): ranks [" + los +
                          "] issue send/recv(float32, 4 elements, rank " + los + " -> rank " + his +
                          ", tag 1); ranks [" + his + "] issue send/recv(float32, 4 elements, rank " + los +
                          " -> rank " + his + ", tag 2)");
    // Two messages up from the lower rank, one expected by the higher.
    if (me == lo) ops = {P2POp::send(t, other), P2POp::send(t, other)};
    else ops = {P2POp::recv(t, other)};
    EXPECT_WEFT_ERROR(g->batch_isend_irecv(ops), "batch_isend_irecv(rank " + los + " -> rank " + his +
                                                     ": 2 messages, rank " + his + " -> rank " + los + ": 0 messages)");
    EXPECT_FALSE(g->aborted());  // caught before NCCL saw anything
  }
  world->barrier()->wait();
}

}  // namespace
}  // namespace weft::parallel
