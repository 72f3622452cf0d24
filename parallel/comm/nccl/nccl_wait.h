// The waiting logic of the NCCL backend, free of NCCL and CUDA so it is tested
// on any machine (tests/parallel/nccl_wait_test.cc).
//
// Contract:
// - settle_until(rc, in_progress, query, deadline, period, on_poll): Note [nccl
//   non-blocking] (process_group_nccl.cc). While rc == in_progress, sleeps
//   briefly and asks query() for the call's state; returns the first other
//   state, or in_progress once `deadline` passed. on_poll() runs every `period`
//   meanwhile and may throw (the liveness check below), which ends the wait.
// - liveness_error(): the message of a wait ended because peers stopped
//   sending heartbeats: "<what> on <group> failed: missing ranks: [1] stopped
//   responding (no heartbeat for 2.5 s: the process died or is stuck), 2.6 s
//   after it was issued (timeout 600 s); communicator aborted". `while_doing`
//   (e.g. "while ncclAllReduce was being queued") follows the rank list when set.
// - settle_split(rc, ok, in_progress, member, has_child, parent_query,
//   child_query, deadline, period, on_poll): Note [nccl split handle]
//   (process_group_nccl.cc). Settles a non-blocking ncclCommSplit: the parent's
//   state first; then, for a member, waits until the child's handle has been
//   written (has_child(); a parent failure ends the wait) and until the child's
//   own state (child_query()) is no longer in progress. Returns ok when the
//   child is ready to use, else the first failure, or in_progress once
//   `deadline` passed; on_poll() runs every `period` throughout.
#pragma once

#include <chrono>
#include <cmath>
#include <string>
#include <thread>

#include "core/error.h"

namespace weft::parallel::detail {

template <typename Query, typename OnPoll>
int settle_until(int rc, int in_progress, Query&& query, std::chrono::steady_clock::time_point deadline,
                 std::chrono::milliseconds period, OnPoll&& on_poll) {
  using Clock = std::chrono::steady_clock;
  auto next = Clock::now() + period;
  while (rc == in_progress) {
    const auto now = Clock::now();
    if (now >= deadline) return in_progress;
    if (now >= next) {
      on_poll();
      next = now + period;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    rc = query();
  }
  return rc;
}

template <typename HasChild, typename ParentQuery, typename ChildQuery, typename OnPoll>
int settle_split(int rc, int ok, int in_progress, bool member, HasChild&& has_child, ParentQuery&& parent_query,
                 ChildQuery&& child_query, std::chrono::steady_clock::time_point deadline,
                 std::chrono::milliseconds period, OnPoll&& on_poll) {
  using Clock = std::chrono::steady_clock;
  rc = settle_until(rc, in_progress, parent_query, deadline, period, on_poll);
  if (rc != ok || !member) return rc;
  auto next = Clock::now() + period;
  while (!has_child()) {
    const auto now = Clock::now();
    if (now >= deadline) return in_progress;
    if (now >= next) {
      on_poll();
      next = now + period;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    const int parent = parent_query();
    if (parent != ok && parent != in_progress) return parent;
  }
  return settle_until(child_query(), in_progress, child_query, deadline, period, on_poll);
}

inline std::string liveness_error(const std::string& what_seq, const std::string& group, const std::string& ranks_text,
                                  double silent_s, double since_s, double timeout_s,
                                  const std::string& while_doing = "") {
  auto tenth = [](double s) { return std::round(s * 10) / 10; };
  return weft::detail::str_cat(
      what_seq, " on ", group, " failed: ", ranks_text, " stopped responding (no heartbeat for ", tenth(silent_s),
      " s: the process died or is stuck)", while_doing.empty() ? "" : " " + while_doing, ", ", tenth(since_s),
      " s after it was issued (timeout ", timeout_s, " s); communicator aborted");
}

}  // namespace weft::parallel::detail
