// lstm_cell: one LSTM step's element-wise part (contract in core/nn_ops.h).
//
// The fused CPU kernels make one pass over the N x H units per step, forward
// and backward, where the composition is eleven element-wise ops and their
// backward nodes: at the sizes of a recurrent layer (a few thousand units per
// step) each op's cost is mostly the threads' wake-up, so one pass is the
// saving. The arithmetic is the composition's (sigmoid as 1 / (1 + exp(-x)),
// tanh and exp from core/cpu/vec_math.h), so both give the same values to a
// few ulp; devices or dtypes without the kernels run the composition.
#include "core/autograd_meta.h"
#include "core/cpu/vec_math.h"
#include "core/kernels/rnn.h"
#include "core/nn_ops.h"
#include "core/ops.h"
#include "core/parallel.h"

namespace weft {

LstmCellKernel& lstm_cell_table() {
  static LstmCellKernel t("lstm_cell");
  return t;
}
LstmCellBackwardKernel& lstm_cell_backward_table() {
  static LstmCellBackwardKernel t("lstm_cell_backward");
  return t;
}

namespace {

// Rows per parallel chunk: about kGrainSize units, so a small step stays on one thread.
int64_t row_grain(int64_t H) { return std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, 4 * H)); }

template <typename T>
T sigmoid_of(T x) {
  return T(1) / (T(1) + cpu::vmath::exp(-x));
}

// One row, as short loops the compiler vectorises (the operands do not
// overlap: restrict): the sigmoid gates i, f (adjacent) and o, the tanh gate g,
// then the states.
template <typename T>
void lstm_cell_row(int64_t H, const T* __restrict x, const T* __restrict h, const T* __restrict c, T* __restrict a,
                   T* __restrict c2, T* __restrict tc, T* __restrict h2) {
  for (int64_t j = 0; j < 2 * H; ++j) a[j] = sigmoid_of(x[j] + h[j]);
  for (int64_t j = 3 * H; j < 4 * H; ++j) a[j] = sigmoid_of(x[j] + h[j]);
  for (int64_t j = 2 * H; j < 3 * H; ++j) a[j] = cpu::vmath::tanh(x[j] + h[j]);
  for (int64_t j = 0; j < H; ++j) {
    const T cn = a[H + j] * c[j] + a[j] * a[2 * H + j];
    const T t = cpu::vmath::tanh(cn);
    c2[j] = cn;
    tc[j] = t;
    h2[j] = a[3 * H + j] * t;
  }
}

template <typename T>
void lstm_cell_cpu(const Tensor& xg, const Tensor& hg, const Tensor& c, const Tensor& h2, const Tensor& c2,
                   const Tensor& acts, const Tensor& tc) {
  const int64_t N = c.size(0), H = c.size(1);
  const T *px = xg.data_ptr<T>(), *ph = hg.data_ptr<T>(), *pc = c.data_ptr<T>();
  T *ph2 = h2.data_ptr<T>(), *pc2 = c2.data_ptr<T>(), *pa = acts.data_ptr<T>(), *ptc = tc.data_ptr<T>();
  parallel_for(0, N, row_grain(H), [&](int64_t r0, int64_t r1) {
    for (int64_t n = r0; n < r1; ++n)
      lstm_cell_row(H, px + n * 4 * H, ph + n * 4 * H, pc + n * H, pa + n * 4 * H, pc2 + n * H, ptc + n * H,
                    ph2 + n * H);
  });
}

template <typename T>
void lstm_cell_backward_row(int64_t H, const T* __restrict dh2, const T* __restrict dc2, const T* __restrict a,
                            const T* __restrict c, const T* __restrict tc, T* __restrict dg, T* __restrict dc) {
  for (int64_t j = 0; j < H; ++j) {
    const T i = a[j], f = a[H + j], g = a[2 * H + j], o = a[3 * H + j], t = tc[j];
    const T dh = dh2[j];
    // h2 = o tanh(c2): dc2 gains dh o (1 - tanh^2)
    const T dcn = dc2[j] + dh * o * (T(1) - t * t);
    dg[j] = dcn * g * i * (T(1) - i);          // i
    dg[H + j] = dcn * c[j] * f * (T(1) - f);   // f
    dg[2 * H + j] = dcn * i * (T(1) - g * g);  // g
    dg[3 * H + j] = dh * t * o * (T(1) - o);   // o
    dc[j] = dcn * f;
  }
}

