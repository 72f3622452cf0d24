// Balances with several stages per rank (contract in placed_balance.h and
// balance.h, Note [stages per rank]).
#include "parallel/partition/placed_balance.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "core/error.h"

namespace weft::parallel::partition {
namespace {

using Ticks = int64_t;
using Squares = __int128;                        // sums of squared ticks
constexpr double kResolution = double(1 << 24);  // ticks in the largest possible rank cost

// Branch and bound over the balances. The key, compared in order: the
// slowest stage's cost, the busiest rank's (the sum of its stages' costs),
// the sum of squared stage costs, then the balance itself (earlier first).
// Costs are times; with by_memory they are memory and the first part is
// left out (a rank's stages count together against a budget). They are
// counted in integer ticks (kResolution of them in the whole model's cost,
// each layer's and each boundary's rounded), so sums are exact and balances
// equal to rounding tie: offer(), the search and the brute force agree
// exactly.
class Search {
 public:
  Search(const StageCosts& c, bool by_memory)
      : c_(c), by_memory_(by_memory), n_(c.num_layers()), stages_(c.num_stages()), ranks_(c.num_ranks()) {
    const std::vector<LayerProfile>& layers = c.layers();
    int max_live = 0;
    for (int l : c.live()) max_live = std::max(max_live, l);
    double scale = 0;
    for (int k = 0; k < n_; ++k) {
      scale += by_memory ? static_cast<double>(layers[k].resident_bytes()) +
                               static_cast<double>(max_live) * static_cast<double>(layers[k].activation_bytes)
                         : layers[k].time_s() + c.transfer_s(k + 1, 0);
      if (!by_memory)
        for (int s = 1; s < stages_; ++s) scale += c.transfer_s(k + 1, s);
    }
    // Memory is counted in bytes (exact already; its key has no squares).
    const double tick = by_memory || scale <= 0 ? 1.0 : scale / kResolution;
    auto ticks = [tick](double x) { return static_cast<Ticks>(std::llround(x / tick)); };
    // By memory the floor holds the activations of the fewest live micro-batches of any stage.
    min_live_ = by_memory ? *std::min_element(c.live().begin(), c.live().end()) : 0;
    floor_.assign(n_ + 1, 0);
    activation_.assign(n_ + 1, 0);
    for (int k = 0; k < n_; ++k) {
      const Ticks act = by_memory ? ticks(static_cast<double>(layers[k].activation_bytes)) : 0;
      floor_[k + 1] = floor_[k] + (by_memory ? ticks(static_cast<double>(layers[k].resident_bytes())) + min_live_ * act
                                             : ticks(layers[k].time_s()));
      activation_[k + 1] = activation_[k] + act;
    }
    transfer_.assign(static_cast<size_t>(stages_) * (n_ + 1), 0);
    if (!by_memory)
      for (int s = 0; s < stages_; ++s)
        for (int j = 1; j <= n_; ++j) transfer_[static_cast<size_t>(s) * (n_ + 1) + j] = ticks(c.transfer_s(j, s));
  }

  // A stage's cost in ticks, and the part of it that does not depend on the
  // stage (a lower bound that does not decrease as j grows).
  Ticks floor(int i, int j) const { return floor_[j] - floor_[i]; }
  Ticks cost(int i, int j, int s) const {
    return floor(i, j) + (by_memory_ ? (c_.live()[s] - min_live_) * (activation_[j] - activation_[i])
                                     : transfer_[static_cast<size_t>(s) * (n_ + 1) + j]);
  }
  bool over_budget(int64_t bytes) const {
    return !by_memory_ && c_.options().memory_budget_bytes > 0 && bytes > c_.options().memory_budget_bytes;
  }

  // Takes `balance` as the best so far when it is valid, fits and is better.
  void offer(const std::vector<int>& balance) {
    if (static_cast<int>(balance.size()) != stages_) return;
    std::vector<Ticks> rank_cost(ranks_, 0);
    std::vector<int64_t> rank_mem(ranks_, 0);
    Key key;
    int begin = 0;
    for (int s = 0; s < stages_; ++s) {
      if (balance[s] < 1 || begin + balance[s] > n_) return;
      const int end = begin + balance[s], r = c_.rank_of(s);
      rank_mem[r] += c_.memory_bytes(begin, end, s);
      if (over_budget(rank_mem[r])) return;
      const Ticks t = cost(begin, end, s);
      rank_cost[r] += t;
      key = key.with(stage_part(t), rank_cost[r]);
      begin = end;
    }
    if (begin == n_) consider(key, balance);
  }

