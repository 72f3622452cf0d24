// The graph's data structures that ops record into: Node, Edge, AutogradMeta,
// SavedTensor, grad mode, and the helpers an op uses to attach its backward.
//
// Contract: core only *records* the graph. Everything that walks it (the engine,
// backward(), end-of-backward callbacks, custom functions, checkpointing,
// gradcheck) lives in //autograd. An op declares its backward next to its
// forward with record_function(...); see core/ops/*.cc.
//
// Note [saved tensors]: a node saves detached aliases of its inputs/outputs
// (same storage, no autograd history), so saving an op's own output makes no
// reference cycle. Each SavedTensor remembers the storage version at save time;
// unpacking after an in-place write is an error naming the node.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/hooks.h"
#include "core/tensor.h"

namespace weft {

using TensorHook = std::function<Tensor(const Tensor&)>;
using PostAccumulateHook = std::function<void(const Tensor&)>;
using TensorHookList = HookList<TensorHook>;

struct Edge {
  std::shared_ptr<Node> node;
  uint32_t input_nr = 0;
  bool valid() const { return node != nullptr; }
};

struct OutputMeta {
  Shape sizes;
  DType dtype = DType::Float32;
  Device device = kCPU;
};

class Node : public std::enable_shared_from_this<Node> {
 public:
  Node();
  // Frees long chains iteratively (Note [iterative node destruction]).
  virtual ~Node();
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;
  // Number of live Nodes in the process (leak tests watch it).
  static int64_t live_count();
  virtual std::string name() const = 0;
  // grads[i] is the gradient w.r.t. forward output i (undefined means zero, and
  // apply() sees zeros of the right shape filled in by the engine). Returns one
  // gradient per next_edges entry (undefined where there is none).
  virtual std::vector<Tensor> apply(std::vector<Tensor>&& grads) = 0;
  // Drops saved tensors once backward is done with this node (retain_graph=false).
  virtual void release_saved() {}
  // Whether apply() may run with grad mode on and build the graph of its own
  // gradients (Note [double backward]). The engine runs a node that says no
  // under NoGradGuard when create_graph is asked for, and gives its results a
  // history that refuses a further backward, naming the node.
  virtual bool supports_double_backward() const { return false; }
  // What that error adds, for a node that could say yes (a custom function).
  virtual std::string double_backward_hint() const { return {}; }

  std::vector<Edge> next_edges;
  std::vector<OutputMeta> outputs;
  // Tensor hooks registered on non-leaf outputs, by output index.
  std::vector<std::shared_ptr<TensorHookList>> pre_hooks;
  // Outputs whose .grad should be kept (retain_grad), by index: weak refs.
  std::vector<std::weak_ptr<TensorImpl>> retained;
  // The engine runs the ready node with the highest sequence number first:
  // creation order for ordinary nodes, so backward follows the reverse of the
  // forward; kMaxSequenceNr for AccumulateGrad (PyTorch's rule), so a leaf's
  // gradient is accumulated, and its post-accumulate hooks fire, as soon as it
  // is complete (Note [parameters first]).
  uint64_t sequence_nr() const { return sequence_nr_; }
  static constexpr uint64_t kMaxSequenceNr = ~uint64_t{0};

 protected:
  explicit Node(uint64_t sequence_nr);

