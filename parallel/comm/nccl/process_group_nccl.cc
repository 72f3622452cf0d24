// ProcessGroupNCCL: NCCL collectives on a per-group communication stream, with
// deadlines, aborts and error messages naming collective, sequence number and
// (from the MPI heartbeats) missing ranks. Contract in the header.
//
// Note [nccl ordering]: an operation records an event on the compute stream
// (cuda_adapter::compute_stream) and makes the communication stream wait on it,
// so the collective reads what earlier kernels wrote; it then records a
// completion event on the communication stream. Work::wait() polls that event
// on the host (so it can time out) and finally makes the compute stream wait on
// it, so later kernels see the result even if the host did not block.
//
// Note [nccl non-blocking]: the communicator is created with blocking = 0, so
// NCCL calls return ncclInProgress instead of blocking the host (connection
// set-up, a dead peer during initialisation or ncclCommSplit). settle() polls
// ncclCommGetAsyncError until the call is through or a deadline passes, and the
// caller aborts the communicator then; no NCCL call can hang the process.
//
// Note [nccl split handle]: with a non-blocking parent, ncclCommSplit returns
// ncclInProgress and NCCL writes the child's handle only when the child's
// initialisation job ends, which may be after the parent's own state already
// reads ncclSuccess. Reading the child's rank
// then fails ("invalid argument": a null communicator), so new_group waits
// for the handle and then for the child's own state (settle_split in
// nccl_wait.h) before touching the child.
//
// Note [nccl desync check]: in debug mode the group holds an MPI group with
// the same ranks in the same order (`debug_mpi`: the bootstrap group, or for a
// sub-group the MPI sub-group made alongside the ncclCommSplit, both ordered
// by the `ranks` list), and each operation exchanges its fingerprint there
// (ProcessGroupMPI::check_fingerprint) while Issue holds the group's mutex,
// after taking its sequence number and before any CUDA or NCCL call: a
// divergence throws on every rank with nothing queued on the GPU.
#include "parallel/comm/nccl/process_group_nccl.h"

#include <nccl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <mutex>
#include <thread>

#include "core/cuda/library_versions.h"
#include "core/cuda/stream.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/ops.h"
#include "parallel/comm/collectives.h"
#include "parallel/comm/desync.h"
#include "parallel/comm/mpi/process_group_mpi.h"
#include "parallel/comm/nccl/cuda_adapter.h"
#include "parallel/comm/nccl/nccl_common.h"
#include "parallel/comm/nccl/work_nccl.h"

