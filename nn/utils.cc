// parameters_to_vector / vector_to_parameters (contract in nn/utils.h).
#include "nn/utils.h"

#include "core/autograd_meta.h"

namespace weft::nn::utils {

namespace {

// Every parameter defined and on the first one's device.
void check_params(const char* op, const std::vector<Tensor>& ps) {
  for (size_t i = 0; i < ps.size(); ++i) {
    WEFT_CHECK(ps[i].defined(), op, ": parameter ", i, " is undefined");
    WEFT_CHECK(ps[i].device() == ps[0].device(), op, ": found two parameters on different devices (parameter 0 on ",
               ps[0].device(), ", parameter ", i, " on ", ps[i].device(), ")");
  }
}

}  // namespace

Tensor parameters_to_vector(const std::vector<Tensor>& parameters) {
  WEFT_CHECK(!parameters.empty(), "parameters_to_vector: no parameters given");
  check_params("parameters_to_vector", parameters);
  std::vector<Tensor> flat;
  flat.reserve(parameters.size());
  for (const Tensor& p : parameters) flat.push_back(p.reshape({p.numel()}));
  return cat(flat);
}

void vector_to_parameters(const Tensor& vec, const std::vector<Tensor>& parameters) {
  const char* op = "vector_to_parameters";
  WEFT_CHECK(vec.defined() && vec.dim() == 1, op, ": expected a 1-D vector, got ",
             vec.defined() ? "shape " + shape_str(vec.sizes()) : std::string("an undefined tensor"));
  check_params(op, parameters);
  int64_t total = 0;
  for (const Tensor& p : parameters) total += p.numel();
  WEFT_CHECK(vec.numel() == total, op, ": the vector has ", vec.numel(), " elements but the ", parameters.size(),
             " parameters hold ", total);
  WEFT_CHECK(parameters.empty() || vec.device() == parameters[0].device(), op, ": the vector is on ", vec.device(),
             " but the parameters are on ", parameters[0].device());
  NoGradGuard ng;
  int64_t offset = 0;
  for (const Tensor& p : parameters) {
    Tensor dst = p;
    dst.copy_(vec.narrow(0, offset, p.numel()).reshape(p.sizes()));
    dst.bump_version();
    offset += p.numel();
  }
}

}  // namespace weft::nn::utils
