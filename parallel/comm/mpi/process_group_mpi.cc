// ProcessGroupMPI: non-blocking MPI collectives with timeouts, arrival
// announcements and the debug-mode fingerprint check; the world group.
// Contract in the header. The pieces live beside this file: the tags and dtype
// mappings (mpi_common.h), each group's communicators and arrival bookkeeping
// (group_state.h, Note [arrival announcements]), the heartbeat thread
// (liveness.h, Note [liveness], Note [progress thread]), Work (work_mpi.h) and
// point-to-point (p2p_mpi.cc, Note [batched p2p], Note [p2p headers]).
#include "parallel/comm/mpi/process_group_mpi.h"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "core/dtype.h"
#include "core/error.h"
#include "parallel/comm/collectives.h"
#include "parallel/comm/mpi/group_state.h"
#include "parallel/comm/mpi/mpi_common.h"
#include "parallel/comm/mpi/work_mpi.h"

namespace weft::parallel {

using detail::check_tensor;
using detail::describe;
using detail::divide_in_place;
using detail::kCreateGroupTag;
using detail::kFingerprintTag;
using detail::launch_work;
using detail::mpi_op;
using detail::mpi_type;
using detail::MPIGroupState;
using detail::poll_until;
using detail::WorkState;

namespace {
std::atomic<int> g_thread_level{-1};
}  // namespace

int mpi_thread_level() { return g_thread_level; }
bool had_collective_failure() { return detail::failure_flag(); }

Duration default_timeout_from_env() {
  const char* v = std::getenv("WEFT_COLLECTIVE_TIMEOUT_S");
  if (v == nullptr || *v == '\0') return kDefaultTimeout;
  char* end = nullptr;
  double s = std::strtod(v, &end);
  WEFT_CHECK(end != v && *end == '\0' && s > 0 && s <= 1e9,
             "WEFT_COLLECTIVE_TIMEOUT_S must be a positive number of seconds (at most 1e9), got '", v, "'");
  return Duration(static_cast<int64_t>(s * 1000.0));
}

bool debug_collectives_from_env() {
  const char* v = std::getenv("WEFT_DEBUG_COLLECTIVES");
  return v != nullptr && *v != '\0' && std::string(v) != "0";
}

int local_rank() {
  const char* v = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
  return v ? std::atoi(v) : 0;
}
int local_size() {
  const char* v = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
  return v ? std::atoi(v) : 1;
}

namespace {

// Debug mode (parallel/comm/desync.h): exchanges `mine` on the side communicator
// with every rank of `gs` (peer < 0: MPI_Iallgather) or with group rank `peer`
// only (MPI_Isend + MPI_Irecv). Returns the fingerprints in group-rank order
// (for a pair: the lower group rank's first), or nothing after `timeout` from
// `issued`; throws if a peer stops responding. Buffers are on the heap: on a
// timeout MPI may still write them, so they are leaked (and the failure flag set).
std::optional<std::vector<Fingerprint>> exchange_fingerprints(MPIGroupState& gs, const Fingerprint& mine, int peer,
                                                              const std::string& what_seq, Duration timeout,
                                                              std::chrono::steady_clock::time_point issued) {
  const int n = peer < 0 ? gs.size : 2;
  auto* own = new Fingerprint(mine);
  auto* all = new std::vector<Fingerprint>(n);
  auto* reqs = new MPI_Request[2]{MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  {
    std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
    if (peer < 0) {
      WEFT_MPI_CHECK(MPI_Iallgather(own, kFingerprintLen, MPI_INT64_T, all->data(), kFingerprintLen, MPI_INT64_T,
                                    gs.side, &reqs[0]),
                     what_seq, ": exchanging debug fingerprints");
    } else {
      Fingerprint* theirs = &(*all)[peer < gs.rank ? 0 : 1];
      (*all)[peer < gs.rank ? 1 : 0] = mine;
      WEFT_MPI_CHECK(MPI_Isend(own, kFingerprintLen, MPI_INT64_T, peer, kFingerprintTag, gs.side, &reqs[0]), what_seq,
                     ": exchanging debug fingerprints");
      WEFT_MPI_CHECK(MPI_Irecv(theirs, kFingerprintLen, MPI_INT64_T, peer, kFingerprintTag, gs.side, &reqs[1]),
                     what_seq, ": exchanging debug fingerprints");
    }
  }
  if (!poll_until(reqs, peer < 0 ? 1 : 2, gs, peer < 0 ? gs.peers() : std::vector<int>{peer}, what_seq, timeout,
                  issued)) {
    detail::failure_flag() = true;  // a request stays pending
    return std::nullopt;
  }
  std::vector<Fingerprint> out = std::move(*all);
  delete all;
  delete own;
  delete[] reqs;
  return out;
}

}  // namespace

namespace {
// The side communicators of destroyed groups (Note [side communicator lifetime]).
std::vector<MPI_Comm>& retired_side_communicators() {
  static auto* kept = new std::vector<MPI_Comm>();
  return *kept;
}
}  // namespace

// ---- ProcessGroupMPI ----

ProcessGroupMPI::ProcessGroupMPI(std::unique_ptr<detail::MPIGroupState> state) : s_(std::move(state)) {
  timeout_ = default_timeout_from_env();
}

ProcessGroupMPI::~ProcessGroupMPI() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized || detail::failure_flag()) return;  // requests may still reference the communicators
  std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
  // Note [side communicator lifetime]: arrival announcements (Note [arrival
  // announcements] in group_state.cc) are never matched by a receive the
  // sender waits for, so a peer's last ones may still be in flight when this
  // group goes away. Open MPI parks messages for a freed communicator under
  // its context id and hands them to the next communicator that reuses the
  // id, which crashes ob1 (seen: a pipeline x data-parallel grid rebuilt in
  // one process segfaulted in mca_pml_ob1_add_comm). So `side` is drained and
  // kept (never freed: one communicator per destroyed group, released by
  // MPI_Finalize); `comm` carries only matched traffic and is freed.
  s_->drain();
  for (auto& a : s_->sends) MPI_Request_free(&a.req);
  if (s_->side != MPI_COMM_NULL) retired_side_communicators().push_back(s_->side);
  if (s_->comm != MPI_COMM_NULL) MPI_Comm_free(&s_->comm);
}

