// Readable printing of tensors, PyTorch-like: "tensor([[1., 2.], ...], dtype=...)".
#include <iomanip>
#include <sstream>

#include "core/autograd_meta.h"
#include "core/ops.h"

namespace weft {
namespace {

void print_rec(std::ostream& os, const Tensor& t, int64_t dim, std::vector<int64_t>& idx, int indent) {
  int64_t n = t.size(dim);
  const int64_t kEdge = 3;
  bool summarize = t.numel() > 1000 && n > 2 * kEdge;
  os << "[";
  for (int64_t i = 0; i < n; ++i) {
    if (summarize && i == kEdge) {
      os << "...";
      i = n - kEdge - 1;
      if (dim + 1 < t.dim()) os << ",\n" << std::string(indent + 1, ' ');
      else os << ", ";
      continue;
    }
    idx[dim] = i;
    if (dim + 1 == t.dim()) {
      Tensor e = t;
      for (int64_t d = static_cast<int64_t>(idx.size()) - 1; d >= 0; --d) e = e.select(d, idx[d]);
      Scalar v = e.item();
      if (is_floating(t.dtype())) os << std::setprecision(4) << v.to_double();
      else os << v;
    } else {
      print_rec(os, t, dim + 1, idx, indent + 1);
    }
    if (i + 1 < n) os << (dim + 1 == t.dim() ? ", " : ",\n" + std::string(indent + 1, ' '));
  }
  os << "]";
}

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  std::ostringstream os;
  os << "tensor(";
  Tensor c = detach();
  if (dim() == 0) {
    Scalar v = c.item();
    os << v;
  } else {
    std::vector<int64_t> idx(dim(), 0);
    if (numel() == 0) os << "[]";
    else print_rec(os, c, 0, idx, 7);
  }
  if (dtype() != DType::Float32 && dtype() != DType::Int64) os << ", dtype=" << dtype();
  if (!device().is_cpu()) os << ", device=" << device();
  if (grad_fn()) os << ", grad_fn=<" << grad_fn()->name() << ">";
  else if (requires_grad()) os << ", requires_grad=true";
  os << ")";
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace weft
