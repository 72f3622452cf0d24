// Per-layer profiling and its broadcast (contract in profile.h).
//
// Note [profile rounds]: the children are timed in rounds (each round times
// every child once, in order) rather than child by child, so a change in the
// machine's load during profiling (other processes, CPU frequency) spreads
// over all children's samples instead of skewing the ones measured during it;
// the medians then compare children under the same conditions.
#include "parallel/partition/profile.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "autograd/engine.h"
#include "core/autograd_meta.h"
#include "core/error.h"
#include "core/ops.h"
#include "core/rng.h"

namespace weft::parallel::partition {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// Waits for the device that holds `t` (a CPU tensor is ready already).
void wait_device(const Tensor& t) {
  if (t.defined() && t.device().type != DeviceType::CPU && t.numel() > 0)
    (void)t.detach().flatten().narrow(0, 0, 1).cpu();
}

int64_t bytes_of(const nn::Tensors& ts) {
  int64_t n = 0;
  for (const Tensor& t : ts)
    if (t.defined()) n += static_cast<int64_t>(t.nbytes());
  return n;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : (v[h - 1] + v[h]) / 2;
}

// Sets the model's parameter gradients aside for the profile and puts them
// back afterwards (also when profiling throws).
class GradStash {
 public:
  explicit GradStash(const nn::Module& model) : params_(model.parameters()) {
    for (const Tensor& p : params_) {
      grads_.push_back(p.grad());
      p.zero_grad();
    }
  }
  ~GradStash() {
    for (size_t i = 0; i < params_.size(); ++i) {
      if (grads_[i].defined()) params_[i].set_grad(grads_[i]);
      else params_[i].zero_grad();
    }
  }
  GradStash(const GradStash&) = delete;
  GradStash& operator=(const GradStash&) = delete;

 private:
  std::vector<Tensor> params_, grads_;
};

// One timed forward and backward of `layer` on `in`; returns the outputs and
// adds the two times to `fw` and `bw` when `record`.
nn::Tensors run_layer(nn::Module& layer, const nn::Tensors& in, bool record, std::vector<double>& fw,
                      std::vector<double>& bw) {
  for (const Tensor& t : in)
    if (t.requires_grad()) t.zero_grad();
  const auto t0 = Clock::now();
  nn::Tensors out = layer(in);
  for (const Tensor& o : out) wait_device(o);
  const auto t1 = Clock::now();
  std::vector<Tensor> roots, grads;
  for (const Tensor& o : out) {
    if (o.defined() && o.requires_grad()) {
      roots.push_back(o);
      grads.push_back(ones_like(o));
    }
  }
  const auto t2 = Clock::now();
  if (!roots.empty()) {
    autograd::backward(roots, grads);
    Tensor landed;
    for (const Tensor& t : in)
      if (!landed.defined() && t.requires_grad()) landed = t.grad();
    for (const Tensor& p : layer.parameters())
      if (!landed.defined() && p.requires_grad()) landed = p.grad();
    wait_device(landed);
  }
  const auto t3 = Clock::now();
  if (record) {
    fw.push_back(seconds(t0, t1));
    bw.push_back(roots.empty() ? 0.0 : seconds(t2, t3));
  }
  return out;
}

// The byte counts of Contract "Bytes" (profile.h).
void count_bytes(const nn::Module& layer, const nn::Tensors& in, const nn::Tensors& out, const ProfileOptions& options,
                 LayerProfile& lp) {
  for (const Tensor& p : layer.parameters()) {
    lp.num_parameters += p.numel();
    lp.param_bytes += static_cast<int64_t>(p.nbytes());
    if (p.requires_grad()) lp.grad_bytes += static_cast<int64_t>(p.nbytes());
  }
  lp.optimizer_state_bytes = std::llround(options.optimizer_state_factor * static_cast<double>(lp.grad_bytes));
  for (const Tensor& b : layer.buffers()) lp.buffer_bytes += static_cast<int64_t>(b.nbytes());
  lp.output_bytes = bytes_of(out);
  lp.activation_bytes = bytes_of(in) + lp.output_bytes;
}

}  // namespace

std::vector<LayerProfile> profile_layers(nn::Sequential& model, const nn::Tensors& sample,
                                         const ProfileOptions& options) {
  WEFT_CHECK(options.repeats >= 1 && options.warmup >= 0, "profile_layers: repeats (", options.repeats,
             ") must be positive and warmup (", options.warmup, ") non-negative");
  WEFT_CHECK(std::isfinite(options.optimizer_state_factor) && options.optimizer_state_factor >= 0,
             "profile_layers: optimizer_state_factor ", options.optimizer_state_factor,
             " must be finite and non-negative");
  WEFT_CHECK(model.size() > 0, "profile_layers: the model has no layers");
  WEFT_CHECK(!sample.empty(), "profile_layers: the sample has no tensors");
  for (size_t i = 0; i < sample.size(); ++i)
    WEFT_CHECK(sample[i].defined(), "profile_layers: sample tensor ", i, " is undefined");

  const RngStateGuard rng;  // dropout draws leave training's stream where it was
  const GradStash stash(model);
  const EnableGradGuard grad_mode;
  const auto children = model.named_children();
  const size_t n = children.size();
  // Round 0 runs the chain once and keeps each child's input; every round then
  // times every child in order (Note [profile rounds]).
  std::vector<nn::Tensors> inputs(n);
  std::vector<std::vector<double>> fw(n), bw(n);
  std::vector<LayerProfile> profile(n);
  nn::Tensors current = sample;
  for (int round = 0; round < options.warmup + options.repeats; ++round) {
    const bool record = round >= options.warmup;
    for (size_t k = 0; k < n; ++k) {
      nn::Module& layer = *children[k].second;
      if (round == 0) {
        for (const Tensor& t : current) {
          Tensor d = t.defined() ? t.detach() : Tensor();
          if (d.defined() && d.is_floating_point() && (k > 0 || t.requires_grad())) d.requires_grad_(true);
          inputs[k].push_back(d);
        }
        const nn::Tensors out = run_layer(layer, inputs[k], record, fw[k], bw[k]);
        profile[k].name = children[k].first;
        profile[k].type = layer.type_name();
        count_bytes(layer, inputs[k], out, options, profile[k]);
        current.clear();
        for (const Tensor& o : out) current.push_back(o.defined() ? o.detach() : Tensor());
      } else {
        run_layer(layer, inputs[k], record, fw[k], bw[k]);
      }
    }
  }
  for (size_t k = 0; k < n; ++k) {
    profile[k].forward_s = median(fw[k]);
    profile[k].backward_s = median(bw[k]);
  }
  return profile;
}