  void run() {
    cost_.assign(ranks_, 0);
    mem_.assign(ranks_, 0);
    parts_.clear();
    // open_after_[s]: the ranks holding a stage after s (the others take no more work).
    open_after_.assign(stages_, 0);
    std::vector<int> last(ranks_, -1);
    for (int s = 0; s < stages_; ++s) last[c_.rank_of(s)] = s;
    for (int s = 0; s < stages_; ++s)
      for (int r = 0; r < ranks_; ++r) open_after_[s] += last[r] > s;
    dfs(0, 0, Key{}, 0);
  }

  bool found() const { return !best_.empty(); }
  bool stopped() const { return stopped_; }
  const std::vector<int>& best() const { return best_; }

 private:
  struct Key {
    Ticks stage = 0, rank = 0;  // the slowest stage, the busiest rank
    Squares squares = 0;
    // After a stage of cost `stage_cost` (0 by memory) whose rank now totals `rank_cost`.
    Key with(Ticks stage_cost, Ticks rank_cost) const {
      return {std::max(stage, stage_cost), std::max(rank, rank_cost), squares + Squares(stage_cost) * stage_cost};
    }
  };
  Ticks stage_part(Ticks t) const { return by_memory_ ? 0 : t; }
  static bool better(const Key& a, const Key& b) {
    if (a.stage != b.stage) return a.stage < b.stage;
    if (a.rank != b.rank) return a.rank < b.rank;
    return a.squares < b.squares;
  }

  void consider(const Key& key, const std::vector<int>& balance) {
    if (best_.empty() || better(key, best_key_) || (!better(best_key_, key) && balance < best_)) {
      best_ = balance;
      best_key_ = key;
    }
  }

  // `open`: the summed cost of the ranks that hold a stage from s on.
  void dfs(int s, int i, const Key& key, Ticks open) {
    if (++nodes_ > kMaxSearchNodes) stopped_ = true;
    if (stopped_) return;
    if (s == stages_) {
      consider(key, parts_);
      return;
    }
    const int r = c_.rank_of(s), rest = stages_ - 1 - s;
    const bool bounded = !best_.empty();
    const Key& best = best_key_;
    const bool closes = open_after_[s] < (s > 0 ? open_after_[s - 1] : ranks_);  // s is rank r's last stage
    for (int j = rest == 0 ? n_ : i + 1; j + rest <= n_ && !stopped_; ++j) {     // the last stage takes the rest
      const int64_t m = c_.memory_bytes(i, j, s);
      if (over_budget(mem_[r] + m)) break;  // memory grows with j, and so does the floor (and by memory the cost):
      const Ticks lo = by_memory_ ? cost(i, j, s) : floor(i, j);
      if (bounded && (stage_part(lo) > best.stage || (stage_part(lo) == best.stage && cost_[r] + lo > best.rank)))
        break;
      const Ticks t = cost(i, j, s), old = cost_[r], left = floor(j, n_);
      const Key next = key.with(stage_part(t), old + t);
      const Ticks next_open = closes ? open - old : open + t;
      if (bounded) {
        // Lower bounds of the final key: the stages left average `left`
        // at least; the ranks still open take it (the busiest of them at
        // least their average); its squares are at least left^2 / rest.
        const Ticks stage_lb = std::max(next.stage, rest > 0 ? stage_part((left + rest - 1) / rest) : Ticks(0));
        if (stage_lb > best.stage) continue;
        if (stage_lb == best.stage) {
          const Ticks rank_lb = std::max(
              next.rank, open_after_[s] > 0 ? (next_open + left + open_after_[s] - 1) / open_after_[s] : Ticks(0));
          if (rank_lb > best.rank) continue;
          const Squares rest_sq = by_memory_ || rest == 0 ? Squares(0) : Squares(left) * left / rest;
          if (rank_lb == best.rank && next.squares + rest_sq > best.squares) continue;
        }
      }
      cost_[r] = old + t;
      mem_[r] += m;
      parts_.push_back(j - i);
      dfs(s + 1, j, next, next_open);
      parts_.pop_back();
      mem_[r] -= m;
      cost_[r] = old;
    }
  }

