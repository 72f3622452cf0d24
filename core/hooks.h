// HookList and RemovableHandle: ordered callback lists whose registrations can be
// undone. Every hook registration in weft (tensor hooks, post-accumulate hooks,
// module hooks) returns a RemovableHandle.
//
// Contract: hooks run in registration order; remove() is idempotent and safe
// after the list's owner is gone (the handle holds only a weak reference).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

namespace weft {

class RemovableHandle {
 public:
  RemovableHandle() = default;
  explicit RemovableHandle(std::function<void()> remover) : remover_(std::move(remover)) {}
  void remove() {
    if (remover_) {
      auto r = std::move(remover_);
      remover_ = nullptr;
      r();
    }
  }
  bool active() const { return static_cast<bool>(remover_); }

 private:
  std::function<void()> remover_;
};

template <typename Fn>
class HookList : public std::enable_shared_from_this<HookList<Fn>> {
 public:
  RemovableHandle add(Fn fn) {
    uint64_t id = next_id_++;
    hooks_.emplace_back(id, std::move(fn));
    std::weak_ptr<HookList> weak = this->shared_from_this();
    return RemovableHandle([weak, id] {
      if (auto self = weak.lock()) self->remove(id);
    });
  }
  void remove(uint64_t id) {
    for (auto it = hooks_.begin(); it != hooks_.end(); ++it)
      if (it->first == id) {
        hooks_.erase(it);
        return;
      }
  }
  bool empty() const { return hooks_.empty(); }
  size_t size() const { return hooks_.size(); }
  // Snapshot so hooks may remove themselves while running.
  std::vector<Fn> snapshot() const {
    std::vector<Fn> out;
    out.reserve(hooks_.size());
    for (auto& h : hooks_) out.push_back(h.second);
    return out;
  }

 private:
  uint64_t next_id_ = 0;
  std::vector<std::pair<uint64_t, Fn>> hooks_;
};

}  // namespace weft
