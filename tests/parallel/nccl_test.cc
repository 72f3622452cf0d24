// ProcessGroupNCCL on this process's GPU, one rank (bootstrapped through a
// one-rank in-process group standing in for MPI): every collective against values
// computed here for every dtype and reduce op, ordering after the compute
// stream, the timeout that aborts the communicator, sub-groups, argument
// errors. Tagged "gpu": every test skips (GTEST_SKIP) when cudaGetDeviceCount
// reports no GPU, except the one checking that creating a group then fails.
// CUDA tensors come from core/cuda (.to(kGPU) and back).
#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/cuda/runtime.h"
#include "core/cuda/stream.h"
#include "core/ops.h"
#include "parallel/comm/collectives.h"
#include "parallel/comm/device_group.h"
#include "parallel/comm/inproc/process_group_inproc.h"
#include "parallel/comm/nccl/process_group_nccl.h"
#include "tests/cuda/gpu_testing.h"
#include "tests/testing.h"

namespace weft::parallel {
namespace {

const Device kGPU{DeviceType::CUDA, 0};

const std::vector<DType> kAllDTypes = {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16,
                                       DType::Int64,   DType::Int32,   DType::UInt8,    DType::Bool};
const std::vector<ReduceOp> kOps = {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max, ReduceOp::Min};
constexpr int64_t kN = 37;

std::shared_ptr<ProcessGroup> bootstrap() { return ProcessGroupInProc::create_world(1)[0]; }

std::shared_ptr<ProcessGroupNCCL> group() { return ProcessGroupNCCL::create(bootstrap()); }

// A copy of host tensor `h` on the GPU `device` (core/cuda copies).
Tensor to_gpu(const Tensor& h, int device) { return h.to(Device(DeviceType::CUDA, device)); }

// Back to the host (the device-to-host copy synchronises its stream).
Tensor to_host(const Tensor& d) { return d.to(kCPU); }

// As in collectives_test.cc: small integers exact in every dtype, varying with rank.
double value(DType d, int r, int64_t i) {
  if (d == DType::Bool) return ((i + r) % 3 == 0) ? 1 : 0;
  double v = double((i * 7 + r * 5) % 11);
  if (d != DType::UInt8 && !is_floating(d)) v -= 4;
  if (is_floating(d)) v = v - 5 + 0.5 * (r % 2);
  return v;
}

Tensor make(DType d, int r, int64_t n = kN, int64_t offset = 0) {
  std::vector<double> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = value(d, r, i + offset);
  return tensor<double>(v, {n}).to(d);
}

std::vector<double> read(const Tensor& host) {
  Tensor d = host.to(DType::Float64).contiguous();
  const double* p = d.data_ptr<double>();
  return std::vector<double>(p, p + d.numel());
}

double reduce_ref(DType d, ReduceOp op, int size, int64_t i) {
  double acc = value(d, 0, i);
  for (int r = 1; r < size; ++r) {
    double x = value(d, r, i);
    if (op == ReduceOp::Sum || op == ReduceOp::Avg) acc += x;
    else if (op == ReduceOp::Max) acc = std::max(acc, x);
    else acc = std::min(acc, x);
  }
  if (d == DType::Bool) {
    if (op == ReduceOp::Min) {
      bool all = true;
      for (int r = 0; r < size; ++r) all = all && value(d, r, i) != 0;
      return all;
    }
    return acc != 0;
  }
  if (op == ReduceOp::Avg) acc /= size;
  return acc;
}

bool valid(DType d, ReduceOp op) { return op != ReduceOp::Avg || is_floating(d); }

TEST(NCCL, CreateWithoutGpuIsAClearError) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a GPU is visible";
  // the driver's own reason, not a bare "none"
  EXPECT_WEFT_ERROR(group(), "ProcessGroupNCCL: no CUDA device is visible (" + weft::cuda::unavailable_reason() + ")");
  EXPECT_FALSE(weft::cuda::unavailable_reason().empty());
  EXPECT_TRUE(nccl_backend_built());
  EXPECT_EQ(visible_cuda_devices(), 0);
  EXPECT_WEFT_ERROR(local_device(DeviceType::CUDA), "no CUDA device is visible");
  auto boot = bootstrap();
  EXPECT_EQ(new_device_group(boot, kCPU), boot);  // CPU tensors keep the bootstrap (MPI) group
  EXPECT_WEFT_ERROR(new_device_group(boot, Device(DeviceType::CUDA, 0)), "no CUDA device is visible");
}

TEST(NCCL, GroupBasics) {
  WEFT_REQUIRE_GPU();
  auto pg = group();
  EXPECT_EQ(pg->rank(), 0);
  EXPECT_EQ(pg->size(), 1);
  EXPECT_EQ(pg->backend_name(), "nccl");
  EXPECT_EQ(pg->name(), "nccl:group[0]");
  EXPECT_EQ(pg->device(), Device(DeviceType::CUDA, 0));
  EXPECT_EQ(pg->sequence_number(), 0);
  EXPECT_FALSE(pg->aborted());
  EXPECT_NE(pg->communication_stream(), nullptr);
}

TEST(NCCL, AllreduceEveryDTypeAndOp) {
  WEFT_REQUIRE_GPU();
  auto pg = group();
  int64_t seq = 0;
  for (DType d : kAllDTypes)
    for (ReduceOp op : kOps) {
      if (!valid(d, op)) continue;
      Tensor t = to_gpu(make(d, pg->rank()), 0);
      WorkPtr w = pg->allreduce(t, {op});
      w->wait();
      EXPECT_TRUE(w->is_completed());
      EXPECT_EQ(pg->sequence_number(), ++seq);
      auto got = read(to_host(t));
      for (int64_t i = 0; i < kN; ++i)
        ASSERT_DOUBLE_EQ(got[i], reduce_ref(d, op, pg->size(), i)) << d << " op " << int(op) << " index " << i;
    }
}

TEST(NCCL, BroadcastAllgatherReduceScatterEveryDType) {
  WEFT_REQUIRE_GPU();
  auto pg = group();
  const int n = pg->size(), me = pg->rank();
  for (DType d : kAllDTypes) {
    Tensor b = to_gpu(make(d, me), 0);
    pg->broadcast(b, {0})->wait();
    auto got = read(to_host(b));
    for (int64_t i = 0; i < kN; ++i) ASSERT_DOUBLE_EQ(got[i], value(d, 0, i)) << "broadcast " << d;

    Tensor in = to_gpu(make(d, me), 0);
    std::vector<Tensor> outs;
    for (int r = 0; r < n; ++r) outs.push_back(to_gpu(zeros({kN}, {d}), 0));
    pg->allgather(outs, in)->wait();
    for (int r = 0; r < n; ++r) {
      auto g = read(to_host(outs[r]));
      for (int64_t i = 0; i < kN; ++i) ASSERT_DOUBLE_EQ(g[i], value(d, r, i)) << "allgather " << d;
    }

    for (ReduceOp op : kOps) {
      if (!valid(d, op)) continue;
      std::vector<Tensor> ins;
      for (int j = 0; j < n; ++j) ins.push_back(to_gpu(make(d, me, kN, j * kN), 0));
      Tensor out = to_gpu(zeros({kN}, {d}), 0);
      pg->reduce_scatter(out, ins, {op})->wait();
      auto g = read(to_host(out));
      for (int64_t i = 0; i < kN; ++i)
        ASSERT_DOUBLE_EQ(g[i], reduce_ref(d, op, n, me * kN + i)) << "reduce_scatter " << d << " op " << int(op);
    }
  }
  pg->barrier()->wait();
  Tensor empty_t = to_gpu(zeros({0}), 0);
  pg->allreduce(empty_t)->wait();
}

// Blocks the compute stream on the host until released (or 5 s pass); `left` is
// set just before it lets the stream go on.
struct StreamGate {
  std::atomic<bool> open{false}, left{false};
  static void CUDART_CB hold(void* self) {
    auto* g = static_cast<StreamGate*>(self);
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!g->open.load() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    g->left = true;
  }
  void close_on_compute_stream() {
    ASSERT_EQ(cudaLaunchHostFunc(weft::cuda::current_stream(0), &StreamGate::hold, this), cudaSuccess);
  }
};

// Ordering by values and by the gate's state, not by how fast the GPU is: the
// allgather reads a tensor that the compute stream writes behind the closed
// gate, so it must copy the new value, and it cannot have completed while the
// gate still holds that write back.
TEST(NCCL, CollectiveRunsAfterTheComputeStreamsWork) {
  WEFT_REQUIRE_GPU();
  auto pg = group();
  Tensor t = to_gpu(full({4}, 1.0), 0);
  std::vector<Tensor> outs{to_gpu(zeros({4}), 0)};
  // The same fill kernel and allgather once before the gate, so nothing below
  // loads a kernel (lazy module loading may synchronise the device, which would
  // wait for the gate) or allocates.
  t.fill_(Scalar(1.0));
  pg->allgather(outs, t)->wait();
  for (double v : read(to_host(outs[0]))) ASSERT_DOUBLE_EQ(v, 1.0);
  StreamGate gate;
  gate.close_on_compute_stream();
  t.fill_(Scalar(2.0));  // queued on the compute stream behind the gate
  WorkPtr w = pg->allgather(outs, t);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // time for a collective that did not wait to finish
  const bool completed = w->is_completed();
  const bool gate_held = !gate.left.load();
  ASSERT_TRUE(gate_held) << "the host waited for the gate while queuing the work: the check below would prove nothing";
  EXPECT_FALSE(completed) << "the allgather completed while the compute stream's write was still held back";
  gate.open = true;
  w->wait();
  for (double v : read(to_host(outs[0]))) EXPECT_DOUBLE_EQ(v, 2.0) << "the allgather read t before fill_(2)";
}

TEST(NCCL, ShortWaitTimesOutWithoutAborting) {
  WEFT_REQUIRE_GPU();
  auto pg = group();
  Tensor t = to_gpu(full({4}, 2.0), 0);
  StreamGate gate;
  gate.close_on_compute_stream();
  int64_t seq = pg->sequence_number();
  WorkPtr w = pg->allreduce(t);
  EXPECT_WEFT_ERROR(w->wait(std::chrono::milliseconds(100)),
                    "allreduce(float32, 4 elements, sum) (sequence " + std::to_string(seq) +
                        ") on nccl:group[0] timed out after 0.1 s: missing ranks: unknown");
  EXPECT_FALSE(pg->aborted());
  gate.open = true;
  w->wait();  // the same Work completes
  for (double v : read(to_host(t))) EXPECT_DOUBLE_EQ(v, 2.0);
}

TEST(NCCL, TimeoutAbortsTheCommunicator) {
  WEFT_REQUIRE_GPU();
  auto pg = group();
  Tensor t = to_gpu(full({4}, 1.0), 0);
  StreamGate gate;
  gate.close_on_compute_stream();
  AllreduceOptions o;
  o.timeout = std::chrono::milliseconds(300);
  int64_t seq = pg->sequence_number();
  WorkPtr w = pg->allreduce(t, o);
  std::thread opener([&] {  // ncclCommAbort may wait for the queued kernel
    std::this_thread::sleep_for(std::chrono::milliseconds(800));
    gate.open = true;
  });
  EXPECT_WEFT_ERROR(w->wait(), "allreduce(float32, 4 elements, sum) (sequence " + std::to_string(seq) +
                                   ") on nccl:group[0] timed out after 0.3 s: missing ranks: unknown");
  EXPECT_TRUE(pg->aborted());
  EXPECT_WEFT_ERROR(pg->allreduce(t), "the NCCL communicator was aborted earlier");
  opener.join();
  (void)cudaDeviceSynchronize();
  (void)cudaGetLastError();
}

TEST(NCCL, SubGroup) {
  WEFT_REQUIRE_GPU();
  auto pg = group();
  auto sub = pg->new_group({0});
  ASSERT_NE(sub, nullptr);
  EXPECT_EQ(sub->size(), 1);
  EXPECT_EQ(pg->sequence_number(), 1);
  Tensor t = to_gpu(full({3}, 5.0), 0);
  sub->allreduce(t, {ReduceOp::Max})->wait();
  for (double v : read(to_host(t))) EXPECT_DOUBLE_EQ(v, 5.0);
}

// The helpers that exchange host data (strings, tensor headers) stage it on
// the group's GPU: they worked only over CPU backends before.
TEST(NCCL, HostDataHelpersStageOnTheGpu) {
  WEFT_REQUIRE_GPU();
  auto pg = group();
  const std::string text("host\0name", 9);
  EXPECT_EQ(allgather_bytes(*pg, text), std::vector<std::string>{text});
  EXPECT_EQ(allgather_bytes(*pg, ""), std::vector<std::string>{""});
  const std::vector<Tensor> all = allgather_host(*pg, make(DType::Int64, 0));
  ASSERT_EQ(all.size(), 1u);
  EXPECT_EQ(all[0].device(), kCPU);
  EXPECT_EQ(read(all[0]), read(make(DType::Int64, 0)));
  const Tensor b = broadcast_tensor(*pg, make(DType::Float32, 0).reshape({1, kN}), 0, "test");
  EXPECT_EQ(b.device(), kGPU);
  EXPECT_EQ(b.sizes(), (Shape{1, kN}));
  EXPECT_EQ(read(to_host(b)), read(make(DType::Float32, 0)));
  const Tensor r = allreduce_host(*pg, make(DType::Float64, 0), ReduceOp::Max);
  EXPECT_EQ(r.device(), kCPU);
  EXPECT_EQ(read(r), read(make(DType::Float64, 0)));
  agree(*pg, "test", "");
  EXPECT_WEFT_ERROR(agree(*pg, "the step", "disk full"), "the step failed: rank 0: disk full");
}

TEST(NCCL, ArgumentErrors) {
  WEFT_REQUIRE_GPU();
  auto pg = group();
  Tensor cpu = zeros({3});
  EXPECT_WEFT_ERROR(pg->allreduce(cpu), "the NCCL backend takes CUDA tensors, got a tensor on cpu");
  Tensor ints = to_gpu(zeros({3}, {DType::Int64}), 0);
  EXPECT_WEFT_ERROR(pg->allreduce(ints, {ReduceOp::Avg}), "avg needs a floating dtype");
  Tensor f = to_gpu(zeros({3}), 0);
  EXPECT_WEFT_ERROR(pg->send(f, 0), "is this rank");
  EXPECT_WEFT_ERROR(pg->broadcast(f, {1}), "root 1 is not a rank");
  std::vector<Tensor> two = {f, f};
  EXPECT_WEFT_ERROR(pg->allgather(two, f), "expected 1 output tensors");
  EXPECT_EQ(pg->sequence_number(), 0);  // nothing was issued
}

}  // namespace
}  // namespace weft::parallel