 private:
  uint64_t sequence_nr_;
};

struct AutogradMeta {
  bool requires_grad = false;
  Tensor grad;
  std::shared_ptr<Node> grad_fn;
  int output_nr = 0;
  std::weak_ptr<Node> grad_accumulator;   // leaves only; shared by all uses
  std::shared_ptr<TensorHookList> hooks;  // leaf tensor hooks
  std::shared_ptr<HookList<PostAccumulateHook>> post_accumulate_hooks;
};

// Accumulates into a leaf's .grad, running the leaf's tensor hooks first and its
// post-accumulate hooks after. Holds the leaf strongly: the graph keeps it alive.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf);
  std::string name() const override { return "AccumulateGrad"; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  // apply() without the tensor hooks, for a gradient they already ran on
  // (grad() runs them before it captures: Note [tensor hooks before capture]
  // in autograd/engine.cc).
  void accumulate_hooked(Tensor g);
  const std::shared_ptr<TensorImpl>& leaf() const { return leaf_; }

 private:
  std::shared_ptr<TensorImpl> leaf_;
};

struct CompositeForward;

// A node whose backward is a closure (what record_function creates).
class FunctionNode final : public Node {
 public:
  using Backward = std::function<std::vector<Tensor>(const std::vector<Tensor>& grads)>;
  // `reusable`: the closure saves no tensors, so it is kept after a backward
  // and the node may be backpropagated through again (autocast's cached casts).
  // `differentiable`: the closure is composed of ops that autograd records and
  // reads its saved tensors through SavedTensor::get (Note [double backward]).
  FunctionNode(std::string name, Backward backward, bool reusable = false, bool differentiable = false)
      : name_(std::move(name)), backward_(std::move(backward)), reusable_(reusable), differentiable_(differentiable) {}
  // A fused backward that, under create_graph, is replaced by differentiating
  // `composite`'s forward (Note [composite double backward]); `wrt[j]` is the
  // index, among the composite's inputs, of the tensor edge j is for.
  FunctionNode(std::string name, Backward backward, std::shared_ptr<const CompositeForward> composite,
               std::vector<int> wrt)
      : name_(std::move(name)),
        backward_(std::move(backward)),
        reusable_(false),
        differentiable_(false),
        composite_(std::move(composite)),
        wrt_(std::move(wrt)) {}
  std::string name() const override { return name_; }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override;
  void release_saved() override {
    if (reusable_) return;
    backward_ = nullptr;
    composite_ = nullptr;
  }
  bool supports_double_backward() const override { return differentiable_ || composite_ != nullptr; }

 private:
  std::string name_;
  Backward backward_;
  bool reusable_;
  bool differentiable_;
  std::shared_ptr<const CompositeForward> composite_;
  std::vector<int> wrt_;
};

// ---- the engine seam (Note [backward engine]) ----
// Note [backward engine]: core records the graph but does not walk it. Tensor::
// backward is declared and defined in core; it runs the engine that //autograd
// installs here at static initialisation (autograd/engine.cc; //autograd is
// alwayslink). A binary that links only //core therefore links; calling
// backward() there is an error that says to depend on //autograd. PyTorch's
// ATen reaches its autograd the same way (VariableHooksInterface).
using BackwardEngineFn = void (*)(const Tensor& root, const Tensor& gradient, std::optional<bool> retain_graph,
                                  bool create_graph);
void set_backward_engine(BackwardEngineFn fn);
// The installed engine, or nullptr when //autograd is not linked.
BackwardEngineFn backward_engine();
// autograd::grad(outputs, inputs, grad_outputs, retain_graph = true,
// create_graph = true, allow_unused = true), installed the same way; what a
// node runs to differentiate its composite forward (Note [composite double
// backward]).
using GradEngineFn = std::vector<Tensor> (*)(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                                             const std::vector<Tensor>& grad_outputs);
void set_grad_engine(GradEngineFn fn);
GradEngineFn grad_engine();

// ---- grad mode ----
struct GradMode {
  static bool is_enabled();
  static void set_enabled(bool enabled);
};
class NoGradGuard {
 public:
  NoGradGuard() : prev_(GradMode::is_enabled()) { GradMode::set_enabled(false); }
  ~NoGradGuard() { GradMode::set_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};
class EnableGradGuard {
 public:
  EnableGradGuard() : prev_(GradMode::is_enabled()) { GradMode::set_enabled(true); }
  ~EnableGradGuard() { GradMode::set_enabled(prev_); }

