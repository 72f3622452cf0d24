// The MPI backend's shared internals (mpi_common.h): dtype and reduce-op
// mappings, tensor checks, the failure flag.
#include "parallel/comm/mpi/mpi_common.h"

#include <cmath>

#include "core/dispatch.h"
#include "core/dtype.h"
#include "core/half.h"

namespace weft::parallel::detail {

std::atomic<bool>& failure_flag() {
  static std::atomic<bool> f{false};
  return f;
}

std::string mpi_error_string(int rc) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(buf, len);
}

MPI_Datatype mpi_type(DType d) {
  switch (d) {
    case DType::Float32: return MPI_FLOAT;
    case DType::Float64: return MPI_DOUBLE;
    case DType::BFloat16:
    case DType::Float16: return MPI_UINT16_T;
    case DType::Int64: return MPI_INT64_T;
    case DType::Int32: return MPI_INT32_T;
    case DType::UInt8: return MPI_UINT8_T;
    case DType::Bool: return MPI_C_BOOL;
  }
  return MPI_DATATYPE_NULL;
}

namespace {

// float16/bfloat16 reductions: load as float, combine, round back.
template <typename T, int Kind>  // Kind: 0 sum, 1 max, 2 min
void half_reduce(void* in, void* inout, int* len, MPI_Datatype*) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < *len; ++i) {
    float x = static_cast<float>(a[i]), y = static_cast<float>(b[i]);
    float r;
    if constexpr (Kind == 0) r = x + y;
    else if constexpr (Kind == 1) r = (std::isnan(x) || x > y) ? x : y;
    else r = (std::isnan(x) || x < y) ? x : y;
    b[i] = T(r);
  }
}

MPI_Op half_op(DType d, ReduceOp op) {
  static MPI_Op ops[2][3];
  static bool made = false;
  if (!made) {
    MPI_User_function* fns[2][3] = {{half_reduce<BFloat16, 0>, half_reduce<BFloat16, 1>, half_reduce<BFloat16, 2>},
                                    {half_reduce<Half, 0>, half_reduce<Half, 1>, half_reduce<Half, 2>}};
    for (int i = 0; i < 2; ++i)
      for (int k = 0; k < 3; ++k) WEFT_MPI_CHECK(MPI_Op_create(fns[i][k], /*commute=*/1, &ops[i][k]), "mpi");
    made = true;
  }
  int i = d == DType::BFloat16 ? 0 : 1;
  int k = (op == ReduceOp::Max) ? 1 : (op == ReduceOp::Min) ? 2 : 0;
  return ops[i][k];
}

}  // namespace

MPI_Op mpi_op(const char* what, DType d, ReduceOp op) {
  WEFT_CHECK(op != ReduceOp::Avg || is_floating(d), what, ": ReduceOp::avg needs a floating dtype, got ", d);
  if (d == DType::BFloat16 || d == DType::Float16) return half_op(d, op);
  if (d == DType::Bool) return op == ReduceOp::Min ? MPI_LAND : MPI_LOR;
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: return MPI_SUM;
    case ReduceOp::Max: return MPI_MAX;
    case ReduceOp::Min: return MPI_MIN;
  }
  return MPI_OP_NULL;
}

// In place x /= n for a contiguous floating buffer.
void divide_in_place(void* data, int64_t n, DType d, int size) {
  dispatch<kFloatingTypes>(d, "allreduce avg", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = static_cast<T*>(data);
    using M = opmath_t<T>;
    for (int64_t i = 0; i < n; ++i) p[i] = T(static_cast<M>(p[i]) / static_cast<M>(size));
  });
}

void check_tensor(const char* what, const Tensor& t) {
  WEFT_CHECK(t.defined(), what, ": tensor is undefined");
  WEFT_CHECK(t.device().is_cpu(), what, ": the MPI backend takes CPU tensors, got a tensor on ", t.device());
  WEFT_CHECK(t.is_contiguous(), what, ": tensor must be contiguous (shape ", shape_str(t.sizes()), ")");
  WEFT_CHECK(t.numel() <= INT32_MAX, what, ": tensor has ", t.numel(), " elements; at most 2^31-1 per call");
}

std::string describe(const char* what, const Tensor& t) {
  return weft::detail::str_cat(what, "(", t.dtype(), ", ", t.numel(), " elements)");
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace weft::parallel::detail