template <typename T>
void lstm_cell_backward_cpu(const Tensor& dh2, const Tensor& dc2, const Tensor& acts, const Tensor& c, const Tensor& tc,
                            const Tensor& dgates, const Tensor& dc) {
  const int64_t N = c.size(0), H = c.size(1);
  const T *pdh = dh2.data_ptr<T>(), *pdc2 = dc2.data_ptr<T>(), *pa = acts.data_ptr<T>(), *pc = c.data_ptr<T>();
  const T* ptc = tc.data_ptr<T>();
  T *pdg = dgates.data_ptr<T>(), *pdc = dc.data_ptr<T>();
  parallel_for(0, N, row_grain(H), [&](int64_t r0, int64_t r1) {
    for (int64_t n = r0; n < r1; ++n)
      lstm_cell_backward_row(H, pdh + n * H, pdc2 + n * H, pa + n * 4 * H, pc + n * H, ptc + n * H, pdg + n * 4 * H,
                             pdc + n * H);
  });
}

// The composition: what the kernels compute, from the element-wise ops.
std::pair<Tensor, Tensor> lstm_cell_composed(const Tensor& xg, const Tensor& hg, const Tensor& c) {
  std::vector<Tensor> g = chunk(xg + hg, 4, 1);  // i, f, g, o: (N, H) each
  Tensor c2 = sigmoid(g[1]) * c + sigmoid(g[0]) * weft::tanh(g[2]);
  Tensor h2 = sigmoid(g[3]) * weft::tanh(c2);
  return {h2, c2};
}

// The gates' slopes from their activations a (N, 4H: i, f | g | o):
// sigmoid' = a (1 - a), tanh' = 1 - a^2.
Tensor gate_slopes(const Tensor& a, int64_t H) {
  Tensor s_if = narrow(a, 1, 0, 2 * H), t = narrow(a, 1, 2 * H, H), s_o = narrow(a, 1, 3 * H, H);
  return cat({s_if * (1.0 - s_if), 1.0 - t * t, s_o * (1.0 - s_o)}, 1);
}

// Note [double backward]: the gate activations (N, 4H) as a recorded result
// of xg + hg, given their saved value: their derivative, sigmoid' = a (1 - a)
// and tanh' = 1 - a^2, needs only the activations, so neither xg nor hg is
// kept for it. `edges` are the cell node's edges to xg and hg.
Tensor recorded_gates(const Tensor& acts, const std::vector<Edge>& edges, int64_t H) {
  Tensor a = acts.detach();
  SavedTensor self = SavedTensor::output(a);
  auto node = std::make_shared<FunctionNode>(
      "LstmGatesBackward",
      [self, H](const std::vector<Tensor>& g) {
        Tensor ds = g[0] * gate_slopes(self.get("LstmGatesBackward"), H);
        return std::vector<Tensor>{ds, ds};
      },
      /*reusable=*/false, /*differentiable=*/true);
  node->next_edges = {edges[0], edges[1]};
  set_history({a}, node);
  return a;
}

