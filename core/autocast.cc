// Autocast state and casts (see autocast.h for the contract).
#include "core/autocast.h"

#include <array>
#include <map>
#include <utility>

#include "core/autograd_meta.h"
#include "core/error.h"
#include "core/kernels/copy.h"
#include "core/ops.h"

namespace weft {
namespace {

struct State {
  bool enabled = false;
  DType dtype = DType::BFloat16;
};

std::array<State, kNumDeviceTypes>& states() {
  thread_local std::array<State, kNumDeviceTypes> s{};
  return s;
}

bool eligible_for_lower(DType d) { return d == DType::Float32 || d == DType::Float16 || d == DType::BFloat16; }

// The cast cache: parameter (by its TensorImpl) and target dtype -> the cast,
// with the parameter (kept alive, so its address is not reused) and its
// version when cast. `holders`: enabled guards and CastCacheScopes alive.
struct CachedCast {
  Tensor source;
  uint64_t version;
  Tensor cast;
};
struct Cache {
  std::map<std::pair<const TensorImpl*, DType>, CachedCast> entries;
  int holders = 0;
};
Cache& cache() {
  thread_local Cache c;
  return c;
}
void hold() { ++cache().holders; }
void release() {
  Cache& c = cache();
  if (--c.holders == 0) c.entries.clear();
}

// to_dtype whose node is reusable (FunctionNode): it saves nothing.
Tensor cast_for_cache(const Tensor& t, DType dtype) {
  Tensor out = empty(t.sizes(), {dtype, t.device()});
  copy_table()(t.device(), dtype, out, t.detach());
  const DType src = t.dtype();
  record_differentiable(
      "ToCopyBackward", {t}, {out}, [src](const std::vector<Tensor>& g) { return std::vector<Tensor>{g[0].to(src)}; },
      /*reusable=*/true);
  return out;
}

}  // namespace

AutocastGuard::AutocastGuard(DeviceType device, DType dtype, bool enabled) : device_(device) {
  WEFT_CHECK(dtype == DType::BFloat16 || dtype == DType::Float16,
             "AutocastGuard: the autocast dtype must be bfloat16 or float16, got ", dtype);
  State& s = states()[static_cast<int>(device)];
  prev_enabled_ = s.enabled;
  prev_dtype_ = s.dtype;
  s.enabled = enabled;
  if (enabled) s.dtype = dtype;
  holds_cache_ = enabled;
  if (holds_cache_) hold();
}

AutocastGuard::~AutocastGuard() {
  State& s = states()[static_cast<int>(device_)];
  s.enabled = prev_enabled_;
  s.dtype = prev_dtype_;
  if (holds_cache_) release();
}

namespace autocast {

bool is_enabled(DeviceType device) { return states()[static_cast<int>(device)].enabled; }
DType dtype(DeviceType device) { return states()[static_cast<int>(device)].dtype; }

Tensor lower(const Tensor& t) {
  if (!t.defined()) return t;
  const State& s = states()[static_cast<int>(t.device().type)];
  if (!s.enabled || !eligible_for_lower(t.dtype()) || t.dtype() == s.dtype) return t;
  if (!(t.requires_grad() && t.is_leaf() && GradMode::is_enabled())) return to_dtype(t, s.dtype);
  Cache& c = cache();
  const auto key = std::make_pair(static_cast<const TensorImpl*>(t.impl()), s.dtype);
  auto it = c.entries.find(key);
  if (it != c.entries.end() && it->second.version == t.version()) return it->second.cast;
  Tensor cast = cast_for_cache(t, s.dtype);
  c.entries[key] = CachedCast{t, t.version(), cast};
  return cast;
}

Tensor upcast(const Tensor& t) {
  if (!t.defined()) return t;
  if (!states()[static_cast<int>(t.device().type)].enabled) return t;
  if (t.dtype() != DType::Float16 && t.dtype() != DType::BFloat16) return t;
  return to_dtype(t, DType::Float32);
}

CastCacheScope::CastCacheScope() { hold(); }
CastCacheScope::~CastCacheScope() { release(); }
size_t cached_casts() { return cache().entries.size(); }

}  // namespace autocast
}  // namespace weft