std::vector<LayerProfile> profile_layers(nn::Sequential& model, const Tensor& sample, const ProfileOptions& options) {
  return profile_layers(model, nn::Tensors{sample}, options);
}

std::vector<LayerProfile> broadcast_profile(const std::vector<LayerProfile>& profile, ProcessGroup& group, int root) {
  WEFT_CHECK(root >= 0 && root < group.size(), "broadcast_profile: root ", root, " is not a rank of a group of ",
             group.size());
  const bool me = group.rank() == root;
  constexpr int kInts = 9;
  // {layers, characters of all names and types}
  std::vector<int64_t> header = {0, 0};
  if (me) {
    header[0] = static_cast<int64_t>(profile.size());
    for (const LayerProfile& l : profile) header[1] += static_cast<int64_t>(l.name.size() + l.type.size());
  }
  Tensor header_t = tensor(header, {2});
  group.broadcast(header_t, {root})->wait();
  const int64_t n = header_t.data_ptr<int64_t>()[0], chars = header_t.data_ptr<int64_t>()[1];

  std::vector<int64_t> ints(static_cast<size_t>(n * kInts), 0);
  std::vector<double> times(static_cast<size_t>(n * 2), 0.0);
  std::vector<uint8_t> text(static_cast<size_t>(std::max<int64_t>(chars, 1)), 0);
  if (me) {
    size_t c = 0;
    for (int64_t k = 0; k < n; ++k) {
      const LayerProfile& l = profile[k];
      const int64_t v[kInts] = {l.num_parameters,
                                l.param_bytes,
                                l.grad_bytes,
                                l.optimizer_state_bytes,
                                l.buffer_bytes,
                                l.activation_bytes,
                                l.output_bytes,
                                static_cast<int64_t>(l.name.size()),
                                static_cast<int64_t>(l.type.size())};
      std::copy(v, v + kInts, ints.begin() + k * kInts);
      times[k * 2] = l.forward_s;
      times[k * 2 + 1] = l.backward_s;
      for (char ch : l.name + l.type) text[c++] = static_cast<uint8_t>(ch);
    }
  }
  Tensor ints_t = tensor(ints, {static_cast<int64_t>(ints.size())});
  Tensor times_t = tensor(times, {static_cast<int64_t>(times.size())});
  Tensor text_t = tensor(text, {static_cast<int64_t>(text.size())});
  if (n > 0) {
    group.broadcast(ints_t, {root})->wait();
    group.broadcast(times_t, {root})->wait();
  }
  group.broadcast(text_t, {root})->wait();

  const int64_t* iv = ints_t.data_ptr<int64_t>();
  const double* tv = times_t.data_ptr<double>();
  const uint8_t* cv = text_t.data_ptr<uint8_t>();
  std::vector<LayerProfile> out(static_cast<size_t>(n));
  size_t c = 0;
  for (int64_t k = 0; k < n; ++k) {
    LayerProfile& l = out[k];
    const int64_t* v = iv + k * kInts;
    l.num_parameters = v[0];
    l.param_bytes = v[1];
    l.grad_bytes = v[2];
    l.optimizer_state_bytes = v[3];
    l.buffer_bytes = v[4];
    l.activation_bytes = v[5];
    l.output_bytes = v[6];
    l.name.assign(reinterpret_cast<const char*>(cv + c), static_cast<size_t>(v[7]));
    c += static_cast<size_t>(v[7]);
    l.type.assign(reinterpret_cast<const char*>(cv + c), static_cast<size_t>(v[8]));
    c += static_cast<size_t>(v[8]);
    l.forward_s = tv[k * 2];
    l.backward_s = tv[k * 2 + 1];
  }
  return out;
}

std::vector<LayerProfile> profile_on_root(nn::Sequential& model, const nn::Tensors& sample, ProcessGroup& group,
                                          int root, const ProfileOptions& options) {
  WEFT_CHECK(root >= 0 && root < group.size(), "profile_on_root: root ", root, " is not a rank of a group of ",
             group.size());
  std::vector<LayerProfile> mine;
  if (group.rank() == root) mine = profile_layers(model, sample, options);
  return broadcast_profile(mine, group, root);
}

}  // namespace weft::parallel::partition
