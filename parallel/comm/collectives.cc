// The collective toolkit (contract in collectives.h).
#include "parallel/comm/collectives.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/error.h"
#include "core/ops.h"
#include "parallel/comm/desync.h"

namespace weft::parallel {

Tensor tensor_header(const Tensor& t, const std::string& what) {
  WEFT_CHECK(t.dim() <= kMaxHeaderDims, what, ": a tensor of ", t.dim(), " dimensions ", shape_str(t.sizes()),
             " cannot be sent (at most ", kMaxHeaderDims, ")");
  Tensor h = zeros({kTensorHeaderLen}, DType::Int64);  // (kTensorHeaderLen,)
  int64_t* p = h.data_ptr<int64_t>();
  p[0] = static_cast<int64_t>(t.dtype());
  p[1] = t.dim();
  for (int64_t d = 0; d < t.dim(); ++d) p[2 + d] = t.sizes()[d];
  return h;
}

Tensor empty_for_header(const Tensor& header, const std::string& what, Device device) {
  const int64_t* p = header.data_ptr<int64_t>();
  WEFT_CHECK(p[0] >= 0 && p[0] < kNumDTypes && p[1] >= 0 && p[1] <= kMaxHeaderDims, what,
             ": the tensor header is not one a sender wrote (dtype ", p[0], ", ", p[1], " dimensions)");
  Shape sizes(p + 2, p + 2 + p[1]);
  return empty(sizes, {static_cast<DType>(p[0]), device});
}

Tensor broadcast_tensor(ProcessGroup& group, const Tensor& mine, int root, const std::string& what) {
  const bool sender = group.rank() == root;
  WEFT_CHECK(!sender || mine.defined(), what, ": the root rank ", root, " has no tensor to broadcast");
  const Device dev = group.device();
  Tensor header = (sender ? tensor_header(mine, what) : zeros({kTensorHeaderLen}, DType::Int64)).to(dev);
  group.broadcast(header, {root})->wait();
  Tensor out = sender ? mine.contiguous().to(dev).clone() : empty_for_header(header.cpu(), what, dev);
  group.broadcast(out, {root})->wait();
  return out;
}

std::vector<Tensor> allgather_host(ProcessGroup& group, const Tensor& mine) {
  const Device dev = group.device();
  const Tensor src = mine.contiguous().to(dev);
  std::vector<Tensor> all(group.size());
  for (auto& t : all) t = empty(mine.sizes(), {mine.dtype(), dev});
  group.allgather(all, src)->wait();
  if (dev != kCPU)
    for (auto& t : all) t = t.cpu();
  return all;
}

Tensor allreduce_host(ProcessGroup& group, const Tensor& mine, ReduceOp op) {
  Tensor t = mine.contiguous().to(group.device()).clone();
  group.allreduce(t, {op})->wait();
  return t.cpu();
}

std::vector<std::string> allgather_bytes(ProcessGroup& group, const std::string& mine) {
  const int n = group.size();
  const std::vector<Tensor> lens = allgather_host(group, full({1}, static_cast<int64_t>(mine.size()), DType::Int64));
  int64_t most = 1;  // never an empty tensor, even when every string is empty
  for (auto& l : lens) most = std::max(most, l.item<int64_t>());
  Tensor buf = zeros({most}, DType::UInt8);  // (most,)
  if (!mine.empty()) std::memcpy(buf.data_ptr<uint8_t>(), mine.data(), mine.size());
  const std::vector<Tensor> all = allgather_host(group, buf);
  std::vector<std::string> out;
  for (int r = 0; r < n; ++r)
    out.emplace_back(reinterpret_cast<const char*>(all[r].data_ptr<uint8_t>()),
                     static_cast<size_t>(lens[r].item<int64_t>()));
  return out;
}

std::string combine_errors(const std::vector<std::string>& errors) {
  std::vector<std::pair<std::string, std::vector<int>>> groups;  // message -> ranks, in order of first rank
  for (size_t r = 0; r < errors.size(); ++r) {
    if (errors[r].empty()) continue;
    auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == errors[r]; });
    if (it == groups.end()) groups.push_back({errors[r], {static_cast<int>(r)}});
    else it->second.push_back(static_cast<int>(r));
  }
  std::string msg;
  for (const auto& [text, ranks] : groups) {
    msg += msg.empty() ? "" : "; ";
    msg += ranks.size() == 1 ? "rank " : "ranks ";
    for (size_t i = 0; i < ranks.size(); ++i) msg += (i ? ", " : "") + std::to_string(ranks[i]);
    msg += ": " + text;
  }
  return msg;
}

void agree(ProcessGroup& group, const std::string& what, const std::string& error) {
  const std::string msg = combine_errors(allgather_bytes(group, error));
  WEFT_CHECK(msg.empty(), what, " failed: ", msg);
}

std::string missing_ranks_text(const std::vector<int>& group_ranks, const std::vector<int>& global_ranks) {
  std::vector<int> globals;
  for (int r : group_ranks) globals.push_back(global_ranks.at(r));
  std::string s = "missing ranks: " + ranks_str(globals);
  if (globals != group_ranks) s += " (group ranks " + ranks_str(group_ranks) + ")";
  return s;
}

NewGroupPlan plan_new_group(const std::vector<int>& ranks, int rank, const std::vector<int>& global_ranks,
                            const std::string& group_name, uint64_t group_id) {
  check_new_group_ranks(ranks, static_cast<int>(global_ranks.size()), group_name);
  NewGroupPlan p;
  p.what = "new_group" + ranks_str(ranks);
  p.id = group_id;
  for (int r : ranks) {
    p.global_ranks.push_back(global_ranks[r]);
    p.id = mix_group_id(p.id, uint64_t(global_ranks[r]) + 1);
  }
  p.name = "group" + ranks_str(p.global_ranks);
  auto me = std::find(ranks.begin(), ranks.end(), rank);
  if (me != ranks.end()) p.rank = static_cast<int>(me - ranks.begin());
  return p;
}

}  // namespace weft::parallel