std::shared_ptr<ProcessGroupMPI> ProcessGroupMPI::create_world() {
  int inited = 0;
  MPI_Initialized(&inited);
  WEFT_CHECK(inited, "ProcessGroupMPI: MPI is not initialised (use init_process_group or DistributedContext)");
  std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  std::vector<int> ranks(n);
  for (int i = 0; i < n; ++i) ranks[i] = i;
  auto s = detail::make_group_state(MPI_COMM_WORLD, std::move(ranks), "world", 1, debug_collectives_from_env());
  return std::shared_ptr<ProcessGroupMPI>(new ProcessGroupMPI(std::move(s)));
}

int ProcessGroupMPI::rank() const { return s_->rank; }
int ProcessGroupMPI::size() const { return s_->size; }
const std::vector<int>& ProcessGroupMPI::global_ranks() const { return s_->global_ranks; }
const std::string& ProcessGroupMPI::name() const { return s_->name; }
int64_t ProcessGroupMPI::sequence_number() const { return s_->seq; }
bool ProcessGroupMPI::debug_mode() const { return s_->debug; }
void ProcessGroupMPI::set_debug_mode(bool on) { s_->debug = on; }

void ProcessGroupMPI::progress() {
  std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
  int flag = 0;
  MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, s_->side, &flag, MPI_STATUS_IGNORE);
}