namespace weft::parallel {

namespace ca = cuda_adapter;
using detail::check_tensor;
using detail::Clock;
using detail::Issue;
using detail::make_state;
using detail::nccl_op;
using detail::nccl_text;
using detail::nccl_type;
using detail::NCCLGroupState;
using detail::NCCLOpState;
using detail::seconds;
using detail::settle;

int cuda_device_count() { return ca::cuda_device_count(); }

// ---- ProcessGroupNCCL ----

ProcessGroupNCCL::ProcessGroupNCCL(std::unique_ptr<NCCLGroupState> state) : s_(std::move(state)) {}

ProcessGroupNCCL::~ProcessGroupNCCL() {
  try {
    release();
  } catch (...) {  // a destructor must not throw; the process is likely exiting
  }
}

void ProcessGroupNCCL::release() {
  std::lock_guard<std::mutex> l(s_->m);
  int dev = -1;
  if (cudaGetDevice(&dev) != cudaSuccess) return;  // the CUDA runtime is gone (process exit)
  ca::DeviceGuard g(s_->device);
  if (!s_->aborted && s_->comm != nullptr) {
    // Let queued operations finish (bounded), then release the communicator.
    auto deadline = Clock::now() + std::min<Duration>(timeout_, std::chrono::seconds(10));
    bool drained = false;
    while (Clock::now() < deadline) {
      cudaError_t e = cudaStreamQuery(s_->stream);
      if (e != cudaErrorNotReady) {
        drained = e == cudaSuccess;
        if (!drained) (void)cudaGetLastError();
        break;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    ncclResult_t rc = drained ? settle(s_->comm, ncclCommFinalize(s_->comm), deadline) : ncclInternalError;
    if (rc == ncclSuccess) {
      (void)settle(s_->comm, ncclCommDestroy(s_->comm), Clock::now() + std::chrono::seconds(10));
    } else {
      (void)ncclCommAbort(s_->comm);
    }
    s_->comm = nullptr;
  }
  s_->inflight.clear();
  s_->one = Tensor();
  if (s_->stream != nullptr) (void)cudaStreamDestroy(s_->stream);
}

std::shared_ptr<ProcessGroupNCCL> ProcessGroupNCCL::create(const std::shared_ptr<ProcessGroup>& bootstrap,
                                                           NCCLOptions options) {
  WEFT_CHECK(bootstrap != nullptr, "ProcessGroupNCCL::create: the bootstrap group is null");
  const int n_dev = ca::cuda_device_count();
  WEFT_CHECK(n_dev > 0, "ProcessGroupNCCL: no CUDA device is visible (", ca::unavailable_reason(), ")");
  const int device = options.device >= 0         ? options.device
                     : ca::process_device() >= 0 ? ca::process_device()
                                                 : local_rank() % n_dev;
  WEFT_CHECK(device < n_dev, "ProcessGroupNCCL: device ", device, " requested but only ", n_dev, " visible");
  // Note [process device] (core/cuda/device_logic.h): the rank's GPU becomes the
  // process's, once, so guards never switch threads to GPU 0 and back.
  ca::set_process_device(device);
  int nccl_version = 0;
  if (ncclGetVersion(&nccl_version) == ncclSuccess)
    weft::cuda::print_version_once("NCCL", weft::cuda::version_line("NCCL", nccl_version, NCCL_VERSION_CODE));
  const Duration timeout = default_timeout_from_env();
  auto mpi = std::dynamic_pointer_cast<ProcessGroupMPI>(bootstrap);
  std::string name = "nccl:" + (mpi != nullptr ? mpi->name() : "group" + ranks_str(bootstrap->global_ranks()));
  // Note [nccl desync check]: NCCL ranks are bootstrap ranks.
  const bool debug = debug_collectives_from_env() && bootstrap->size() > 1;
  WEFT_CHECK(!debug || mpi != nullptr, name,
             ": WEFT_DEBUG_COLLECTIVES needs an MPI bootstrap group to exchange fingerprints, got a ",
             bootstrap->backend_name(), " group");

  // The unique id: made by rank 0, broadcast through the bootstrap group.
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  Tensor id_bytes = zeros({static_cast<int64_t>(sizeof(ncclUniqueId))}, {DType::UInt8});  // (128,)
  if (bootstrap->rank() == 0) {
    ncclResult_t rc = ncclGetUniqueId(&id);
    WEFT_CHECK(rc == ncclSuccess, name, ": ncclGetUniqueId failed: ", nccl_text(rc, nullptr));
    std::memcpy(id_bytes.raw_data(), &id, sizeof(id));
  }
  if (bootstrap->size() > 1) bootstrap->broadcast(id_bytes, {0})->wait();
  std::memcpy(&id, id_bytes.raw_data(), sizeof(id));

  ca::DeviceGuard g(device);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;  // Note [nccl non-blocking]
  ncclComm_t comm = nullptr;
  const auto issued = Clock::now();
  ncclResult_t rc = ncclCommInitRankConfig(&comm, bootstrap->size(), id, bootstrap->rank(), &config);
  std::vector<int> globals = bootstrap->global_ranks();
  auto alive = [&] {
    double longest = 0;
    std::vector<int> g_peers;
    for (int p = 0; p < bootstrap->size(); ++p)
      if (p != bootstrap->rank()) g_peers.push_back(globals[p]);
    std::vector<int> dead = unresponsive_ranks(g_peers, liveness_threshold(timeout), &longest);
    if (dead.empty()) return;
    if (comm != nullptr) (void)ncclCommAbort(comm);
    WEFT_ERROR(name, ": initialising the communicator failed: missing ranks: ", ranks_str(dead),
               " stopped responding (no heartbeat for ", std::round(longest * 10) / 10,
               " s: the process died or is stuck)");
  };
  if (comm != nullptr) rc = settle(comm, rc, issued + timeout, alive);
  if (rc != ncclSuccess) {
    std::string why =
        rc == ncclInProgress ? weft::detail::str_cat("timed out after ", seconds(timeout), " s") : nccl_text(rc, comm);
    if (comm != nullptr) (void)ncclCommAbort(comm);
    WEFT_ERROR(name, ": initialising the communicator (rank ", bootstrap->rank(), " of ", bootstrap->size(),
               " on cuda:", device, ") failed: ", why);
  }
  auto pg = std::shared_ptr<ProcessGroupNCCL>(new ProcessGroupNCCL(make_state(comm, device, globals, name)));
  pg->set_timeout(timeout);
  pg->s_->id = 0x6e63636cull;  // "nccl"
  for (int r : globals) pg->s_->id = mix_group_id(pg->s_->id, uint64_t(r) + 1);
  if (debug) pg->s_->debug_mpi = mpi;
  return pg;
}

int ProcessGroupNCCL::rank() const { return s_->rank; }
int ProcessGroupNCCL::size() const { return s_->size; }
const std::vector<int>& ProcessGroupNCCL::global_ranks() const { return s_->global_ranks; }
const std::string& ProcessGroupNCCL::name() const { return s_->name; }
Device ProcessGroupNCCL::device() const { return Device(DeviceType::CUDA, s_->device); }
void* ProcessGroupNCCL::communication_stream() const { return s_->stream; }

int64_t ProcessGroupNCCL::sequence_number() const {
  std::lock_guard<std::mutex> l(s_->m);
  return s_->seq;
}

bool ProcessGroupNCCL::aborted() const {
  std::lock_guard<std::mutex> l(s_->m);
  return s_->aborted;
}

void ProcessGroupNCCL::abort(const std::string& reason) {
  std::lock_guard<std::mutex> l(s_->m);
  s_->abort_locked(reason);
}

WorkPtr ProcessGroupNCCL::allreduce(Tensor& tensor, const AllreduceOptions& opts) {
  check_tensor("allreduce", tensor, *s_);
  ncclRedOp_t op = nccl_op("allreduce", tensor.dtype(), opts.op);
  Issue is(*s_,
           weft::detail::str_cat("allreduce(", tensor.dtype(), ", ", tensor.numel(), " elements, ",
                                 reduce_op_name(opts.op), ")"),
           {0, 0, Fingerprint::kAllreduce, int64_t(tensor.dtype()), tensor.numel(), int64_t(opts.op)}, -1, opts.timeout,
           timeout_);
  is.op().keep = {tensor};
  if (tensor.numel() > 0)
    is.nccl(ncclAllReduce(tensor.raw_data(), tensor.raw_data(), static_cast<size_t>(tensor.numel()),
                          nccl_type(tensor.dtype()), op, is.comm(), is.stream()),
            "ncclAllReduce");
  return is.commit(shared_from_this());
}

WorkPtr ProcessGroupNCCL::broadcast(Tensor& tensor, const BroadcastOptions& opts) {
  check_tensor("broadcast", tensor, *s_);
  WEFT_CHECK(opts.root >= 0 && opts.root < s_->size, "broadcast: root ", opts.root, " is not a rank of ", s_->name,
             " (size ", s_->size, ")");
  Issue is(
      *s_,
      weft::detail::str_cat("broadcast(", tensor.dtype(), ", ", tensor.numel(), " elements, root ", opts.root, ")"),
      {0, 0, Fingerprint::kBroadcast, int64_t(tensor.dtype()), tensor.numel(), opts.root}, -1, opts.timeout, timeout_);
  is.op().keep = {tensor};
  if (tensor.numel() > 0)
    is.nccl(ncclBroadcast(tensor.raw_data(), tensor.raw_data(), static_cast<size_t>(tensor.numel()),
                          nccl_type(tensor.dtype()), opts.root, is.comm(), is.stream()),
            "ncclBroadcast");
  return is.commit(shared_from_this());
}

WorkPtr ProcessGroupNCCL::allgather(std::vector<Tensor>& outputs, const Tensor& input, const AllgatherOptions& opts) {
  check_tensor("allgather", input, *s_);
  WEFT_CHECK(static_cast<int>(outputs.size()) == s_->size, "allgather: expected ", s_->size,
             " output tensors (group size), got ", outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    check_tensor("allgather", outputs[i], *s_);
    WEFT_CHECK(outputs[i].sizes() == input.sizes() && outputs[i].dtype() == input.dtype(), "allgather: output ", i,
               " has shape ", shape_str(outputs[i].sizes()), " and dtype ", outputs[i].dtype(), " but the input has ",
               shape_str(input.sizes()), " and ", input.dtype());
  }
  Issue is(*s_, weft::detail::str_cat("allgather(", input.dtype(), ", ", input.numel(), " elements)"),
           {0, 0, Fingerprint::kAllgather, int64_t(input.dtype()), input.numel(), 0}, -1, opts.timeout, timeout_);
  is.op().keep = outputs;
  is.op().keep.push_back(input);
  const size_t nb = input.nbytes();
  if (nb > 0) {
    // Staging on the communication stream, then one copy per output.
    Tensor scratch = ca::scratch(nb * s_->size, s_->device, is.stream());  // (size * nbytes,)
    is.op().keep.push_back(scratch);
    char* flat = static_cast<char*>(scratch.raw_data());
    is.nccl(ncclAllGather(input.raw_data(), flat, static_cast<size_t>(input.numel()), nccl_type(input.dtype()),
                          is.comm(), is.stream()),
            "ncclAllGather");
    for (size_t i = 0; i < outputs.size(); ++i)
      WEFT_CUDA_CHECK(cudaMemcpyAsync(outputs[i].raw_data(), flat + i * nb, nb, cudaMemcpyDeviceToDevice, is.stream()));
  }
  return is.commit(shared_from_this());
}

WorkPtr ProcessGroupNCCL::reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                         const ReduceScatterOptions& opts) {
  check_tensor("reduce_scatter", output, *s_);
  WEFT_CHECK(static_cast<int>(inputs.size()) == s_->size, "reduce_scatter: expected ", s_->size,
             " input tensors (group size), got ", inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_tensor("reduce_scatter", inputs[i], *s_);
    WEFT_CHECK(inputs[i].sizes() == output.sizes() && inputs[i].dtype() == output.dtype(), "reduce_scatter: input ", i,
               " has shape ", shape_str(inputs[i].sizes()), " and dtype ", inputs[i].dtype(), " but the output has ",
               shape_str(output.sizes()), " and ", output.dtype());
  }
  ncclRedOp_t op = nccl_op("reduce_scatter", output.dtype(), opts.op);
  Issue is(*s_,
           weft::detail::str_cat("reduce_scatter(", output.dtype(), ", ", output.numel(), " elements, ",
                                 reduce_op_name(opts.op), ")"),
           {0, 0, Fingerprint::kReduceScatter, int64_t(output.dtype()), output.numel(), int64_t(opts.op)}, -1,
           opts.timeout, timeout_);
  is.op().keep = inputs;
  is.op().keep.push_back(output);
  const size_t nb = output.nbytes();
  if (nb > 0) {
    Tensor scratch = ca::scratch(nb * s_->size, s_->device, is.stream());  // (size * nbytes,)
    is.op().keep.push_back(scratch);
    char* flat = static_cast<char*>(scratch.raw_data());
    for (size_t i = 0; i < inputs.size(); ++i)
      WEFT_CUDA_CHECK(cudaMemcpyAsync(flat + i * nb, inputs[i].raw_data(), nb, cudaMemcpyDeviceToDevice, is.stream()));
    is.nccl(ncclReduceScatter(flat, output.raw_data(), static_cast<size_t>(output.numel()), nccl_type(output.dtype()),
                              op, is.comm(), is.stream()),
            "ncclReduceScatter");
  }
  return is.commit(shared_from_this());
}

WorkPtr ProcessGroupNCCL::barrier(const BarrierOptions& opts) {
  Issue is(*s_, "barrier()", {0, 0, Fingerprint::kBarrier, -1, 0, 0}, -1, opts.timeout, timeout_);
  is.nccl(ncclAllReduce(s_->one.raw_data(), s_->one.raw_data(), 1, ncclFloat32, ncclSum, is.comm(), is.stream()),
          "ncclAllReduce");
  return is.commit(shared_from_this());
}

std::shared_ptr<ProcessGroup> ProcessGroupNCCL::new_group(const std::vector<int>& ranks) {
  const NewGroupPlan plan = plan_new_group(ranks, s_->rank, s_->global_ranks, s_->name, s_->id);
  const bool member = plan.member();
  ncclComm_t child = nullptr;
  {
    std::lock_guard<std::mutex> l(s_->m);
    std::string what = weft::detail::str_cat(plan.what, " (sequence ", s_->seq, ")");
    s_->check_usable(what);
    const int64_t seq = s_->seq++;
    if (s_->debug_mpi != nullptr) {  // Note [nccl desync check]
      Fingerprint fp{seq, int64_t(s_->id), Fingerprint::kNewGroup, -1, int64_t(ranks.size()), plan.list_hash()};
      s_->debug_mpi->check_fingerprint(fp, -1, s_->name, what, timeout_);
    }
    ca::DeviceGuard g(s_->device);
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;  // Note [nccl non-blocking]
    const auto issued = Clock::now(), deadline = issued + timeout_;
    // Note [nccl split handle]: NCCL may write the child's handle from its own
    // thread after the call returned, so the slot lives on the heap and is read
    // atomically; it is leaked when the split did not finish (NCCL may still write it).
    auto* slot = new ncclComm_t(nullptr);
    auto load_child = [slot] { return std::atomic_ref<ncclComm_t>(*slot).load(std::memory_order_acquire); };
    ncclResult_t rc = ncclCommSplit(s_->comm, member ? 0 : NCCL_SPLIT_NOCOLOR, member ? plan.rank : 0, slot, &config);
    // Note [nccl non-blocking]: a dead peer is named from its heartbeats (m is held).
    auto alive = [&] {
      try {
        s_->check_alive(s_->peers(), what, timeout_, issued, /*locked=*/true, "during ncclCommSplit");
      } catch (...) {
        if (ncclComm_t c = load_child(); c != nullptr) (void)ncclCommAbort(c);
        throw;
      }
    };
    auto state_of = [](ncclComm_t comm) {
      ncclResult_t state = ncclSuccess;
      ncclResult_t q = ncclCommGetAsyncError(comm, &state);
      return static_cast<int>(q != ncclSuccess ? q : state);
    };
    rc = static_cast<ncclResult_t>(detail::settle_split(
        static_cast<int>(rc), static_cast<int>(ncclSuccess), static_cast<int>(ncclInProgress), member,
        [&] { return load_child() != nullptr; }, [&] { return state_of(s_->comm); },
        [&] { return state_of(load_child()); }, deadline,
        std::chrono::duration_cast<std::chrono::milliseconds>(detail::kNcclLivenessPollPeriod), alive));
    child = load_child();
    if (rc != ncclSuccess) {
      std::string msg = weft::detail::str_cat(what, " on ", s_->name, ": ncclCommSplit ",
                                              rc == ncclInProgress
                                                  ? weft::detail::str_cat("timed out after ", seconds(timeout_), " s")
                                                  : "failed: " + nccl_text(rc, child != nullptr ? child : s_->comm),
                                              "; communicator aborted");
      if (child != nullptr) (void)ncclCommAbort(child);
      if (rc != ncclInProgress) delete slot;
      s_->abort_locked(msg);
      WEFT_ERROR(msg);
    }
    delete slot;
    WEFT_CHECK(!member || child != nullptr, what, " on ", s_->name, ": ncclCommSplit returned no communicator");
  }
  std::shared_ptr<ProcessGroupNCCL> pg;
  if (member) {
    pg = std::shared_ptr<ProcessGroupNCCL>(
        new ProcessGroupNCCL(make_state(child, s_->device, plan.global_ranks, "nccl:" + plan.name)));
    pg->set_timeout(timeout_);
    pg->s_->id = plan.id;
  }
  // Note [nccl desync check]: the child's MPI group, made by every parent rank
  // (MPI_Group_incl keeps the order of `ranks`, as the split key does).
  if (s_->debug_mpi != nullptr) {
    auto sub = std::static_pointer_cast<ProcessGroupMPI>(s_->debug_mpi->new_group(ranks));
    if (pg != nullptr) pg->s_->debug_mpi = std::move(sub);
  }
  return pg;
}

}  // namespace weft::parallel