// The cell's backward from recorded ops, for a backward that builds a graph:
// the kernel's formulas on the gate activations with their history.
std::vector<Tensor> lstm_cell_backward_composed(const Tensor& dh, const Tensor& dc2, const Tensor& acts,
                                                const Tensor& c) {
  const int64_t H = c.size(1);
  Node* cell = current_backward_node();  // the engine runs the cell's node
  WEFT_INTERNAL_ASSERT(cell != nullptr);
  Tensor a = recorded_gates(acts, cell->next_edges, H);
  Tensor i = narrow(a, 1, 0, H), f = narrow(a, 1, H, H), g = narrow(a, 1, 2 * H, H), o = narrow(a, 1, 3 * H, H);
  Tensor tc = weft::tanh(f * c + i * g);
  Tensor dct = dc2 + dh * o * (1.0 - tc * tc);
  Tensor dacts = cat({dct * g, dct * c, dct * i, dh * tc}, 1);  // (N, 4H)
  Tensor dgates = dacts * gate_slopes(a, H);
  return {dgates, dgates, dct * f};
}

}  // namespace

std::pair<Tensor, Tensor> lstm_cell(const Tensor& xg, const Tensor& hg, const Tensor& c) {
  const char* op = "lstm_cell";
  WEFT_CHECK(xg.defined() && hg.defined() && c.defined(), op, ": xg, hg and c must be defined");
  WEFT_CHECK(c.dim() == 2, op, ": expected c of shape (N, H), got ", shape_str(c.sizes()));
  const int64_t N = c.size(0), H = c.size(1);
  const Shape gates{N, 4 * H};
  WEFT_CHECK(xg.sizes() == gates && hg.sizes() == gates, op, ": expected xg and hg of shape ", shape_str(gates),
             " for c of shape ", shape_str(c.sizes()), ", got ", shape_str(xg.sizes()), " and ", shape_str(hg.sizes()));
  const DType dt = c.dtype();
  WEFT_CHECK(xg.dtype() == dt && hg.dtype() == dt, op, ": xg, hg and c must have one dtype, got ", xg.dtype(), ", ",
             hg.dtype(), " and ", c.dtype());
  WEFT_CHECK(xg.device() == c.device() && hg.device() == c.device(), op, ": xg, hg and c are on different devices");
  const DeviceType dev = c.device().type;
  if (!lstm_cell_table().has(dev, dt) || !lstm_cell_backward_table().has(dev, dt)) return lstm_cell_composed(xg, hg, c);

  const Tensor x = xg.detach().contiguous(), h = hg.detach().contiguous(), cc = c.detach().contiguous();
  Tensor h2 = empty({N, H}, c.options()), c2 = empty({N, H}, c.options());
  Tensor acts = empty(gates, c.options()), tc = empty({N, H}, c.options());
  lstm_cell_table()(c.device(), dt, x, h, cc, h2, c2, acts, tc);
  if (any_requires_grad({xg, hg, c})) {
    SavedTensor sa(acts), sc(c), stc(tc);
    record_differentiable("LstmCellBackward", {xg, hg, c}, {h2, c2}, [=](const std::vector<Tensor>& grads) {
      if (GradMode::is_enabled())  // Note [double backward]
        return lstm_cell_backward_composed(grads[0], grads[1], sa.get("LstmCellBackward"), sc.get("LstmCellBackward"));
      const Tensor a = sa.get("LstmCellBackward"), c0 = sc.get("LstmCellBackward").contiguous();
      Tensor dgates = empty(a.sizes(), a.options()), dc = empty(c0.sizes(), c0.options());
      lstm_cell_backward_table()(a.device(), a.dtype(), grads[0].contiguous(), grads[1].contiguous(), a, c0,
                                 stc.get("LstmCellBackward"), dgates, dc);
      return std::vector<Tensor>{dgates, dgates, dc};
    });
  }
  return {h2, c2};
}

template <typename T>
void register_lstm_cell_cpu() {
  lstm_cell_table().set(DeviceType::CPU, dtype_of<T>, &lstm_cell_cpu<T>);
  lstm_cell_backward_table().set(DeviceType::CPU, dtype_of<T>, &lstm_cell_backward_cpu<T>);
}
static detail::Registrar lstm_cell_cpu_kernels([] {
  register_lstm_cell_cpu<float>();
  register_lstm_cell_cpu<double>();
});

}  // namespace weft