  const StageCosts& c_;
  const bool by_memory_;
  const int n_, stages_, ranks_;
  Ticks min_live_ = 0;
  std::vector<Ticks> floor_, activation_, transfer_;  // prefix ticks per layer; per (stage, end)
  std::vector<Ticks> cost_;
  std::vector<int64_t> mem_;
  std::vector<int> parts_, best_, open_after_;
  Key best_key_;
  int64_t nodes_ = 0;
  bool stopped_ = false;
};

std::vector<int> valid_or_empty(std::vector<int> balance) {
  for (int b : balance)
    if (b < 1) return {};
  return balance;
}

void enumerate(Search& search, int n, int stages, std::vector<int>& parts) {
  const int k = static_cast<int>(parts.size());
  if (k == stages - 1) {
    parts.push_back(n);
    search.offer(parts);
    parts.pop_back();
    return;
  }
  for (int first = 1; first <= n - (stages - 1 - k); ++first) {
    parts.push_back(first);
    enumerate(search, n - first, stages, parts);
    parts.pop_back();
  }
}

}  // namespace

std::optional<std::vector<int>> placed_optimal_balance(const StageCosts& c) {
  Search search(c, /*by_memory=*/false);
  if (c.options().memory_budget_bytes > 0) {
    // The smallest peak first: when even it is over the budget nothing fits
    // (found without searching every balance that does not); else it fits
    // and bounds the search from the start.
    Search memory(c, /*by_memory=*/true);
    memory.offer(valid_or_empty(balance_by_size(c.layers(), c.num_stages())));
    memory.run();
    if (memory.found()) {
      const std::vector<int64_t> peaks = rank_memory_bytes(c, memory.best());
      if (!memory.stopped() && *std::max_element(peaks.begin(), peaks.end()) > c.options().memory_budget_bytes)
        return std::nullopt;
      search.offer(memory.best());
    }
  }
  search.offer(valid_or_empty(balance_by_time(c.layers(), c.num_stages())));  // a good first bound
  search.run();
  WEFT_CHECK(search.found() || !search.stopped(), "partition: the search over balances of ", c.num_layers(),
             " layers on ", c.num_stages(), " stages passed ", kMaxSearchNodes,
             " nodes without finding one that fits; give the balance (kManual) or use kByTime");
  if (!search.found()) return std::nullopt;
  return search.best();
}

std::optional<std::vector<int>> placed_brute_force_balance(const StageCosts& c) {
  Search search(c, /*by_memory=*/false);
  std::vector<int> parts;
  enumerate(search, c.num_layers(), c.num_stages(), parts);
  if (!search.found()) return std::nullopt;
  return search.best();
}

std::vector<int> placed_min_memory_balance(const StageCosts& c) {
  Search search(c, /*by_memory=*/true);
  search.offer(valid_or_empty(balance_by_size(c.layers(), c.num_stages())));
  search.run();
  WEFT_INTERNAL_ASSERT(search.found(), "min_memory_balance: no balance of ", c.num_layers(), " layers on ",
                       c.num_stages(), " stages");
  return search.best();
}

void placed_explain_budget(const StageCosts& c, const std::vector<int>& lowest) {
  const std::vector<int64_t> mem = rank_memory_bytes(c, lowest);
  const int worst = static_cast<int>(std::max_element(mem.begin(), mem.end()) - mem.begin());
  std::string stages;
  for (int s = 0; s < c.num_stages(); ++s)
    if (c.rank_of(s) == worst) stages += (stages.empty() ? "" : " and ") + std::to_string(s);
  WEFT_ERROR("partition: no balance of ", c.num_layers(), " layers over ", c.num_stages(), " stages (", c.num_ranks(),
             " ranks, ", c.options().virtual_stages, " stages each as ", pipe::schedule_name(c.options().schedule),
             " places them) fits the memory budget of ", mib_str(c.options().memory_budget_bytes),
             " per device; the smallest achievable peak is ", mib_str(mem[worst]), " (rank ", worst, ", stages ",
             stages, ", of balance ", balance_str(lowest), ")");
}

}  // namespace weft::parallel::partition