 private:
  bool prev_;
};

// ---- saved tensors (Note [saved tensors]) ----
// Note [double backward]: a backward run with create_graph (autograd::grad or
// backward with create_graph = true) runs each node with grad mode on, so the
// gradients it computes get a history of their own and can be differentiated
// again. That needs two things of a node:
// - its closure uses only ops that autograd records (no raw kernels, no
//   NoGradGuard), which the op declares (record_differentiable, or
//   BackwardPart::differentiable); every other node runs under NoGradGuard and
//   its results get a history that refuses a second backward, naming the node,
//   so a derivative it cannot give is an error, never a silent zero;
// - its saved tensors come back with their history: SavedTensor::get returns,
//   in grad mode, the saved leaf itself, or an alias of a saved result whose
//   grad_fn is the op that made it (for an op's own output saved with
//   SavedTensor::output: the node being run, which the engine names with
//   BackwardNodeGuard).
//   Outside create_graph (grad mode off in backward) get returns the detached
//   alias, as before, and the saved history costs nothing but a reference.
class SavedTensor {
 public:
  SavedTensor() = default;
  SavedTensor(const Tensor& t);  // NOLINT(google-explicit-constructor)
  // An op's own result, `output_nr` among the op's outputs; saved before the
  // op records its node (Note [double backward]).
  static SavedTensor output(const Tensor& t, int output_nr = 0);
  // A copy of `t`'s current value with `t`'s history: what an in-place op
  // saves of the value it overwrites (Note [double backward]).
  static SavedTensor copy_of(const Tensor& t);
  // Returns the saved value; errors if it was modified in place since saving.
  // In grad mode, with its history (Note [double backward]).
  Tensor get(const std::string& node_name) const;
  bool defined() const { return data_.defined(); }

 private:
  Tensor data_;
  uint64_t version_ = 0;
  // The history (Note [double backward]), held weakly: the recording node's
  // edges keep it alive as long as the node lives, and a saved tensor never
  // keeps its own node alive (an in-place op saves its result after recording).
  std::weak_ptr<Node> grad_fn_;     // a saved result of another op
  std::weak_ptr<TensorImpl> leaf_;  // a saved leaf that requires grad
  int output_nr_ = -1;              // grad_fn_'s output, or this op's own (is_output_)
  bool is_leaf_ = false;
  bool is_output_ = false;
  // copy_of: the history held strongly; an in-place op on a view replaces
  // the view's node, which nothing else may hold. It is older than the node
  // that saves it, so this makes no cycle.
  std::shared_ptr<Node> hold_;
};

// Note [composite double backward]: an op whose backward is a fused kernel can
// still be differentiated twice when it also gives its forward written with
// ops that autograd records (a Composite, built of the ops of Note [double
// backward]). Its node keeps the op's inputs as SavedTensors, so with their
// history. Run under create_graph, the node rebuilds that forward from them,
// each input it owes a gradient to seen through an alias of its own (so a
// tensor passed twice gets both terms), and differentiates it with the engine
// (GradEngineFn), create_graph on, in place of the kernel: the results' graph
// reaches the op's inputs and the incoming gradients. Outside create_graph the
// kernel runs as before; the recomputation costs one more forward, and only in
// a create_graph backward.
using Composite = std::function<std::vector<Tensor>(const std::vector<Tensor>& inputs)>;
struct CompositeForward {
  Composite forward;                // the op's outputs from `inputs` (undefined where not given)
  std::vector<SavedTensor> inputs;  // the op's inputs, with their history
};

// The node whose apply() the engine runs on this thread (for SavedTensor::output
// in grad mode); nullptr outside backward.
Node* current_backward_node();
class BackwardNodeGuard {
 public:
  explicit BackwardNodeGuard(Node* node);
  ~BackwardNodeGuard();
  BackwardNodeGuard(const BackwardNodeGuard&) = delete;
  BackwardNodeGuard& operator=(const BackwardNodeGuard&) = delete;

