// Tied parameters across pipeline stages (contract in tied.h).
#include "parallel/pipe/tied.h"

#include <unistd.h>

#include <algorithm>
#include <map>
#include <sstream>
#include <utility>

#include "core/error.h"
#include "core/ops.h"
#include "parallel/comm/collectives.h"

namespace weft::parallel::pipe {
namespace {

// Per name, what each rank tells the others: the stage holding it here (-1:
// none), the tensor object's address and this process's id (to find one
// tensor shared by ranks that are threads of one process), and its shape.
constexpr int64_t kMaxShape = 6;
constexpr int64_t kFields = 4 + kMaxShape;  // stage, address, pid, dims, sizes...

// Every parameter of `m` under its full name, shared ones under each of their
// names (Module::named_parameters lists a shared tensor once).
std::vector<std::pair<std::string, Tensor>> every_named_parameter(nn::Module& m) {
  std::vector<std::pair<std::string, Tensor>> out;
  auto modules = m.named_modules();
  for (size_t i = 0; i < modules.size(); ++i)
    for (auto& [n, t] : modules[i].second->named_parameters(/*recurse=*/false))
      out.emplace_back(i == 0 || modules[i].first.empty() ? n : modules[i].first + "." + n, t);
  return out;
}

std::string names_str(const std::vector<std::string>& names) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < names.size(); ++i) os << (i ? ", " : "") << "'" << names[i] << "'";
  os << "]";
  return os.str();
}

Shape row_shape(const int64_t* row) { return Shape(row + 4, row + 4 + row[3]); }

}  // namespace

TiedParameters::TiedParameters(const std::vector<std::vector<std::string>>& tied, const std::vector<int>& stage_ids,
                               const std::vector<std::shared_ptr<nn::Module>>& stages, ProcessGroup& group) {
  if (tied.empty()) return;
  WEFT_CHECK(static_cast<int>(tied.size()) <= kMaxTiedGroups, "tied parameters: ", tied.size(), " groups, at most ",
             kMaxTiedGroups);
  WEFT_CHECK(stage_ids.size() == stages.size(), "tied parameters: ", stage_ids.size(), " stage ids for ", stages.size(),
             " stage modules");
  // This rank's parameters by full name, with the stage holding each.
  std::map<std::string, std::pair<int, Tensor>> here;
  for (size_t i = 0; i < stages.size(); ++i)
    for (auto& [n, t] : every_named_parameter(*stages[i])) here.emplace(n, std::make_pair(stage_ids[i], t));
  std::vector<std::pair<int, std::string>> flat;  // (group, name)
  for (size_t g = 0; g < tied.size(); ++g) {
    WEFT_CHECK(!tied[g].empty(), "tied parameters: group ", g, " has no names");
    for (const auto& n : tied[g]) flat.emplace_back(static_cast<int>(g), n);
  }
  const int64_t k = static_cast<int64_t>(flat.size());
  Tensor mine = full({k, kFields}, int64_t(-1), DType::Int64);  // (names, kFields)
  int64_t* p = mine.data_ptr<int64_t>();
  for (int64_t i = 0; i < k; ++i) {
    auto it = here.find(flat[i].second);
    if (it == here.end()) continue;
    const Tensor& t = it->second.second;
    WEFT_CHECK(t.dim() <= kMaxShape, "tied parameters: '", flat[i].second, "' has ", t.dim(), " dimensions, at most ",
               kMaxShape);
    int64_t* row = p + i * kFields;
    row[0] = it->second.first;
    row[1] = static_cast<int64_t>(reinterpret_cast<intptr_t>(t.impl()));
    row[2] = static_cast<int64_t>(getpid());
    row[3] = t.dim();
    for (int64_t d = 0; d < t.dim(); ++d) row[4 + d] = t.sizes()[d];
  }
  const int n = group.size();
  const std::vector<Tensor> all = allgather_host(group, mine);

  groups_.resize(tied.size());
  for (size_t g = 0; g < tied.size(); ++g) groups_[g].names = tied[g];
  for (int64_t i = 0; i < k; ++i) {
    const auto& [g, name] = flat[i];
    int owner = -1;
    const int64_t* owner_row = nullptr;
    for (int r = 0; r < n; ++r) {
      const int64_t* row = all[r].data_ptr<int64_t>() + i * kFields;
      if (row[0] < 0) continue;
      WEFT_CHECK(owner < 0, "tied parameters: '", name, "' is held by stage ", owner_row ? owner_row[0] : -1,
                 " on rank ", owner, " and by stage ", row[0], " on rank ", r, "; a name belongs to one stage");
      owner = r;
      owner_row = row;
    }
    WEFT_CHECK(owner >= 0, "tied parameters: '", name, "' (group ", g, ": ", names_str(tied[g]),
               ") is a parameter of no stage");
    groups_[g].stages.push_back(static_cast<int>(owner_row[0]));
    // Every member of the group has the first member's shape; no tensor object on two ranks.
    for (int64_t j = 0; j < i; ++j) {
      if (flat[j].first != g) continue;
      int owner_j = -1;
      const int64_t* row_j = nullptr;
      for (int r = 0; r < n && owner_j < 0; ++r) {
        const int64_t* row = all[r].data_ptr<int64_t>() + j * kFields;
        if (row[0] >= 0) owner_j = r, row_j = row;
      }
      WEFT_CHECK(row_shape(row_j) == row_shape(owner_row), "tied parameters: group ", g, ": '", flat[j].second,
                 "' on rank ", owner_j, " has shape ", shape_str(row_shape(row_j)), " but '", name, "' on rank ", owner,
                 " has ", shape_str(row_shape(owner_row)));
      WEFT_CHECK(owner_j == owner || row_j[1] != owner_row[1] || row_j[2] != owner_row[2], "tied parameters: '",
                 flat[j].second, "' on rank ", owner_j, " and '", name, "' on rank ", owner,
                 " are one tensor shared by two ranks of one process; each stage needs its own copy (build the "
                 "model per rank, or from layer factories)");
    }
    if (owner == group.rank()) {
      const Tensor& t = here.at(name).second;
      auto& local = groups_[g].local;
      const bool seen = std::any_of(local.begin(), local.end(), [&](const Tensor& u) { return u.impl() == t.impl(); });
      if (!seen) local.push_back(t);
    }
  }
  for (auto& grp : groups_) {
    std::sort(grp.stages.begin(), grp.stages.end());
    grp.stages.erase(std::unique(grp.stages.begin(), grp.stages.end()), grp.stages.end());
  }
}

