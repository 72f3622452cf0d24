// optimizer_update (contract in ddp_optim.h).
#include "parallel/data/ddp_optim.h"

#include <unordered_set>
#include <utility>
#include <vector>

namespace weft::parallel {

ParamUpdateFn optimizer_update(optim::Optimizer& opt) {
  optim::Optimizer* o = &opt;
  return [o](const std::vector<Tensor>& params) {
    std::unordered_set<const TensorImpl*> keep;
    for (const auto& p : params) keep.insert(p.impl());
    std::vector<std::pair<Tensor, Tensor>> hidden;
    for (auto& g : o->param_groups())
      for (auto& p : g.params)
        if (!keep.count(p.impl()) && p.grad().defined()) {
          hidden.emplace_back(p, p.grad());
          p.zero_grad();
        }
    auto restore = [&] {
      for (auto& [p, grad] : hidden) p.set_grad(grad);
    };
    try {
      o->step();
    } catch (...) {
      restore();
      throw;
    }
    restore();
  };
}

}  // namespace weft::parallel
