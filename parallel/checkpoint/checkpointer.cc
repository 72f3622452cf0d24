// Synchronous and background saves (contract in checkpointer.h).
#include "parallel/checkpoint/checkpointer.h"

#include <chrono>
#include <iostream>
#include <numeric>
#include <vector>

#include "core/error.h"

namespace weft::parallel::checkpoint {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

std::string save(const std::string& root, const Stateful& state, const TrainingState& training,
                 const SaveOptions& options) {
  WEFT_CHECK(state.model != nullptr, "checkpoint save: no model given");
  Snapshot snap = take_snapshot(state, training, options.kind);
  return commit_snapshot(*state.model->grid().world(), root, snap, options.keep_last);
}

Checkpointer::Checkpointer(std::string root, std::shared_ptr<ProcessGroup> world, SaveOptions options)
    : root_(std::move(root)), world_(std::move(world)), options_(options) {
  WEFT_CHECK(world_ != nullptr, "Checkpointer: the process group is null");
  WEFT_CHECK(!root_.empty(), "Checkpointer: the checkpoint directory is empty");
  group_ = world_;
  if (options_.async) {
    std::vector<int> all(world_->size());
    std::iota(all.begin(), all.end(), 0);
    group_ = world_->new_group(all);  // the background commit's own communicator
  }
}

Checkpointer::~Checkpointer() {
  try {
    wait();
  } catch (const std::exception& e) {
    std::cerr << "Checkpointer: the last save to '" << root_ << "' failed: " << error_text(e) << "\n";
  }
}

void Checkpointer::wait() {
  if (thread_.joinable()) thread_.join();
  if (error_) {
    std::exception_ptr e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
}

std::string Checkpointer::save(const Stateful& state, const TrainingState& training) {
  const auto t0 = std::chrono::steady_clock::now();
  wait();  // the previous save first (its error surfaces here)
  WEFT_CHECK(state.model != nullptr, "Checkpointer::save: no model given");
  auto snap = std::make_shared<Snapshot>(take_snapshot(state, training, options_.kind));
  const std::string dir = root_ + "/" + step_dir_name(training.step);
  if (!options_.async) {
    commit_snapshot(*group_, root_, *snap, options_.keep_last);
    blocking_s_ = total_s_ = seconds_since(t0);
    return dir;
  }
  blocking_s_ = seconds_since(t0);
  thread_ = std::thread([this, snap, t0] {
    try {
      commit_snapshot(*group_, root_, *snap, options_.keep_last);
    } catch (...) {
      error_ = std::current_exception();
    }
    total_s_ = seconds_since(t0);
  });
  return dir;
}

}  // namespace weft::parallel::checkpoint
