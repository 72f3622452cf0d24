// Schedule helpers: placement, names, communication insertion (see schedule.h).
#include "parallel/pipe/schedule.h"

#include <algorithm>
#include <sstream>

#include "core/error.h"

namespace weft::parallel::pipe {

std::string to_string(ActionKind kind) {
  switch (kind) {
    case ActionKind::kForward: return "F";
    case ActionKind::kBackward: return "B";
    case ActionKind::kWeight: return "W";
    case ActionKind::kSendActivation: return "SendAct";
    case ActionKind::kRecvActivation: return "RecvAct";
    case ActionKind::kSendGrad: return "SendGrad";
    case ActionKind::kRecvGrad: return "RecvGrad";
    case ActionKind::kTiedGrad: return "Tied";
    case ActionKind::kReduceGrad: return "Reduce";
    case ActionKind::kReduceTiedGrad: return "ReduceTied";
    case ActionKind::kOverlap: return "Overlap";
  }
  return "?";
}

std::string to_string(const Action& a) {
  std::ostringstream os;
  if (is_tied(a.kind) || a.kind == ActionKind::kReduceTiedGrad) {
    os << to_string(a.kind) << a.tie << "@s" << a.stage;
    return os.str();
  }
  if (a.kind == ActionKind::kReduceGrad || a.kind == ActionKind::kOverlap) {
    os << to_string(a.kind) << a.stage;
    return os.str();
  }
  os << to_string(a.kind) << a.stage << '.' << a.microbatch;
  if (is_send(a.kind)) os << "->s" << a.peer_stage << "@r" << a.peer_rank;
  if (is_recv(a.kind)) os << "<-s" << a.peer_stage << "@r" << a.peer_rank;
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Action& a) { return os << to_string(a); }

std::string to_string(const std::vector<Action>& actions) {
  std::string out;
  for (size_t i = 0; i < actions.size(); ++i) {
    if (i) out += ' ';
    out += to_string(actions[i]);
  }
  return out;
}

int Schedule::rank_of(int stage) const {
  WEFT_CHECK(stage >= 0 && stage < num_stages(), "schedule ", name, ": stage ", stage, " out of range [0, ",
             num_stages(), ")");
  return stage_to_rank[stage];
}

std::vector<int> Schedule::stages_of_rank(int rank) const {
  WEFT_CHECK(rank >= 0 && rank < num_ranks, "schedule ", name, ": rank ", rank, " out of range [0, ", num_ranks, ")");
  std::vector<int> out;
  for (int s = 0; s < num_stages(); ++s)
    if (stage_to_rank[s] == rank) out.push_back(s);
  return out;
}

int Schedule::local_index(int stage) const {
  const int r = rank_of(stage);
  int index = 0;
  for (int s = 0; s < stage; ++s)
    if (stage_to_rank[s] == r) ++index;
  return index;
}

std::vector<Action> Schedule::compute_actions(int rank) const {
  WEFT_CHECK(rank >= 0 && rank < static_cast<int>(rank_actions.size()), "schedule ", name, ": rank ", rank,
             " out of range [0, ", rank_actions.size(), ")");
  std::vector<Action> out;
  for (const Action& a : rank_actions[rank])
    if (is_compute(a.kind)) out.push_back(a);
  return out;
}

std::vector<int> Schedule::tied_ranks(int tie) const {
  WEFT_CHECK(tie >= 0 && tie < static_cast<int>(tied_stages.size()), "schedule ", name, ": tied group ", tie,
             " out of range [0, ", tied_stages.size(), ")");
  std::vector<int> out;
  for (int s : tied_stages[tie]) out.push_back(rank_of(s));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

void add_tied_grads(Schedule& schedule, std::vector<std::vector<int>> tied_stages) {
  WEFT_CHECK(schedule.tied_stages.empty(), "add_tied_grads: schedule ", schedule.name, " already has ",
             schedule.tied_stages.size(), " tied group(s)");
  for (size_t g = 0; g < tied_stages.size(); ++g) {
    auto& stages = tied_stages[g];
    WEFT_CHECK(!stages.empty(), "add_tied_grads: schedule ", schedule.name, ": tied group ", g, " names no stage");
    for (int s : stages)
      WEFT_CHECK(s >= 0 && s < schedule.num_stages(), "add_tied_grads: schedule ", schedule.name, ": tied group ", g,
                 " names stage ", s, ", out of range [0, ", schedule.num_stages(), ")");
    std::sort(stages.begin(), stages.end());
    stages.erase(std::unique(stages.begin(), stages.end()), stages.end());
  }
  schedule.tied_stages = std::move(tied_stages);
  for (int g = 0; g < static_cast<int>(schedule.tied_stages.size()); ++g)
    for (int r : schedule.tied_ranks(g))
      for (int s : schedule.tied_stages[g])
        if (schedule.stage_to_rank[s] == r) {
          schedule.rank_actions[r].push_back(Action::tied_grad(s, g));
          break;
        }
}

void add_reduce_grads(Schedule& schedule) {
  WEFT_CHECK(!schedule.reduce_grads, "add_reduce_grads: schedule ", schedule.name, " already reduces gradients");
  const ActionKind last_grad = schedule.split_backward ? ActionKind::kWeight : ActionKind::kBackward;
  for (auto& list : schedule.rank_actions) {
    std::vector<int> last(schedule.num_stages(), -1);  // per stage: index of its last gradient action here
    for (int i = 0; i < static_cast<int>(list.size()); ++i)
      if (list[i].kind == last_grad) last[list[i].stage] = i;
    std::vector<Action> out;
    for (int i = 0; i < static_cast<int>(list.size()); ++i) {
      out.push_back(list[i]);
      if (list[i].kind == last_grad && last[list[i].stage] == i) out.push_back(Action::reduce_grad(list[i].stage));
      if (list[i].kind == ActionKind::kTiedGrad) out.push_back(Action::reduce_tied_grad(list[i].stage, list[i].tie));
    }
    list = std::move(out);
  }
  schedule.reduce_grads = true;
}

std::vector<int> looped_placement(int ranks, int virtual_stages) {
  WEFT_CHECK(ranks > 0 && virtual_stages > 0, "looped_placement needs positive ranks and virtual stages (ranks=", ranks,
             ", virtual_stages=", virtual_stages, ")");
  std::vector<int> out(static_cast<size_t>(ranks) * virtual_stages);
  for (size_t s = 0; s < out.size(); ++s) out[s] = static_cast<int>(s) % ranks;
  return out;
}

std::vector<int> v_placement(int ranks) {
  WEFT_CHECK(ranks > 0, "v_placement needs positive ranks (ranks=", ranks, ")");
  std::vector<int> out(2 * static_cast<size_t>(ranks));
  for (int r = 0; r < ranks; ++r) out[r] = out[2 * ranks - 1 - r] = r;
  return out;
}

Schedule make_empty_schedule(std::string name, int ranks, int microbatches, int virtual_stages, bool split_backward) {
  WEFT_CHECK(ranks > 0, "schedule ", name, ": ranks must be positive (ranks=", ranks, ")");
  WEFT_CHECK(microbatches > 0, "schedule ", name, ": micro-batches must be positive (microbatches=", microbatches, ")");
  WEFT_CHECK(virtual_stages > 0, "schedule ", name,
             ": virtual stages per rank must be positive (virtual=", virtual_stages, ")");
  Schedule s;
  s.name = std::move(name);
  s.num_ranks = ranks;
  s.num_microbatches = microbatches;
  s.virtual_stages = virtual_stages;
  s.split_backward = split_backward;
  s.stage_to_rank = looped_placement(ranks, virtual_stages);
  s.rank_actions.resize(ranks);
  return s;
}

void insert_communication(Schedule& schedule) {
  const int last = schedule.num_stages() - 1;
  for (int r = 0; r < schedule.num_ranks; ++r) {
    std::vector<Action> out;
    for (const Action& a : schedule.rank_actions[r]) {
      WEFT_CHECK(is_compute(a.kind), "insert_communication: schedule ", schedule.name, " rank ", r,
                 " already holds communication action ", to_string(a));
      const int s = a.stage, mb = a.microbatch;
      const int prev_rank = s > 0 ? schedule.rank_of(s - 1) : r;
      const int next_rank = s < last ? schedule.rank_of(s + 1) : r;
      if (a.kind == ActionKind::kForward) {
        if (prev_rank != r) out.push_back(Action::recv_activation(s, mb, prev_rank));
        out.push_back(a);
        if (next_rank != r) out.push_back(Action::send_activation(s, mb, next_rank));
      } else if (a.kind == ActionKind::kBackward) {
        if (next_rank != r) out.push_back(Action::recv_grad(s, mb, next_rank));
        out.push_back(a);
        if (prev_rank != r) out.push_back(Action::send_grad(s, mb, prev_rank));
      } else {
        out.push_back(a);
      }
    }
    schedule.rank_actions[r] = std::move(out);
  }
}

std::string to_string(const Schedule& s) {
  std::ostringstream os;
  os << s.name << ": ranks=" << s.num_ranks << " microbatches=" << s.num_microbatches << " virtual=" << s.virtual_stages
     << " stages=" << s.num_stages() << " backward=" << (s.split_backward ? "split" : "full");
  if (s.num_ranks > 0 && s.stage_to_rank != looped_placement(s.num_ranks, std::max(s.virtual_stages, 1))) {
    if (s.stage_to_rank == v_placement(s.num_ranks)) {
      os << " placement=v";
    } else {
      for (int st = 0; st < s.num_stages(); ++st) os << (st ? "," : " placement=") << s.stage_to_rank[st];
    }
  }
  if (s.reduce_grads) os << " reduce=dp";
  for (size_t g = 0; g < s.tied_stages.size(); ++g) {
    os << (g ? "," : " tied=");
    for (size_t i = 0; i < s.tied_stages[g].size(); ++i) os << (i ? "+" : "") << s.tied_stages[g][i];
  }
  os << '\n';
  for (size_t r = 0; r < s.rank_actions.size(); ++r) os << "rank " << r << ": " << to_string(s.rank_actions[r]) << '\n';
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Schedule& s) { return os << to_string(s); }

CheckpointMode parse_checkpoint_mode(const std::string& name) {
  if (name == "always") return CheckpointMode::kAlways;
  if (name == "except_last") return CheckpointMode::kExceptLast;
  if (name == "never") return CheckpointMode::kNever;
  WEFT_ERROR("checkpoint mode '", name, "' is not one of 'always', 'except_last', 'never'");
}

std::string checkpoint_mode_name(CheckpointMode mode) {
  switch (mode) {
    case CheckpointMode::kAlways: return "always";
    case CheckpointMode::kExceptLast: return "except_last";
    case CheckpointMode::kNever: return "never";
  }
  return "?";
}

int checkpointed_microbatches(CheckpointMode mode, int microbatches) {
  switch (mode) {
    case CheckpointMode::kAlways: return microbatches;
    case CheckpointMode::kExceptLast: return std::max(microbatches - 1, 0);
    case CheckpointMode::kNever: return 0;
  }
  return 0;
}

}  // namespace weft::parallel::pipe
