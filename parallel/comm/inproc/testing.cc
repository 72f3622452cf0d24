// run_ranks (contract in testing.h).
#include "parallel/comm/inproc/testing.h"

#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "core/rng.h"

namespace weft::parallel {

namespace {
std::string exception_text(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}
}  // namespace

void run_ranks(int n, const std::function<void(std::shared_ptr<ProcessGroup>)>& body, const RunRanksOptions& opts) {
  WEFT_CHECK(n >= 1, "run_ranks: need at least one rank, got ", n);
  auto groups = ProcessGroupInProc::create_world(n, opts.timeout);
  std::mutex m;
  int first = -1;
  std::string first_text;
  std::vector<std::thread> threads;
  const std::vector<uint64_t> seeds = fork_seeds(default_generator(), n);
  auto run = [&](int r) {
    std::string reason = "its thread returned";
    Generator generator(seeds[r]);
    GeneratorScope draws_from(generator);
    try {
      body(groups[r]);
    } catch (...) {
      std::string text = exception_text(std::current_exception());
      {
        std::lock_guard<std::mutex> l(m);
        if (first < 0) {
          first = r;
          first_text = text;
        }
      }
      reason = "its thread threw: " + text;
    }
    groups[r]->mark_exited(reason);
  };
  try {
    for (int r = 0; r < n; ++r) threads.emplace_back(run, r);
  } catch (const std::exception& e) {  // could not start a thread: let the started ones fail and finish
    for (int r = static_cast<int>(threads.size()); r < n; ++r)
      groups[r]->mark_exited(std::string("its thread could not be started: ") + e.what());
    for (auto& t : threads) t.join();
    WEFT_ERROR("run_ranks: starting the thread of rank ", threads.size(), " of ", n, " failed: ", e.what());
  }
  for (auto& t : threads) t.join();
  if (first >= 0) WEFT_ERROR("run_ranks: rank ", first, " of ", n, " failed: ", first_text);
}

}  // namespace weft::parallel
