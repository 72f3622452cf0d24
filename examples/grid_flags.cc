// The examples' grid flags (contract in grid_flags.h).
#include "examples/grid_flags.h"

#include <cerrno>
#include <cstdlib>
#include <sstream>

namespace weft::examples {

void add_balance_flag(FlagParser& p, std::string* balance, const std::string& layers_help) {
  *balance = kBalanceAuto;
  p.add("--balance auto|A,B,...", balance,
        layers_help +
            " (A,B,...), or auto: rank 0 measures every layer on the first micro-batch and every rank plans the "
            "same balance (printed as the partition table), a rank's stages together when it holds several");
}

void add_grid_flags(FlagParser& p, GridFlags& f, const GridFlagsSpec& spec) {
  p.add("--pp N", &f.pp, spec.pp_help)
      .add("--dp N", &f.dp, "data-parallel replicas; --pp x --dp must be the world size", "world size / --pp")
      .add("--chunks N", &f.chunks, "micro-batches per replica per step")
      .add_choice("--schedule", &f.schedule, kScheduleChoices, kScheduleHelp)
      .add("--virtual N", &f.virtual_stages, "stages per rank (interleaved, interleaved-zb, gpipe; zbv: 2)",
           kVirtualDefault);
  add_balance_flag(p, &f.balance, spec.balance_help);
}

int virtual_stages_for(int virtual_flag, const std::string& schedule) {
  if (virtual_flag > 0) return virtual_flag;
  return schedule == "interleaved" || schedule == "interleaved-zb" || schedule == "zbv" ? 2 : 1;
}

void check_balance_flag(const std::string& balance, int stages_per_rank, const std::string& schedule) {
  parse_balance(balance);
  WEFT_FLAG_CHECK(stages_per_rank == 1 || (schedule != "1f1b" && schedule != "zb"), "--schedule ", schedule,
                  " runs one stage per rank, but --virtual gives ", stages_per_rank,
                  ": for several stages per rank use interleaved, interleaved-zb, zbv or gpipe");
  WEFT_FLAG_CHECK(stages_per_rank == 2 || schedule != "zbv",
                  "--schedule zbv places two stages per rank in a V, but --virtual gives ", stages_per_rank,
                  ": give --virtual 2 or leave it out");
}

void check_grid_flags(const GridFlags& f) {
  WEFT_FLAG_CHECK(f.pp >= 1, "--pp must be a positive integer (got ", f.pp, ")");
  WEFT_FLAG_CHECK(f.dp >= 0, "--dp must be a positive integer, or 0 or omitted for world size / --pp (got ", f.dp, ")");
  WEFT_FLAG_CHECK(f.chunks >= 1, "--chunks must be a positive integer (got ", f.chunks, ")");
  WEFT_FLAG_CHECK(f.virtual_stages >= 0, "--virtual must be a positive integer, or 0 for the schedule's (got ",
                  f.virtual_stages, ")");
  check_balance_flag(f.balance, virtual_stages_for(f.virtual_stages, f.schedule), f.schedule);
}

std::vector<int> parse_balance(const std::string& s, const std::string& hint) {
  if (s == kBalanceAuto) return {};
  const std::string tail = hint.empty() ? "" : " (" + hint + ")";
  std::vector<int> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(item.c_str(), &end, 10);
    WEFT_FLAG_CHECK(!item.empty() && *end == '\0' && errno == 0, "--balance: '", item, "' in '", s,
                    "' is not a whole number", tail);
    WEFT_FLAG_CHECK(v >= 1 && v <= 1000000, "--balance: '", item, "' in '", s, "' is not a positive number of layers",
                    tail);
    out.push_back(static_cast<int>(v));
  }
  WEFT_FLAG_CHECK(!out.empty() && (s.empty() || s.back() != ','), "--balance: '", s,
                  "' is neither auto nor layers per stage A,B,...", tail);
  return out;
}

int grid_dp(int pp, int dp, int world) {
  if (dp == 0) {
    WEFT_FLAG_CHECK(world % pp == 0, "--pp ", pp, " does not divide the world size ", world,
                    ", so --dp (by default world size / --pp) cannot make --pp x --dp = ", world,
                    " ranks: give --pp and --dp whose product is the world size (mpirun -np)");
    return world / pp;
  }
  WEFT_FLAG_CHECK(pp * dp == world, "--pp ", pp, " x --dp ", dp, " = ", pp * dp, " ranks, but the world size is ",
                  world, ": --pp x --dp must equal the world size (mpirun -np)");
  return dp;
}

std::string join_ints(const std::vector<int>& v) {
  std::ostringstream os;
  for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  return os.str();
}

}  // namespace weft::examples
