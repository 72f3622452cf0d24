// Balances with several stages per rank (Note [stages per rank] in
// balance.h): the branch-and-bound search behind optimal_balance,
// brute_force_balance, min_memory_balance and solve_balance's explanation
// when StageCosts::several_per_rank(). Private to //parallel/partition:balance.
#pragma once

#include <optional>
#include <vector>

#include "parallel/partition/balance.h"

namespace weft::parallel::partition {

// The smallest max_r time(r) within the budget (ties as balance.h says), or nullopt.
std::optional<std::vector<int>> placed_optimal_balance(const StageCosts& costs);
// The same by enumerating every balance.
std::optional<std::vector<int>> placed_brute_force_balance(const StageCosts& costs);
// The smallest max_r memory(r), ignoring time and budget.
std::vector<int> placed_min_memory_balance(const StageCosts& costs);
// Throws the budget error for `lowest` (min_memory_balance's): the rank with
// the largest memory, its stages and the balance.
[[noreturn]] void placed_explain_budget(const StageCosts& costs, const std::vector<int>& lowest);

}  // namespace weft::parallel::partition
