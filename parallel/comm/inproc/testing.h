// run_ranks: the harness that plays n ranks as threads of one process over a
// fresh ProcessGroupInProc world (process_group_inproc.h), for tests, benches,
// examples and single-process runners (LocalPipe).
//
// Contract: run_ranks(n, body, opts) runs body(world group of rank r) for r in
// [0, n) on n threads. When a body returns or throws, its rank is marked
// exited (ProcessGroupInProc::mark_exited), so peers waiting on it fail
// promptly instead of hanging. It joins every thread, then rethrows the first
// exception thrown (in time) as weft::Error "run_ranks: rank r of n failed:
// <message>". (gtest EXPECT failures inside bodies are recorded by gtest
// itself.)
// Random numbers: each rank's thread draws from a generator of its own (a
// GeneratorScope, core/rng.h), as each process of a job does. Rank r's seed is
// fork_seeds(caller's default generator, n)[r], taken once per call on the
// calling thread, so a run after manual_seed is reproducible however the threads
// interleave, the ranks' streams differ, and the caller's stream moves on by 4
// values per call.
#pragma once

#include <chrono>
#include <functional>
#include <memory>

#include "parallel/comm/inproc/process_group_inproc.h"
#include "parallel/comm/process_group.h"

namespace weft::parallel {

struct RunRanksOptions {
  // The world group's default timeout (ProcessGroup::set_timeout changes it).
  Duration timeout = std::chrono::seconds(60);
};

void run_ranks(int n, const std::function<void(std::shared_ptr<ProcessGroup>)>& body, const RunRanksOptions& opts = {});

}  // namespace weft::parallel
