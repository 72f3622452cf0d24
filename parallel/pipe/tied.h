// Tied parameters across pipeline stages (Note [tied parameters] in
// schedule.h): one parameter used by several stages, a GPT's token embedding
// on the first stage and its output head on the last.
//
// Contract:
// - Declared once, as groups of parameter names as the stages' modules name
//   them (full names, Note [name prefix]): {{"wte.weight", "lm_head.weight"}}.
//   Each stage holds its own tensor for its name (separate processes, or
//   lazily built layers); the group's values must start equal (the user's
//   init, or a load) and stay equal because every holder gets the same summed
//   gradient and applies the same update.
// - TiedParameters(tied, stage_ids, stages, group) is collective over `group`
//   (every rank of the pipeline constructs one, with the same `tied`): it
//   finds each name among this rank's stages and exchanges what it found. An
//   error on every rank names a name that no stage holds, a name claimed by
//   two ranks, members of a group whose shapes differ (names, ranks and
//   shapes), and one tensor object shared by stages on different ranks of one
//   process (threads as ranks would race on its .grad: give each stage its
//   own copy). At most kMaxTiedGroups groups.
// - stages(): per group, the stages holding one of its names, increasing: what
//   add_tied_grads() puts into the schedule.
// - begin_step() remembers each local member's .grad; sum(g) (the TiedGrad
//   action) exchanges this rank's contribution of this step (the sum over its
//   local members of .grad minus the remembered one) with the group's other
//   ranks and sets every local member's .grad to the remembered value plus the
//   sum of all ranks' contributions, added in rank order: bitwise the same on
//   every holder, and gradient accumulation over steps is counted once.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "nn/module.h"
#include "parallel/comm/process_group.h"

namespace weft::parallel::pipe {

class TiedParameters {
 public:
  static constexpr int kMaxTiedGroups = 256;
  // Message tags of the sums: kTagBase + group (below MPI's smallest TAG_UB).
  static constexpr int kTagBase = 32767 - kMaxTiedGroups + 1;

  TiedParameters() = default;
  TiedParameters(const std::vector<std::vector<std::string>>& tied, const std::vector<int>& stage_ids,
                 const std::vector<std::shared_ptr<nn::Module>>& stages, ProcessGroup& group);

  bool empty() const { return groups_.empty(); }
  std::vector<std::vector<int>> stages() const;
  void begin_step();
  // `ranks`: the group's ranks (Schedule::tied_ranks); `device`: where the
  // gradients live; `transfer`: what the messages travel as.
  void sum(int g, ProcessGroup& group, const std::vector<int>& ranks, Device transfer);
  // This rank's members of group g (one per tensor object).
  const std::vector<Tensor>& local(int g) const { return groups_.at(g).local; }

 private:
  struct Group {
    std::vector<std::string> names;
    std::vector<int> stages;       // holding a member, increasing
    std::vector<Tensor> local;     // this rank's members, one per tensor object
    std::vector<Tensor> at_start;  // their .grad at begin_step() (undefined: none)
  };
  std::vector<Group> groups_;
};

}  // namespace weft::parallel::pipe
