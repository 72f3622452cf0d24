// Pipeline schedules as plain data: what each rank does, in which order.
//
// Contract:
// - A pipeline has S = ranks * virtual_stages stages. Stage s lives on rank
//   stage_to_rank[s] (the placement, plain data that every consumer reads:
//   stages_of_rank, local_index, insert_communication, the validator, the
//   simulator, the charts, the text form and the runners). Most generators
//   place stage s on rank s % ranks ("looped" placement: rank r holds stages
//   r, r + p, r + 2p, ..., so with one stage per rank stage s is rank s); zbv
//   uses the V placement (rank r holds stages r and 2p - 1 - r, so stages
//   p - 1 and p share rank p - 1 and the first and last stage share rank 0).
// - A Schedule holds, per rank, the ordered list of Actions that rank executes for
//   one training step over `num_microbatches` micro-batches. No tensors, no
//   process groups: runners (multi-process over ProcessGroup::batch_isend_irecv,
//   single-process with a thread per device) interpret it; validate.h checks it;
//   simulate.h times it.
// - Compute actions: F(s, mb) forward; B(s, mb) backward: the input gradient only
//   when the schedule splits the backward (split_backward), else the whole backward
//   (input and weight gradients); W(s, mb) the weight gradient, only when split.
// - Communication actions sit on the rank that runs `stage` and name the
//   neighbour stage at the other end (peer_stage) and its rank (peer_rank):
//   SendActivation(s -> s+1) after F(s); RecvActivation(s <- s-1) before F(s);
//   SendGrad(s -> s-1) after B(s); RecvGrad(s <- s+1) before B(s). A send and a
//   receive match when they carry the same payload (activation or gradient) of
//   the same micro-batch from the same sending stage. Neighbour stages on the same
//   rank exchange nothing: the consumer uses the local producer's result.
// - For runners: the list order says when data must be there, not when a
//   transfer starts. A runner may post receives earlier (so transfers overlap
//   compute) but must never block on a send before going on: the validator's
//   deadlock model treats sends as buffered (non-blocking) and receives as
//   blocking, so with NCCL or MPI sends are issued asynchronously and waited for
//   lazily (before their buffer is reused, at the latest at the end of the step).
// - to_string(Action): compute as kind letter, stage, '.', micro-batch ("F3.1" is
//   stage 3's forward of micro-batch 1); communication as e.g. "SendAct3.1->s4@r0"
//   and "RecvGrad3.1<-s4@r0"; a TiedGrad as "Tied0@s3" (group 0, its lowest
//   stage on the rank), a ReduceGrad as "Reduce3", a ReduceTiedGrad as
//   "ReduceTied0@s3".
// - Note [gradient reduction]: when the pipeline is replicated over data
//   parallelism (each stage held by several replicas, which run the same
//   schedule), reduce_grads is true and each rank's list holds one
//   ReduceGrad(s) per stage s it runs, after the last B (W when split) of s:
//   there the stage's gradients are averaged over its data-parallel group,
//   bucketed and asynchronously (the rank goes on; the step waits for them
//   at its end). A tied group's gradient is summed over stages first
//   (TiedGrad), then averaged by ReduceTiedGrad(g), after TiedGrad(g) on each
//   holding rank. The reduction is an action so that the validator checks
//   it, the simulator times it and the charts and traces show it; the
//   planner sees its cost.
// - Note [overlapped F and B] (DualPipeV's idea): an Overlap(s) action says
//   that the rank's next two actions, F(s, mb) then a B of another
//   micro-batch or stage, run at the same time; both inputs are received
//   before the Overlap and both outputs sent after the pair, so running the
//   list in order is also correct (the validator checks it so). The
//   simulator times the pair concurrently (CostModel::overlap_speed) and
//   the charts draw it; the runners run the two one after the other.
//   overlap_forward_backward (generators.h) makes such pairs from a schedule.
//   to_string: "Overlap3".
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace weft::parallel::pipe {

enum class ActionKind : std::uint8_t {
  kForward,         // F
  kBackward,        // B: input gradient (the whole backward when not split)
  kWeight,          // W: weight gradient (split schedules only)
  kSendActivation,  // F(stage)'s output to stage + 1
  kRecvActivation,  // stage's input from stage - 1
  kSendGrad,        // B(stage)'s input gradient to stage - 1
  kRecvGrad,        // stage's output gradient from stage + 1
  kTiedGrad,        // sum a tied parameter's gradient over its stages' ranks (Note [tied parameters])
  kReduceGrad,      // average the stage's gradients over data parallelism (Note [gradient reduction])
  kReduceTiedGrad,  // average a tied group's summed gradient over data parallelism
  kOverlap,         // the next two actions, an F and a B, run at once (Note [overlapped F and B])
};

inline bool is_compute(ActionKind k) {
  return k == ActionKind::kForward || k == ActionKind::kBackward || k == ActionKind::kWeight;
}
inline bool is_send(ActionKind k) { return k == ActionKind::kSendActivation || k == ActionKind::kSendGrad; }
inline bool is_recv(ActionKind k) { return k == ActionKind::kRecvActivation || k == ActionKind::kRecvGrad; }
inline bool is_comm(ActionKind k) { return is_send(k) || is_recv(k); }
inline bool is_tied(ActionKind k) { return k == ActionKind::kTiedGrad; }
inline bool is_reduce(ActionKind k) { return k == ActionKind::kReduceGrad || k == ActionKind::kReduceTiedGrad; }

struct Action {
  ActionKind kind = ActionKind::kForward;
  int stage = 0;        // the stage (on this rank) the action belongs to
  int microbatch = 0;   // 0 .. num_microbatches - 1
  int peer_stage = -1;  // communication only: the stage at the other end
  int peer_rank = -1;   // communication only: the rank that runs peer_stage
  int tie = -1;         // kTiedGrad, kReduceTiedGrad: the group's index in Schedule::tied_stages

  static Action forward(int stage, int mb) { return {ActionKind::kForward, stage, mb}; }
  static Action backward(int stage, int mb) { return {ActionKind::kBackward, stage, mb}; }
  static Action weight(int stage, int mb) { return {ActionKind::kWeight, stage, mb}; }
  static Action send_activation(int stage, int mb, int peer_rank) {
    return {ActionKind::kSendActivation, stage, mb, stage + 1, peer_rank};
  }
  static Action recv_activation(int stage, int mb, int peer_rank) {
    return {ActionKind::kRecvActivation, stage, mb, stage - 1, peer_rank};
  }
  static Action send_grad(int stage, int mb, int peer_rank) {
    return {ActionKind::kSendGrad, stage, mb, stage - 1, peer_rank};
  }
  static Action recv_grad(int stage, int mb, int peer_rank) {
    return {ActionKind::kRecvGrad, stage, mb, stage + 1, peer_rank};
  }
  // `stage`: the lowest stage of the group on this rank.
  static Action tied_grad(int stage, int tie) { return {ActionKind::kTiedGrad, stage, 0, -1, -1, tie}; }
  static Action reduce_grad(int stage) { return {ActionKind::kReduceGrad, stage, 0}; }
  // `stage`: as for tied_grad.
  static Action reduce_tied_grad(int stage, int tie) { return {ActionKind::kReduceTiedGrad, stage, 0, -1, -1, tie}; }
  // `stage`: the overlapped F's.
  static Action overlap(int stage) { return {ActionKind::kOverlap, stage, 0}; }

  friend bool operator==(const Action&, const Action&) = default;
};

// "F", "B", "W", "SendAct", "RecvAct", "SendGrad", "RecvGrad", "Tied", "Reduce", "ReduceTied", "Overlap".
std::string to_string(ActionKind kind);
std::string to_string(const Action& a);
std::ostream& operator<<(std::ostream& os, const Action& a);
// Space-separated to_string of each action ("F0.0 SendAct0.0->s1@r1 ...").
std::string to_string(const std::vector<Action>& actions);

struct Schedule {
  std::string name;  // "gpipe", "1f1b", "interleaved", "zb-h1", "zbv", "interleaved-zb", or a user's
  int num_ranks = 0;
  int num_microbatches = 0;
  int virtual_stages = 1;                         // stages per rank
  bool split_backward = false;                    // B is the input gradient only and W exists
  std::vector<int> stage_to_rank;                 // size num_stages()
  std::vector<std::vector<Action>> rank_actions;  // size num_ranks
  std::vector<std::vector<int>> tied_stages;      // per tied group, its stages, increasing (Note [tied parameters])
  bool reduce_grads = false;  // data-parallel replicas: ReduceGrad actions (Note [gradient reduction])

  int num_stages() const { return static_cast<int>(stage_to_rank.size()); }
  int rank_of(int stage) const;
  // The stages rank r runs, in increasing order.
  std::vector<int> stages_of_rank(int rank) const;
  // The index of `stage` among stages_of_rank(rank_of(stage)) (the "chunk").
  int local_index(int stage) const;
  // rank_actions[r] restricted to compute actions (F, B, W).
  std::vector<Action> compute_actions(int rank) const;
  // The ranks that hold a stage of tied group `tie`, increasing.
  std::vector<int> tied_ranks(int tie) const;
};

// Stage s on rank s % ranks, for ranks * virtual_stages stages.
std::vector<int> looped_placement(int ranks, int virtual_stages);
// Two stages per rank in a V: rank r holds stages r and 2 ranks - 1 - r
// (ranks = 4: 0 1 2 3 3 2 1 0), for 2 * ranks stages.
std::vector<int> v_placement(int ranks);

// An empty schedule (no actions) with looped placement; checks the counts are positive.
Schedule make_empty_schedule(std::string name, int ranks, int microbatches, int virtual_stages, bool split_backward);

// Adds the communication actions to compute-only action lists, in place: a receive
// right before each compute whose input comes from another rank, a send right
// after each compute whose output goes to another rank (see the contract above).
void insert_communication(Schedule& schedule);

// Note [tied parameters]: sets schedule.tied_stages (each group sorted, without
// repeats; a group must name at least one stage, all in range) and appends a
// TiedGrad(g) to the end of each rank holding a stage of group g, groups in
// order. An error when the schedule already has tied groups.
void add_tied_grads(Schedule& schedule, std::vector<std::vector<int>> tied_stages);

// Note [gradient reduction]: sets reduce_grads and inserts ReduceGrad(s) right
// after the last B (W when split) of each stage s on its rank, and a
// ReduceTiedGrad(g) right after each TiedGrad(g); call it after
// add_tied_grads. An error when the schedule already reduces.
void add_reduce_grads(Schedule& schedule);

// A header line with the parameters, then "rank r: <actions>" per rank. The
// header names a placement other than the looped one: "placement=v" for
// v_placement, else the rank of each stage ("placement=0,1,1,0").
std::string to_string(const Schedule& s);
std::ostream& operator<<(std::ostream& os, const Schedule& s);

// Activation checkpointing of micro-batches (the runner's, fairscale's
// checkpoint= modes): a checkpointed micro-batch keeps only its stage inputs
// and recomputes its forward in its backward.
enum class CheckpointMode { kAlways, kExceptLast, kNever };
// "always", "except_last", "never"; anything else is an error naming it.
CheckpointMode parse_checkpoint_mode(const std::string& name);
std::string checkpoint_mode_name(CheckpointMode mode);
// Micro-batches [0, n) are checkpointed: m, m - 1 or 0.
int checkpointed_microbatches(CheckpointMode mode, int microbatches);

}  // namespace weft::parallel::pipe
