// ProcessGroupInProc: ranks as threads, messages through memory. Contract in
// the header; the state and the files' roles in world.h (Note [inproc
// rendezvous]). Here: making worlds and sub-groups, and marking exits.
#include "parallel/comm/inproc/process_group_inproc.h"

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/error.h"
#include "parallel/comm/collectives.h"
#include "parallel/comm/inproc/world.h"

namespace weft::parallel {

using detail::InProcGroup;
using detail::InProcWorld;
using detail::Kind;
using detail::Round;

ProcessGroupInProc::ProcessGroupInProc(std::shared_ptr<InProcWorld> world, std::shared_ptr<InProcGroup> group, int rank)
    : world_(std::move(world)), group_(std::move(group)), rank_(rank) {}

ProcessGroupInProc::~ProcessGroupInProc() = default;

std::vector<std::shared_ptr<ProcessGroupInProc>> ProcessGroupInProc::create_world(int n, Duration timeout) {
  WEFT_CHECK(n >= 1, "ProcessGroupInProc::create_world: need at least one rank, got ", n);
  WEFT_CHECK(timeout > Duration::zero(), "ProcessGroupInProc::create_world: the timeout must be positive, got ",
             timeout.count(), " ms");
  auto world = std::make_shared<InProcWorld>(n);
  auto group = std::make_shared<InProcGroup>();
  group->name = "world";
  for (int r = 0; r < n; ++r) group->global_ranks.push_back(r);
  std::vector<std::shared_ptr<ProcessGroupInProc>> out;
  for (int r = 0; r < n; ++r) {
    out.push_back(std::make_shared<ProcessGroupInProc>(world, group, r));
    out.back()->set_timeout(timeout);
  }
  return out;
}

int ProcessGroupInProc::size() const { return group_->size(); }
const std::vector<int>& ProcessGroupInProc::global_ranks() const { return group_->global_ranks; }
const std::string& ProcessGroupInProc::name() const { return group_->name; }

int64_t ProcessGroupInProc::sequence_number() const {
  std::lock_guard<std::mutex> l(world_->m);
  return seq_;
}

void ProcessGroupInProc::mark_exited(const std::string& reason) {
  {
    std::lock_guard<std::mutex> l(world_->m);
    auto& e = world_->exited[group_->global_ranks[rank_]];
    if (!e) e = reason;
  }
  world_->cv.notify_all();
}

std::shared_ptr<ProcessGroup> ProcessGroupInProc::new_group(const std::vector<int>& ranks) {
  const NewGroupPlan plan = plan_new_group(ranks, rank_, global_ranks(), name());
  Issue is;
  is.kind = Kind::NewGroup;
  is.what = plan.what;
  is.created = std::make_shared<InProcGroup>();
  is.created->global_ranks = plan.global_ranks;
  is.created->name = plan.name;
  std::shared_ptr<Round> r;
  collective(std::move(is), Duration::zero(), &r)->wait();
  if (!plan.member()) return nullptr;
  std::shared_ptr<InProcGroup> sub;
  {
    std::lock_guard<std::mutex> l(world_->m);
    sub = r->created;
  }
  auto pg = std::make_shared<ProcessGroupInProc>(world_, sub, plan.rank);
  pg->set_timeout(timeout_);
  return pg;
}

}  // namespace weft::parallel
