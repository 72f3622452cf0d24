// Preemption (train/preemption.h).
#include "train/preemption.h"

#include <atomic>
#include <cstring>
#include <iostream>
#include <map>
#include <mutex>

#include "core/error.h"
#include "train/trainer.h"

namespace weft::train {
namespace {

std::atomic<int> g_signal{0};  // async-signal-safe: lock-free int
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void record_signal(int sig) { g_signal.store(sig, std::memory_order_relaxed); }

// The handlers are the process's: installed by the first Preemption, restored by the last.
std::mutex g_mutex;
int g_users = 0;
std::map<int, struct sigaction> g_previous;

void install_handlers(const std::vector<int>& signals) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_users++ > 0) return;
  g_signal.store(0);
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = record_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : signals) {
    struct sigaction old;
    WEFT_CHECK(sigaction(sig, &sa, &old) == 0, "Preemption: cannot handle signal ", sig, ": ", std::strerror(errno));
    g_previous.emplace(sig, old);
  }
}

void restore_handlers() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (--g_users > 0) return;
  for (const auto& [sig, old] : g_previous) sigaction(sig, &old, nullptr);
  g_previous.clear();
}

}  // namespace

int pending_signal() { return g_signal.load(std::memory_order_relaxed); }

Preemption::Preemption(PreemptionOptions options) : options_(std::move(options)) {
  WEFT_CHECK(!options_.signals.empty(), "Preemption: no signals to stop on");
  for (int sig : options_.signals)
    WEFT_CHECK(sig > 0 && sig < NSIG && sig != SIGKILL && sig != SIGSTOP, "Preemption: signal ", sig,
               " cannot be handled");
}

Preemption::~Preemption() { uninstall(); }

void Preemption::uninstall() {
  if (!installed_) return;
  installed_ = false;
  restore_handlers();
}

void Preemption::on_fit_begin(Trainer&) {
  signal_ = 0;
  rank_ = -1;
  if (!installed_) {
    install_handlers(options_.signals);
    installed_ = true;
  }
}

void Preemption::on_step_end(Trainer& t) {
  const int mine = pending_signal();
  const int64_t sig = t.max_over_ranks(mine);
  if (sig == 0) return;
  // The lowest rank that got a signal (every rank computes the same).
  const int64_t world = t.world_size();
  rank_ = static_cast<int>(world - t.max_over_ranks(mine != 0 ? world - t.rank() : 0));
  signal_ = static_cast<int>(sig);
  g_signal.store(0);
  if (options_.checkpoint && options_.checkpoint->last_step() != t.state().step) options_.checkpoint->save(t);
  t.request_stop();
  if (t.lead())
    std::cerr << t.options().name << ": stopping at step " << t.state().step << " on signal " << signal_ << " ("
              << strsignal(signal_) << ") received by rank " << rank_
              << (options_.checkpoint ? ", after saving a checkpoint to resume from" : "") << "\n";
}

void Preemption::on_fit_end(Trainer&) { uninstall(); }

}  // namespace weft::train
