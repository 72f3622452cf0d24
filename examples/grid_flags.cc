// The examples' grid flag helpers (contract in grid_flags.h).
#include "examples/grid_flags.h"

#include <cstdlib>
#include <sstream>

#include "core/error.h"

namespace weft::examples {

std::vector<int> parse_balance(const std::string& s, const std::string& hint) {
  std::vector<int> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    WEFT_CHECK(!item.empty() && *end == '\0', "--balance: '", item, "' in '", s, "' is not a whole number",
               hint.empty() ? "" : " (" + hint + ")");
    out.push_back(static_cast<int>(v));
  }
  return out;
}

int grid_dp(int pp, int dp, int world) {
  if (dp == 0) {
    WEFT_CHECK(world % pp == 0, "--pp ", pp, " does not divide the world size ", world,
               ", so --dp (by default world size / --pp) cannot make --pp x --dp = ", world,
               " ranks: give --pp and --dp whose product is the world size (mpirun -np)");
    return world / pp;
  }
  WEFT_CHECK(pp * dp == world, "--pp ", pp, " x --dp ", dp, " = ", pp * dp, " ranks, but the world size is ", world,
             ": --pp x --dp must equal the world size (mpirun -np)");
  return dp;
}

std::string join_ints(const std::vector<int>& v) {
  std::ostringstream os;
  for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  return os.str();
}

}  // namespace weft::examples