namespace {

// Starts a sequenced collective: numbers it, announces it and, in debug mode,
// checks the fingerprints. Caller holds mpi_mutex().
std::shared_ptr<WorkState> begin_collective(ProcessGroupMPI& pg, MPIGroupState& gs, Duration opt_timeout,
                                            Fingerprint fp, std::string what) {
  auto st = std::make_shared<WorkState>();
  st->expect(1);
  st->gs = &gs;
  st->what = std::move(what);
  st->seq = gs.seq++;
  st->timeout = opt_timeout == Duration::zero() ? pg.timeout() : opt_timeout;
  st->issued = std::chrono::steady_clock::now();
  gs.announce(st->seq);
  if (gs.debug && gs.size > 1) {
    fp.seq = st->seq;
    fp.group = static_cast<int64_t>(gs.id);
    auto all = exchange_fingerprints(gs, fp, -1, weft::detail::str_cat(st->what, " (sequence ", st->seq, ")"),
                                     st->timeout, st->issued);
    if (!all) {
      WEFT_ERROR(st->what, " (sequence ", st->seq, ") on ", gs.name, " timed out after ", st->timeout.count() / 1000.0,
                 " s in the debug fingerprint exchange: ", gs.missing_text(gs.missing(st->seq)), " did not arrive");
    }
    if (auto err = first_divergence(gs.name, st->seq, *all, gs.global_ranks)) WEFT_ERROR(*err);
  }
  return st;
}

}  // namespace

void ProcessGroupMPI::check_fingerprint(const Fingerprint& fp, int peer, const std::string& group_name,
                                        const std::string& what_seq, Duration timeout) {
  WEFT_CHECK(peer < s_->size && peer != s_->rank, "check_fingerprint: rank ", peer, " is not a peer in ", s_->name,
             " (size ", s_->size, ", this rank ", s_->rank, ")");
  if (s_->size == 1) return;
  auto all = exchange_fingerprints(*s_, fp, peer, what_seq + " on " + group_name + ": debug fingerprint exchange",
                                   timeout, std::chrono::steady_clock::now());
  if (!all) {
    WEFT_ERROR(what_seq, " on ", group_name, " timed out after ", timeout.count() / 1000.0,
               " s in the debug fingerprint exchange: missing ranks: unknown (",
               peer < 0 ? "a peer has" : "the peer has", " not issued it, or issued an operation of another group)");
  }
  std::vector<int> globals = s_->global_ranks;
  if (peer >= 0) globals = {s_->global_ranks[std::min(peer, s_->rank)], s_->global_ranks[std::max(peer, s_->rank)]};
  if (auto err = first_divergence(group_name, fp.seq, *all, globals)) WEFT_ERROR(*err);
}

WorkPtr ProcessGroupMPI::allreduce(Tensor& tensor, const AllreduceOptions& opts) {
  check_tensor("allreduce", tensor);
  std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
  MPI_Op op = mpi_op("allreduce", tensor.dtype(), opts.op);
  std::string what = weft::detail::str_cat("allreduce(", tensor.dtype(), ", ", tensor.numel(), " elements, ",
                                           reduce_op_name(opts.op), ")");
  auto st = begin_collective(*this, *s_, opts.timeout,
                             {0, 0, Fingerprint::kAllreduce, int64_t(tensor.dtype()), tensor.numel(), int64_t(opts.op)},
                             what);
  st->group = shared_from_this();
  st->keep = {tensor};
  if (opts.op == ReduceOp::Avg) {
    Tensor t = tensor;
    int n = s_->size;
    st->finish = [t, n](WorkState&) { divide_in_place(t.raw_data(), t.numel(), t.dtype(), n); };
  }
  int rc = MPI_Iallreduce(MPI_IN_PLACE, tensor.raw_data(), int(tensor.numel()), mpi_type(tensor.dtype()), op, s_->comm,
                          &st->reqs[0]);
  return launch_work(st, rc);
}