std::vector<std::vector<int>> TiedParameters::stages() const {
  std::vector<std::vector<int>> out;
  for (const auto& g : groups_) out.push_back(g.stages);
  return out;
}

void TiedParameters::begin_step() {
  for (auto& g : groups_) {
    g.at_start.clear();
    for (const Tensor& t : g.local) g.at_start.push_back(t.grad().defined() ? t.grad().clone() : Tensor());
  }
}

void TiedParameters::sum(int g, ProcessGroup& group, const std::vector<int>& ranks, Device transfer) {
  Group& grp = groups_.at(g);
  WEFT_INTERNAL_ASSERT(!grp.local.empty() && grp.at_start.size() == grp.local.size(), "tied group ", g,
                       " summed on a rank that holds none of it, or before begin_step()");
  // This rank's contribution of this step.
  Tensor mine;
  for (size_t i = 0; i < grp.local.size(); ++i) {
    const Tensor& t = grp.local[i];
    Tensor d = t.grad().defined() ? t.grad().detach() : zeros_like(t);
    if (grp.at_start[i].defined()) d = sub(d, grp.at_start[i]);
    mine = mine.defined() ? add(mine, d) : d;
  }
  const Device device = mine.device();
  std::vector<Tensor> parts(ranks.size());
  std::vector<P2POp> ops;
  Tensor out = mine.to(transfer).contiguous();
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] == group.rank()) continue;
    parts[i] = weft::empty(mine.sizes(), {mine.dtype(), transfer});
    ops.push_back(P2POp::send(out, ranks[i], kTagBase + g));
    ops.push_back(P2POp::recv(parts[i], ranks[i], kTagBase + g));
  }
  if (!ops.empty()) group.batch_isend_irecv(ops)->wait();
  Tensor total;
  for (size_t i = 0; i < ranks.size(); ++i) {
    Tensor part = ranks[i] == group.rank() ? mine : parts[i].to(device);
    total = total.defined() ? add(total, part) : part;
  }
  for (size_t i = 0; i < grp.local.size(); ++i)
    grp.local[i].set_grad(grp.at_start[i].defined() ? add(grp.at_start[i], total) : total.clone());
}

}  // namespace weft::parallel::pipe
