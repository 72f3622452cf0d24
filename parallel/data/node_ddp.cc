// NodeDataParallel (contract in node_ddp.h).
#include "parallel/data/node_ddp.h"

#include <sstream>
#include <utility>

#include "core/autograd_meta.h"
#include "parallel/comm/device_group.h"
#include "parallel/comm/rank_agreement.h"
#include "parallel/data/comm_volume.h"

namespace weft::parallel {

NodeDataParallel::NodeDataParallel(std::shared_ptr<nn::Module> module, NodeGroups groups,
                                   NodeDataParallelOptions options)
    : module_(std::move(module)), groups_(std::move(groups)) {
  WEFT_CHECK(module_ != nullptr, "NodeDataParallel: module is null");
  WEFT_CHECK(groups_.world && groups_.node_group && groups_.global_group,
             "NodeDataParallel: the node groups are incomplete (use make_node_groups)");
  WEFT_CHECK(!options.ddp.non_blocking,
             "NodeDataParallel: the node DDP cannot be non-blocking (DASO steps the optimizer itself)");
  bool first = true;
  for (auto& [name, p] : module_->named_parameters()) {
    if (first) device_ = p.device();
    first = false;
    WEFT_CHECK(p.device() == device_, "NodeDataParallel: parameter '", name, "' is on ", p.device(),
               " but the first parameter is on ", device_, "; put the whole module on one device");
  }
  verify_same_state();
  unify_state();
  std::shared_ptr<ProcessGroup> node = groups_.node_group;
  if (!device_.is_cpu()) node = new_device_group(node, device_);
  DDPOptions d = options.ddp;
  d.comm_hook = counting_hook(node_bytes_, d.comm_hook);
  ddp_ = std::make_unique<DistributedDataParallel>(module_, node, std::move(d));
}

void NodeDataParallel::verify_same_state() {
  std::vector<std::string> desc;
  auto add = [&](const char* kind, const std::string& name, const Tensor& t) {
    std::ostringstream os;
    os << kind << " '" << name << "' " << shape_str(t.sizes()) << " " << t.dtype();
    desc.push_back(os.str());
  };
  for (auto& [name, p] : module_->named_parameters()) add("parameter", name, p);
  for (auto& [name, b] : module_->named_buffers()) add("buffer", name, b);
  const auto d = first_disagreement(*groups_.world, desc);
  if (!d) return;
  std::ostringstream os;
  os << "NodeDataParallel: ranks hold different parameters; first mismatch at entry #" << d->index << ":";
  for (size_t r = 0; r < d->entries.size(); ++r) os << (r ? "," : "") << " rank " << r << " has " << d->entries[r];
  WEFT_ERROR(os.str());
}

void NodeDataParallel::unify_state() {
  ProcessGroup& world = *groups_.world;
  if (world.size() == 1) return;
  NoGradGuard ng;
  std::vector<Tensor> targets, wire;  // wire: contiguous CPU tensors broadcast in place
  for (auto& p : module_->parameters()) targets.push_back(p.detach());
  for (auto& b : module_->buffers()) targets.push_back(b.detach());
  for (auto& t : targets) wire.push_back(t.device().is_cpu() && t.is_contiguous() ? t : t.to(kCPU).contiguous());
  std::vector<WorkPtr> works;
  works.reserve(wire.size());
  for (auto& w : wire) works.push_back(world.broadcast(w, BroadcastOptions{0}));
  for (auto& w : works) w->wait();
  for (size_t i = 0; i < targets.size(); ++i) {
    if (!wire[i].is_same(targets[i])) targets[i].copy_(wire[i]);
    targets[i].bump_version();
  }
}

}  // namespace weft::parallel