WorkPtr ProcessGroupMPI::broadcast(Tensor& tensor, const BroadcastOptions& opts) {
  check_tensor("broadcast", tensor);
  WEFT_CHECK(opts.root >= 0 && opts.root < s_->size, "broadcast: root ", opts.root, " is not a rank of ", s_->name,
             " (size ", s_->size, ")");
  std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
  std::string what =
      weft::detail::str_cat("broadcast(", tensor.dtype(), ", ", tensor.numel(), " elements, root ", opts.root, ")");
  auto st = begin_collective(*this, *s_, opts.timeout,
                             {0, 0, Fingerprint::kBroadcast, int64_t(tensor.dtype()), tensor.numel(), opts.root}, what);
  st->group = shared_from_this();
  st->keep = {tensor};
  int rc =
      MPI_Ibcast(tensor.raw_data(), int(tensor.numel()), mpi_type(tensor.dtype()), opts.root, s_->comm, &st->reqs[0]);
  return launch_work(st, rc);
}

WorkPtr ProcessGroupMPI::allgather(std::vector<Tensor>& outputs, const Tensor& input, const AllgatherOptions& opts) {
  check_tensor("allgather", input);
  WEFT_CHECK(int(outputs.size()) == s_->size, "allgather: expected ", s_->size, " output tensors (group size), got ",
             outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    check_tensor("allgather", outputs[i]);
    WEFT_CHECK(outputs[i].sizes() == input.sizes() && outputs[i].dtype() == input.dtype(), "allgather: output ", i,
               " has shape ", shape_str(outputs[i].sizes()), " and dtype ", outputs[i].dtype(), " but the input has ",
               shape_str(input.sizes()), " and ", input.dtype());
  }
  std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
  auto st = begin_collective(*this, *s_, opts.timeout,
                             {0, 0, Fingerprint::kAllgather, int64_t(input.dtype()), input.numel(), 0},
                             describe("allgather", input));
  st->group = shared_from_this();
  size_t nb = input.nbytes();
  st->buffer.resize(nb * s_->size);
  st->keep = outputs;
  st->keep.push_back(input);
  std::vector<Tensor> outs = outputs;
  WorkState* raw = st.get();
  st->finish = [raw, outs, nb](WorkState&) {
    for (size_t i = 0; i < outs.size(); ++i)
      if (nb) std::memcpy(outs[i].raw_data(), raw->buffer.data() + i * nb, nb);
  };
  int rc = MPI_Iallgather(input.raw_data(), int(input.numel()), mpi_type(input.dtype()), st->buffer.data(),
                          int(input.numel()), mpi_type(input.dtype()), s_->comm, &st->reqs[0]);
  return launch_work(st, rc);
}

WorkPtr ProcessGroupMPI::reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                        const ReduceScatterOptions& opts) {
  check_tensor("reduce_scatter", output);
  WEFT_CHECK(int(inputs.size()) == s_->size, "reduce_scatter: expected ", s_->size, " input tensors (group size), got ",
             inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_tensor("reduce_scatter", inputs[i]);
    WEFT_CHECK(inputs[i].sizes() == output.sizes() && inputs[i].dtype() == output.dtype(), "reduce_scatter: input ", i,
               " has shape ", shape_str(inputs[i].sizes()), " and dtype ", inputs[i].dtype(), " but the output has ",
               shape_str(output.sizes()), " and ", output.dtype());
  }
  std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
  MPI_Op op = mpi_op("reduce_scatter", output.dtype(), opts.op);
  std::string what = weft::detail::str_cat("reduce_scatter(", output.dtype(), ", ", output.numel(), " elements, ",
                                           reduce_op_name(opts.op), ")");
  auto st = begin_collective(
      *this, *s_, opts.timeout,
      {0, 0, Fingerprint::kReduceScatter, int64_t(output.dtype()), output.numel(), int64_t(opts.op)}, what);
  st->group = shared_from_this();
  size_t nb = output.nbytes();
  st->buffer.resize(nb * s_->size);
  for (size_t i = 0; i < inputs.size(); ++i)
    if (nb) std::memcpy(st->buffer.data() + i * nb, inputs[i].raw_data(), nb);
  st->keep = {output};
  if (opts.op == ReduceOp::Avg) {
    Tensor t = output;
    int n = s_->size;
    st->finish = [t, n](WorkState&) { divide_in_place(t.raw_data(), t.numel(), t.dtype(), n); };
  }
  int rc = MPI_Ireduce_scatter_block(st->buffer.data(), output.raw_data(), int(output.numel()),
                                     mpi_type(output.dtype()), op, s_->comm, &st->reqs[0]);
  return launch_work(st, rc);
}

