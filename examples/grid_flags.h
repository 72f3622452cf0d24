// The pipeline x data-parallel examples' shared flags: --pp, --dp, --chunks,
// --schedule, --virtual and --balance, one registration and one check for
// fashion_mnist_hybrid and gpt; --balance alone for fashion_mnist_pipe.
//
// Contract:
// - GridFlags holds the flags' defaults; add_grid_flags registers them in
//   that order on a FlagParser (examples/flags.h), worded by GridFlagsSpec.
// - --schedule is one of kScheduleChoices: gpipe, 1f1b, interleaved, zb
//   (ZB-H1), zbv (ZB-V: two stages per rank in a V) and interleaved-zb.
// - --balance is "auto" (kBalanceAuto, the one default everywhere) or layers
//   per stage "A,B,...". auto: world rank 0 measures every layer on the first
//   micro-batch and every rank plans the same balance (parallel/partition),
//   for any schedule: with several stages per rank a rank's stages are
//   planned together (Note [stages per rank] in parallel/partition/balance.h).
//   add_balance_flag sets the variable to kBalanceAuto before registering
//   it, so every program shows and uses that default.
// - parse_balance("6,4") is {6, 4}, parse_balance("auto") is {} (plan it); an
//   entry that is not a positive whole number is a FlagError naming it and the
//   whole value, followed by `hint` when given.
// - virtual_stages_for(flag, schedule): --virtual when > 0, else 2 for
//   interleaved, interleaved-zb and zbv and 1 otherwise.
// - check_balance_flag: the value parses, and the schedule runs that many
//   stages per rank (1f1b and zb one, zbv two; else a FlagError naming
//   --schedule and --virtual).
// - check_grid_flags: --pp >= 1, --dp >= 0 (0: world size / --pp),
//   --chunks >= 1, --virtual >= 0, then check_balance_flag; FlagErrors naming
//   the flag and its value.
// - grid_dp(pp, dp, world): the replicas of a --pp x --dp grid on `world`
//   ranks (dp 0: world / pp); a grid that does not tile the world is a
//   FlagError naming --pp, --dp and the world size.
// - join_ints({6, 4}) is "6,4".
#pragma once

#include <string>
#include <vector>

#include "examples/flags.h"

namespace weft::examples {

inline constexpr const char* kBalanceAuto = "auto";
// --schedule's values, in the order the help lists them.
inline const std::vector<std::string> kScheduleChoices = {"gpipe", "1f1b", "interleaved",
                                                          "zb",    "zbv",  "interleaved-zb"};
inline constexpr const char* kScheduleHelp =
    "pipeline schedule (zb: ZB-H1; zbv: ZB-V, two stages per rank in a V; interleaved-zb: interleaved zero bubble)";
inline constexpr const char* kVirtualDefault = "2 for interleaved, interleaved-zb and zbv, else 1";

struct GridFlags {
  int pp = 1;
  int dp = 0;  // 0: world size / pp
  int chunks = 4;
  std::string schedule = "1f1b";
  int virtual_stages = 0;  // 0: 2 for interleaved, interleaved-zb and zbv, else 1
  std::string balance = kBalanceAuto;
};

// Where the programs' wording differs.
struct GridFlagsSpec {
  std::string pp_help = "pipeline stages (ranks per replica)";
  std::string balance_help = "layers per stage";  // what A,B,... counts
};

void add_grid_flags(FlagParser& parser, GridFlags& flags, const GridFlagsSpec& spec = {});
void check_grid_flags(const GridFlags& flags);

// "--balance auto|A,B,...": `layers_help` says what an entry counts.
void add_balance_flag(FlagParser& parser, std::string* balance, const std::string& layers_help);
void check_balance_flag(const std::string& balance, int stages_per_rank, const std::string& schedule);
int virtual_stages_for(int virtual_flag, const std::string& schedule);

std::vector<int> parse_balance(const std::string& s, const std::string& hint = "");
int grid_dp(int pp, int dp, int world);
std::string join_ints(const std::vector<int>& v);

}  // namespace weft::examples
