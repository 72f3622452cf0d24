// The examples' flag checks: help and flag errors printed on launcher rank 0
// only (examples/flags.h), every check after parsing naming its one flag and
// value (examples/train_flags.h, examples/grid_flags.h), --data and --resume
// checked at validation time, and the shared --balance and --keep-last
// registrations with their one default.
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "examples/flags.h"
#include "examples/grid_flags.h"
#include "examples/train_flags.h"
#include "tests/testing.h"

namespace weft::examples {
namespace {

// Sets (or, with nullptr, unsets) environment variables for one scope.
class Env {
 public:
  explicit Env(const std::map<std::string, const char*>& vars) {
    for (const auto& [name, value] : vars) {
      const char* old = getenv(name.c_str());
      old_[name] = old ? std::optional<std::string>(old) : std::nullopt;
      if (value) setenv(name.c_str(), value, 1);
      else unsetenv(name.c_str());
    }
  }
  ~Env() {
    for (const auto& [name, value] : old_) {
      if (value) setenv(name.c_str(), value->c_str(), 1);
      else unsetenv(name.c_str());
    }
  }

 private:
  std::map<std::string, std::optional<std::string>> old_;
};

// Only the launcher variables named, the others unset.
Env launcher(const char* ompi, const char* pmix = nullptr, const char* pmi = nullptr) {
  return Env({{"OMPI_COMM_WORLD_RANK", ompi}, {"PMIX_RANK", pmix}, {"PMI_RANK", pmi}});
}

TEST(LauncherRank, ReadFromTheLaunchersEnvironment) {
  {
    Env e = launcher(nullptr);
    EXPECT_EQ(launcher_rank(), 0);
  }
  {
    Env e = launcher("3");
    EXPECT_EQ(launcher_rank(), 3);
  }
  {
    Env e = launcher(nullptr, "2");
    EXPECT_EQ(launcher_rank(), 2);
  }
  {
    Env e = launcher(nullptr, nullptr, "5");
    EXPECT_EQ(launcher_rank(), 5);
  }
  {
    Env e = launcher("1", "7", "9");  // Open MPI's first
    EXPECT_EQ(launcher_rank(), 1);
  }
  {
    Env e = launcher("x1", nullptr, "4");  // not a number: the next one
    EXPECT_EQ(launcher_rank(), 4);
  }
}

// Runs parse_in_main on `args` with launcher rank `rank`; returns the status
// and what was printed on stdout and stderr.
struct Printed {
  std::optional<int> status;
  std::string out, err;
};

Printed parse_as_rank(const char* rank, std::vector<const char*> args) {
  Env e = launcher(rank);
  int64_t steps = 1;
  FlagParser p("usage: prog");
  p.add("--steps N", &steps, "steps");
  args.insert(args.begin(), "prog");
  Printed r;
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  r.status = p.parse_in_main(static_cast<int>(args.size()), args.data(), "prog");
  r.out = ::testing::internal::GetCapturedStdout();
  r.err = ::testing::internal::GetCapturedStderr();
  return r;
}

TEST(FlagParser, HelpAndFlagErrorsArePrintedOnRankZeroOnly) {
  const Printed help0 = parse_as_rank("0", {"--help"});
  EXPECT_EQ(help0.status, 0);
  EXPECT_NE(help0.out.find("usage: prog\n"), std::string::npos) << help0.out;
  const Printed help1 = parse_as_rank("1", {"--help"});
  EXPECT_EQ(help1.status, 0);  // the same outcome, nothing printed
  EXPECT_EQ(help1.out, "");
  EXPECT_EQ(help1.err, "");

  const Printed bad0 = parse_as_rank("0", {"--steps", "2.7"});
  EXPECT_EQ(bad0.status, 2);
  EXPECT_EQ(bad0.err, "prog: error: flag --steps: '2.7' is not an integer\n");
  const Printed bad1 = parse_as_rank("1", {"--steps", "2.7"});
  EXPECT_EQ(bad1.status, 2);
  EXPECT_EQ(bad1.err, "");
  EXPECT_EQ(bad1.out, "");

  // parse() itself: false on every rank, help text on rank 0 only.
  Env e = launcher(nullptr, nullptr, "1");
  int64_t steps = 1;
  FlagParser p("usage: prog");
  p.add("--steps N", &steps, "steps");
  const char* argv[] = {"prog", "-h"};
  std::ostringstream out;
  EXPECT_FALSE(p.parse(2, argv, out));
  EXPECT_EQ(out.str(), "");
}

// run_main's status and stderr at launcher rank `rank` for a body that throws.
std::pair<int, std::string> run_as_rank(const char* rank, const std::function<int()>& body) {
  Env e = launcher(rank);
  ::testing::internal::CaptureStderr();
  const int status = run_main("prog", body);
  return {status, ::testing::internal::GetCapturedStderr()};
}

TEST(RunMain, FlagErrorsOnceOtherErrorsOnEveryRank) {
  auto flag_error = [] {
    WEFT_FLAG_CHECK(false, "--epochs must be positive (got 0)");
    return 0;
  };
  auto rank_error = []() -> int { WEFT_ERROR("rank's own failure"); };
  EXPECT_EQ(run_as_rank("0", flag_error),
            std::make_pair(2, std::string("prog: error: --epochs must be positive (got 0)\n")));
  EXPECT_EQ(run_as_rank("1", flag_error), std::make_pair(2, std::string()));
  for (const char* rank : {"0", "1"}) {
    const auto [status, err] = run_as_rank(rank, rank_error);
    EXPECT_EQ(status, 1);
    EXPECT_EQ(err, "\nprog: error: rank's own failure\n") << "rank " << rank;
  }
  EXPECT_EQ(run_as_rank("1", [] { return 3; }), std::make_pair(3, std::string()));
}

// A fresh directory under TEST_TMPDIR.
std::string temp_dir(const std::string& name) {
  const std::string dir = std::string(getenv("TEST_TMPDIR")) + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Registers the training flags (not under `bazel run`), parses, resolves.
TrainFlags parse_and_resolve(std::vector<std::string> args) {
  Env e({{"BUILD_WORKING_DIRECTORY", nullptr}});
  TrainFlags f;
  FlagParser p("usage: prog");
  add_train_flags(p, f, {.program = "prog"});
  std::vector<const char*> argv = {"prog"};
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out;
  if (p.parse(static_cast<int>(argv.size()), argv.data(), out)) resolve_train_flags(f);
  return f;
}

// The FlagError's message that `args` give, or "" when they pass.
std::string flag_error(const std::vector<std::string>& args) {
  try {
    parse_and_resolve(args);
  } catch (const FlagError& e) {
    return e.message();
  }
  return "";
}

TEST(TrainFlags, EachCheckNamesOneFlagAndItsValue) {
  const std::string data = temp_dir("data");
  auto with_data = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--data", data});
    return flag_error(args);
  };
  EXPECT_EQ(with_data({}), "");
  EXPECT_EQ(with_data({"--epochs", "0"}), "--epochs must be positive (got 0)");
  EXPECT_EQ(with_data({"--batch-size", "-4"}), "--batch-size must be positive (got -4)");
  EXPECT_EQ(with_data({"--epochs", "0", "--batch-size", "8"}), "--epochs must be positive (got 0)");
  EXPECT_EQ(with_data({"--lr", "0"}), "--lr must be positive (got 0)");
  EXPECT_EQ(with_data({"--momentum", "-0.5"}), "--momentum must be >= 0 (got -0.5)");
  EXPECT_EQ(with_data({"--weight-decay", "-1"}), "--weight-decay must be >= 0 (got -1)");
  EXPECT_EQ(with_data({"--threads", "-2"}), "--threads must be >= 0 (0: all cores; got -2)");
  EXPECT_EQ(with_data({"--workers", "-1"}), "--workers must be >= 0 (got -1)");
  EXPECT_EQ(with_data({"--limit-train", "-5"}), "--limit-train must be >= 0 (0: all; got -5)");
  EXPECT_EQ(with_data({"--limit-test", "-6"}), "--limit-test must be >= 0 (0: all; got -6)");
  // The parser's own errors are FlagErrors too.
  EXPECT_EQ(with_data({"--epochs", "2.7"}), "flag --epochs: '2.7' is not an integer");
  EXPECT_EQ(with_data({"--bogus"}), "unknown flag '--bogus' (run with --help for the list)");
}

TEST(TrainFlags, DataMustBeADirectoryOfTheIdxFiles) {
  const std::string dir = temp_dir("not_data");
  const std::string file = dir + "/train-images-idx3-ubyte.gz";
  std::ofstream(file) << "x";
  const std::string as_file = flag_error({"--data", file});
  EXPECT_EQ(as_file.rfind("--data " + file +
                              " is a file; expected a directory of the four Fashion-MNIST IDX files "
                              "(train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz, "
                              "t10k-labels-idx1-ubyte.gz",
                          0),
            0u)
      << as_file;
  const std::string missing = flag_error({"--data", dir + "/none"});
  EXPECT_EQ(missing.rfind("--data " + dir + "/none: no such directory; expected a directory of the four", 0), 0u)
      << missing;
  EXPECT_EQ(flag_error({"--data", dir}), "");  // a directory passes; the loader reads the files
}

TEST(TrainFlags, ResumeMustExistWhenGiven) {
  const std::string dir = temp_dir("resume");
  EXPECT_EQ(flag_error({"--data", dir, "--resume", dir + "/ck.weft"}),
            "--resume " + dir + "/ck.weft: no such file or directory");
  std::ofstream(dir + "/ck.weft") << "x";
  EXPECT_EQ(flag_error({"--data", dir, "--resume", dir + "/ck.weft"}), "");
  EXPECT_EQ(flag_error({"--data", dir, "--resume", dir}), "");  // a checkpoint directory
  EXPECT_EQ(parse_and_resolve({"--data", dir}).resume, "");     // not given: not checked
}

TEST(KeepLast, OneDefaultWithItsReasonInTheHelp) {
  int keep_last = 0;  // whatever the program's field says, the shared default wins
  FlagParser p("usage: prog");
  add_keep_last_flag(p, &keep_last);
  EXPECT_EQ(keep_last, 2);
  EXPECT_EQ(kDefaultKeepLast, 2);
  const std::string help = p.help();
  EXPECT_NE(help.find("--keep-last N"), std::string::npos) << help;
  EXPECT_NE(help.find("(0: all); 2 keeps disk use bounded and the one before the newest to go back to (default 2)"),
            std::string::npos)
      << help;
  const char* argv[] = {"prog", "--keep-last", "0"};
  std::ostringstream out;
  ASSERT_TRUE(p.parse(3, argv, out));
  EXPECT_EQ(keep_last, 0);
  check_keep_last_flag(0);
  EXPECT_WEFT_ERROR(check_keep_last_flag(-1), "--keep-last must be >= 0 (0: keep all; got -1)");
}

TEST(GridFlags, BalanceAutoIsTheOneDefault) {
  std::string balance;  // e.g. a program whose field said "as even as possible"
  FlagParser p("usage: prog");
  add_balance_flag(p, &balance, "layers per stage");
  EXPECT_EQ(balance, "auto");
  const std::string help = p.help();
  EXPECT_NE(help.find("--balance auto|A,B,..."), std::string::npos) << help;
  EXPECT_NE(help.find("(default auto)"), std::string::npos) << help;
  EXPECT_EQ(parse_balance("auto"), std::vector<int>{});
  EXPECT_EQ(parse_balance("3,7"), (std::vector<int>{3, 7}));
  EXPECT_WEFT_ERROR(parse_balance("0,10"), "--balance: '0' in '0,10' is not a positive number of layers");
  EXPECT_WEFT_ERROR(parse_balance("5,"), "--balance: '5,' is neither auto nor layers per stage A,B,...");
  EXPECT_WEFT_ERROR(parse_balance(""), "--balance: '' is neither auto nor layers per stage");
  EXPECT_WEFT_ERROR(parse_balance("Auto"), "--balance: 'Auto' in 'Auto' is not a whole number");

  GridFlags g;
  FlagParser q("usage: prog");
  add_grid_flags(q, g);
  EXPECT_EQ(g.balance, "auto");
  const std::vector<std::string> order = {"--pp N",      "--dp N",
                                          "--chunks N",  "--schedule gpipe|1f1b|interleaved|zb|zbv|interleaved-zb",
                                          "--virtual N", "--balance auto|A,B,..."};
  size_t at = 0;
  for (const auto& flag : order) {
    const size_t next = q.help().find("  " + flag + " ", at);
    ASSERT_NE(next, std::string::npos) << flag << " out of order in:\n" << q.help();
    at = next;
  }
}

TEST(GridFlags, ChecksNameTheFlag) {
  check_grid_flags(GridFlags{});
  auto with = [](auto set) {
    GridFlags g;
    set(g);
    return g;
  };
  EXPECT_WEFT_ERROR(check_grid_flags(with([](GridFlags& g) { g.pp = 0; })), "--pp must be a positive integer (got 0)");
  EXPECT_WEFT_ERROR(check_grid_flags(with([](GridFlags& g) { g.dp = -1; })), "(got -1)");
  EXPECT_WEFT_ERROR(check_grid_flags(with([](GridFlags& g) { g.chunks = 0; })),
                    "--chunks must be a positive integer (got 0)");
  EXPECT_WEFT_ERROR(check_grid_flags(with([](GridFlags& g) { g.virtual_stages = -1; })), "--virtual must be");
  EXPECT_WEFT_ERROR(check_grid_flags(with([](GridFlags& g) { g.balance = "4,x"; })),
                    "--balance: 'x' in '4,x' is not a whole number");
  // auto plans several stages per rank too; a schedule that cannot run --virtual's count is named.
  for (const char* schedule : {"interleaved", "interleaved-zb", "zbv"})
    check_grid_flags(with([&](GridFlags& g) { g.schedule = schedule; }));
  check_grid_flags(with([](GridFlags& g) {
    g.schedule = "interleaved";
    g.balance = "3,2,3,2";
  }));
  check_grid_flags(with([](GridFlags& g) {
    g.schedule = "interleaved";
    g.virtual_stages = 1;  // auto with one stage per rank
  }));
  EXPECT_WEFT_ERROR(check_grid_flags(with([](GridFlags& g) {
                      g.schedule = "1f1b";
                      g.virtual_stages = 2;
                    })),
                    "--schedule 1f1b runs one stage per rank, but --virtual gives 2: for several stages per rank use "
                    "interleaved, interleaved-zb, zbv or gpipe");
  EXPECT_WEFT_ERROR(check_grid_flags(with([](GridFlags& g) {
                      g.schedule = "zbv";
                      g.virtual_stages = 3;
                    })),
                    "--schedule zbv places two stages per rank in a V, but --virtual gives 3");
  EXPECT_EQ(virtual_stages_for(0, "interleaved"), 2);
  EXPECT_EQ(virtual_stages_for(0, "interleaved-zb"), 2);
  EXPECT_EQ(virtual_stages_for(0, "zbv"), 2);
  EXPECT_EQ(virtual_stages_for(0, "zb"), 1);
  EXPECT_EQ(virtual_stages_for(3, "gpipe"), 3);
  // Every grid error is a FlagError (reported once under mpirun).
  EXPECT_THROW(grid_dp(3, 0, 4), FlagError);
  EXPECT_THROW(check_grid_flags(with([](GridFlags& g) { g.pp = 0; })), FlagError);
}

}  // namespace
}  // namespace weft::examples