WorkPtr ProcessGroupMPI::barrier(const BarrierOptions& opts) {
  std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
  auto st = begin_collective(*this, *s_, opts.timeout, {0, 0, Fingerprint::kBarrier, -1, 0, 0}, "barrier()");
  st->group = shared_from_this();
  int rc = MPI_Ibarrier(s_->comm, &st->reqs[0]);
  return launch_work(st, rc);
}

std::shared_ptr<ProcessGroup> ProcessGroupMPI::new_group(const std::vector<int>& ranks) {
  const NewGroupPlan plan = plan_new_group(ranks, s_->rank, s_->global_ranks, s_->name, s_->id);
  std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
  // A sequenced, timed barrier over the parent first: every parent rank is
  // present, so the blocking MPI_Comm_create_group below cannot hang on a
  // dead member.
  auto st = begin_collective(*this, *s_, Duration::zero(),
                             {0, 0, Fingerprint::kNewGroup, -1, int64_t(ranks.size()), plan.list_hash()}, plan.what);
  st->group = shared_from_this();
  WorkPtr w = launch_work(st, MPI_Ibarrier(s_->comm, &st->reqs[0]));
  w->wait();
  if (!plan.member()) return nullptr;
  MPI_Group parent_group, sub_group;
  MPI_Comm sub = MPI_COMM_NULL;
  WEFT_MPI_CHECK(MPI_Comm_group(s_->comm, &parent_group), "new_group");
  WEFT_MPI_CHECK(MPI_Group_incl(parent_group, int(ranks.size()), ranks.data(), &sub_group), "new_group");
  WEFT_MPI_CHECK(MPI_Comm_create_group(s_->comm, sub_group, kCreateGroupTag, &sub), "new_group");
  MPI_Group_free(&sub_group);
  MPI_Group_free(&parent_group);
  auto s = detail::make_group_state(sub, plan.global_ranks, plan.name, plan.id, s_->debug);
  MPI_Comm_free(&sub);
  auto pg = std::shared_ptr<ProcessGroupMPI>(new ProcessGroupMPI(std::move(s)));
  pg->set_timeout(timeout_);
  return pg;
}

// ---- the world group ----

namespace {
std::shared_ptr<ProcessGroupMPI>& world_slot() {
  static std::shared_ptr<ProcessGroupMPI> w;
  return w;
}

}  // namespace

std::shared_ptr<ProcessGroup> init_process_group() {
  std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
  if (world_slot()) return world_slot();
  int inited = 0;
  MPI_Initialized(&inited);
  if (!inited) {
    int provided = 0;
    WEFT_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "init_process_group");
    g_thread_level = provided;
  } else if (g_thread_level < 0) {
    int provided = 0;
    MPI_Query_thread(&provided);
    g_thread_level = provided;
  }
  world_slot() = ProcessGroupMPI::create_world();
  // Note [liveness]: the heartbeat thread calls MPI from its own thread, which
  // MPI_THREAD_SERIALIZED allows given mpi_mutex().
  if (world_slot()->size() > 1 && g_thread_level >= MPI_THREAD_SERIALIZED) detail::start_liveness_monitor();
  return world_slot();
}

void destroy_process_group() {
  {
    std::lock_guard<std::recursive_mutex> lk(mpi_mutex());
    world_slot().reset();
  }
  detail::stop_liveness_monitor();
}

bool is_initialized() { return world_slot() != nullptr; }

}  // namespace weft::parallel
