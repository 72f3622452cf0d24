// The pipeline x data-parallel examples' shared flag helpers (--balance,
// --pp x --dp): one copy for fashion_mnist_pipe, fashion_mnist_hybrid and gpt.
//
// Contract:
// - parse_balance("6,4") is {6, 4}; an entry that is not a whole number is an
//   error naming it and the whole value, followed by `hint` when given.
// - grid_dp(pp, dp, world): the replicas of a --pp x --dp grid on `world`
//   ranks (dp 0: world / pp); a grid that does not tile the world is an error
//   naming --pp, --dp and the world size.
// - join_ints({6, 4}) is "6,4".
#pragma once

#include <string>
#include <vector>

namespace weft::examples {

std::vector<int> parse_balance(const std::string& s, const std::string& hint = "");
int grid_dp(int pp, int dp, int world);
std::string join_ints(const std::vector<int>& v);

}  // namespace weft::examples