 private:
  Node* prev_;
};

// ---- recording helpers used by ops ----
// Note [views after an in-place op]: a base and its views share memory, so
// autograd gives them one history, as PyTorch does.
// - A view remembers its root, the tensor that is not a view whose memory it
//   shows (TensorImpl::view_root), when made with grad mode on from any tensor
//   but a detached alias, or with grad mode off from a root that requires grad.
// - An in-place op on a view, with autograd recording it, becomes the root's
//   new history: a CopySlices node whose backward takes the root's gradient,
//   runs the op's backward on the view's part of it and writes the result
//   back there, and passes the rest through unchanged.
// - The storage counts such in-place ops (StorageImpl::autograd_writes); each
//   tensor remembers the count as of when its history last described its
//   data. A view whose count is behind (the root, or another view of it,
//   changed in place since) is given the history "this part of the root"
//   (AsStridedBackward) when it is next used or asked for its grad_fn; one
//   made with grad mode off is given none, as when it was made.
// - Refused, naming the op: an in-place op on a view of a leaf that requires
//   grad; one that autograd records on a view made with grad mode off; one
//   that autograd records on a view in which elements share memory (expand).
// - A tensor whose history cannot be re-derived is an error when used in grad
//   mode: a leaf view, or memory changed through an alias that is not a view
//   of a root inside autograd (a detached alias written with autograd on).
// In-place ops under NoGradGuard (optimizer steps) and detached aliases do not
// count; saved tensors still check their version (Note [saved tensors]).
//
// Brings a stale view's history up to date (above); an error naming `op`
// where that cannot be done.
void check_not_stale(const Tensor& t, const char* op = "autograd");
// The same without the error: a tensor whose history cannot be re-derived is
// left as it is. Tensor::requires_grad(), grad_fn() and make_view call it.
void refresh_history(const Tensor& t);
// True when grad mode is on and any input requires grad (after check_not_stale).
bool any_requires_grad(std::initializer_list<Tensor> inputs);
bool any_requires_grad(const std::vector<Tensor>& inputs);
// The edge a gradient for `t` flows into (grad_fn, or the leaf's accumulator).
Edge gradient_edge(const Tensor& t);
// Makes `outputs` results of `node`: sets grad_fn/output_nr and the node's output metadata.
void set_history(const std::vector<Tensor>& outputs, const std::shared_ptr<Node>& node);
// Declares the backward of an op producing `outputs` from `inputs`. `backward`
// receives one gradient per output (zeros filled in where unused) and returns one
// per input (undefined where the input needs none). No-op unless grad is needed.
// `reusable` as in FunctionNode (only for closures that save no tensors).
void record_function(const char* name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                     FunctionNode::Backward backward, bool reusable = false);
// record_function for an op whose fused `backward` has a composite forward
// (Note [composite double backward]): `composite` maps `inputs` to `outputs`.
void record_function(const char* name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                     FunctionNode::Backward backward, Composite composite);
// record_function for a backward that can itself be differentiated: `backward`
// is composed of ops that autograd records and reads saved tensors through
// SavedTensor (Note [double backward]); `reusable` as in FunctionNode.
void record_differentiable(const char* name, const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                           FunctionNode::Backward backward, bool reusable = false);
// One side of an op's backward for record_function_parts: a node named `name`
// with edges to `inputs`, returning one gradient per input; `differentiable`
// as for record_differentiable.
struct BackwardPart {
  const char* name;
  std::vector<Tensor> inputs;
  FunctionNode::Backward backward;
  bool differentiable = false;
  // With a composite given to record_function_parts: for each of `inputs`,
  // its index among the composite's inputs.
  std::vector<int> composite_wrt = {};
};
// Note [parameters first]: records `output`'s backward as two nodes that both
// receive its gradient, where the engine runs `first` before `second`. Ops with
// parameters (linear, conv2d) put the parameter gradients in `first` and the
// input gradient in `second`: the parameters' gradients are accumulated, and
// their post-accumulate hooks fire (data parallel launches its allreduce there),
// before the input-gradient kernel runs, so communication overlaps it. A part
// whose inputs need no grad is dropped; with one part left, that node is the
// grad_fn. No-op unless grad is needed.
// With `composite` (and the op's `composite_inputs`), both parts are
// differentiated through it under create_graph (Note [composite double
// backward]).
void record_function_parts(const char* name, const Tensor& output, BackwardPart first, BackwardPart second,
                           const std::vector<Tensor>& composite_inputs = {}, Composite composite = nullptr);
// Rejects, before the op writes, an in-place op that autograd would record
// (grad mode on, and `self` or one of `others` requires grad) but cannot
// honour: on a leaf that requires grad, or on a view that Note [views after an
// in-place op] refuses. Names the op.
void check_inplace(const char* op, const Tensor& self, std::initializer_list<Tensor> others = {});
// After an in-place op on `self`: bump the version and, if grad is needed, chain
// `self`'s history through a node named `name` (for a view, its root's history
// through CopySlices: Note [views after an in-place op]). `differentiable` as
// for record_differentiable: the old value of `self` is then saved with
// SavedTensor::copy_of, and the result with SavedTensor::output.
void record_inplace(const char* name, Tensor& self, const std::vector<Tensor>& other_inputs,
                    FunctionNode::Backward backward, bool differentiable = false);

}  // namespace weft
