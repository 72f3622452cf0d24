// FlagParser (examples/flags.h): both value syntaxes, defaults, help, and the
// errors that name the flag; the examples' shared training flags
// (examples/train_flags.h): defaults, per-example wording, path resolution.
#include "examples/flags.h"

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "examples/grid_flags.h"
#include "examples/train_flags.h"
#include "io/fashion_mnist.h"
#include "tests/testing.h"

namespace weft::examples {
namespace {

struct Settings {
  std::string data = "/data";
  std::string model = "cnn";
  std::string save;
  int64_t epochs = 5;
  int threads = 0;
  uint64_t seed = 0;
  double lr = 0.05;
  double weight_decay = 5e-4;
  bool progress = true;
};

FlagParser parser_for(Settings& s) {
  FlagParser p("usage: prog [flags]");
  p.add("--data DIR", &s.data, "dataset directory")
      .add_choice("--model", &s.model, {"cnn", "mlp"}, "model")
      .add("--save PATH", &s.save, "checkpoint path")
      .add("--epochs N", &s.epochs, "epochs")
      .add("--threads N", &s.threads, "CPU threads", "all cores")
      .add("--seed N", &s.seed, "seed")
      .add("--lr X", &s.lr, "learning rate")
      .add("--weight-decay X", &s.weight_decay, "weight decay")
      .add_switch("--no-progress", &s.progress, false, "no progress bar");
  return p;
}

// Parses `args` (without the program name) into a fresh Settings.
Settings parse(const std::vector<std::string>& args, bool* help_requested = nullptr, std::string* help_out = nullptr) {
  Settings s;
  FlagParser p = parser_for(s);
  std::vector<const char*> argv = {"prog"};
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out;
  const bool ok = p.parse(static_cast<int>(argv.size()), argv.data(), out);
  if (help_requested) *help_requested = !ok;
  if (help_out) *help_out = out.str();
  return s;
}

TEST(FlagParser, DefaultsStayWithoutFlags) {
  Settings s = parse({});
  EXPECT_EQ(s.data, "/data");
  EXPECT_EQ(s.model, "cnn");
  EXPECT_EQ(s.epochs, 5);
  EXPECT_EQ(s.threads, 0);
  EXPECT_DOUBLE_EQ(s.lr, 0.05);
  EXPECT_TRUE(s.progress);
}

TEST(FlagParser, SpaceAndEqualsFormsSetTypedValues) {
  Settings s = parse({"--data", "/x", "--epochs=7", "--threads", "3", "--seed=18446744073709551615", "--lr", "1e-3",
                      "--weight-decay=-0.5", "--model=mlp", "--no-progress", "--save="});
  EXPECT_EQ(s.data, "/x");
  EXPECT_EQ(s.epochs, 7);
  EXPECT_EQ(s.threads, 3);
  EXPECT_EQ(s.seed, 18446744073709551615ull);
  EXPECT_DOUBLE_EQ(s.lr, 1e-3);
  EXPECT_DOUBLE_EQ(s.weight_decay, -0.5);
  EXPECT_EQ(s.model, "mlp");
  EXPECT_FALSE(s.progress);
  EXPECT_EQ(s.save, "");
}

TEST(FlagParser, LaterOccurrenceWinsAndNegativeValuesAreValues) {
  Settings s = parse({"--epochs", "2", "--epochs", "+9", "--lr", "-1", "--data", "-"});
  EXPECT_EQ(s.epochs, 9);
  EXPECT_DOUBLE_EQ(s.lr, -1.0);
  EXPECT_EQ(s.data, "-");
}

TEST(FlagParser, HelpListsFlagsWithDefaultsAndStopsParsing) {
  bool help = false;
  std::string text;
  Settings s = parse({"--epochs", "3", "--help", "--bogus"}, &help, &text);
  EXPECT_TRUE(help);
  EXPECT_EQ(s.epochs, 3);
  EXPECT_EQ(text.rfind("usage: prog [flags]\n", 0), 0u) << text;
  for (const char* line : {"--data DIR", "dataset directory (default /data)", "--model cnn|mlp", "model (default cnn)",
                           "--epochs N", "epochs (default 5)", "CPU threads (default all cores)",
                           "learning rate (default 0.05)", "weight decay (default 0.0005)", "--no-progress", "--help"})
    EXPECT_NE(text.find(line), std::string::npos) << "missing '" << line << "' in:\n" << text;
  EXPECT_EQ(text.find("checkpoint path (default"), std::string::npos) << "an empty default is not shown:\n" << text;
  EXPECT_EQ(text.find("no progress bar (default"), std::string::npos) << text;
  bool short_help = false;
  parse({"-h"}, &short_help);
  EXPECT_TRUE(short_help);
  bool no_help = true;
  parse({"--epochs", "1"}, &no_help);
  EXPECT_FALSE(no_help);
}

TEST(FlagParser, UnknownFlagIsNamed) {
  EXPECT_WEFT_ERROR(parse({"--epoch", "3"}), "unknown flag '--epoch'");
  EXPECT_WEFT_ERROR(parse({"--bogus=1"}), "unknown flag '--bogus'");
  EXPECT_WEFT_ERROR(parse({"stray"}), "unexpected argument 'stray'");
  EXPECT_WEFT_ERROR(parse({"-x"}), "unexpected argument '-x'");
}

TEST(FlagParser, MissingValueIsNamed) {
  EXPECT_WEFT_ERROR(parse({"--epochs"}), "flag --epochs needs a value (--epochs N)");
  EXPECT_WEFT_ERROR(parse({"--save", "--epochs", "2"}), "flag --save needs a value (--save PATH)");
}

TEST(FlagParser, BadNumbersAreNamed) {
  EXPECT_WEFT_ERROR(parse({"--epochs", "abc"}), "flag --epochs: 'abc' is not an integer");
  EXPECT_WEFT_ERROR(parse({"--epochs", "2.5"}), "flag --epochs: '2.5' is not an integer");
  EXPECT_WEFT_ERROR(parse({"--epochs="}), "flag --epochs: '' is not an integer");
  EXPECT_WEFT_ERROR(parse({"--threads", "99999999999"}), "flag --threads: '99999999999' is out of range");
  EXPECT_WEFT_ERROR(parse({"--seed", "-1"}), "flag --seed: '-1' is out of range");
  EXPECT_WEFT_ERROR(parse({"--lr", "0.1x"}), "flag --lr: '0.1x' is not a number");
  EXPECT_WEFT_ERROR(parse({"--lr", "inf"}), "flag --lr: 'inf' is not a finite number");
}

TEST(FlagParser, ChoicesAndSwitchesAreChecked) {
  EXPECT_WEFT_ERROR(parse({"--model", "resnet"}), "flag --model must be one of cnn|mlp, got 'resnet'");
  EXPECT_WEFT_ERROR(parse({"--no-progress=1"}), "flag --no-progress takes no value");
}

TEST(FlagParser, ParseInMainGivesExitStatus) {
  int64_t steps = 1;
  FlagParser p("usage: bench");
  p.add("--steps N", &steps, "steps");
  const char* ok[] = {"bench", "--steps", "4"};
  EXPECT_EQ(p.parse_in_main(3, ok, "bench"), std::nullopt);
  EXPECT_EQ(steps, 4);
  const char* help[] = {"bench", "--help"};
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(p.parse_in_main(2, help, "bench"), 0);
  EXPECT_NE(::testing::internal::GetCapturedStdout().find("--steps N"), std::string::npos);
  const char* bad[] = {"bench", "--steps", "four"};
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(p.parse_in_main(3, bad, "bench"), 2);
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("bench: error: flag --steps: 'four' is not an integer"),
            std::string::npos);
}

TEST(FlagParser, BadRegistrationsAreErrors) {
  int a = 0, b = 0;
  FlagParser p("usage");
  p.add("--a N", &a, "a");
  EXPECT_WEFT_ERROR(p.add("--a N", &b, "again"), "flag --a is registered twice");
  EXPECT_WEFT_ERROR(p.add("b N", &b, "no dashes"), "must look like --name");
  EXPECT_WEFT_ERROR(p.add("--help", &b, "built in"), "--help is built in");
}

// What an example gets from its command line: the training flags, one flag of
// its own (a path) and --help's text (empty without --help).
struct Parsed {
  TrainFlags train;
  std::string chart = "chart.txt";
  std::string help;
};

// Registers the training flags and --chart as an example does, parses `args`
// and, unless --help was given, resolves.
Parsed parse_train(const std::vector<std::string>& args, const TrainFlagsSpec& spec) {
  Parsed r;
  FlagParser p("usage: prog [flags]");
  add_train_flags(p, r.train, spec);
  p.add("--chart PATH", &r.chart, "an example's own path");
  std::vector<const char*> argv = {"prog"};
  for (const auto& a : args) argv.push_back(a.c_str());
  std::ostringstream out;
  if (p.parse(static_cast<int>(argv.size()), argv.data(), out)) resolve_train_flags(r.train, {&r.chart});
  r.help = out.str();
  return r;
}

// Sets BUILD_WORKING_DIRECTORY (as `bazel run` does) for one scope.
class WorkingDirectory {
 public:
  explicit WorkingDirectory(const char* dir) {
    if (const char* old = getenv("BUILD_WORKING_DIRECTORY")) old_ = old;
    if (dir) setenv("BUILD_WORKING_DIRECTORY", dir, 1);
    else unsetenv("BUILD_WORKING_DIRECTORY");
  }
  ~WorkingDirectory() {
    if (old_) setenv("BUILD_WORKING_DIRECTORY", old_->c_str(), 1);
    else unsetenv("BUILD_WORKING_DIRECTORY");
  }

 private:
  std::optional<std::string> old_;
};

TEST(TrainFlags, RegistrationGivesTheListedDefaults) {
  WorkingDirectory wd(nullptr);
  TrainFlags f = parse_train({}, {.program = "fashion_mnist"}).train;
  EXPECT_EQ(f.data, io::kFashionMnistDir);
  EXPECT_EQ(f.model, "cnn");
  EXPECT_EQ(f.epochs, 5);
  EXPECT_EQ(f.batch_size, 128);
  EXPECT_DOUBLE_EQ(f.lr, 0.05);
  EXPECT_DOUBLE_EQ(f.momentum, 0.9);
  EXPECT_DOUBLE_EQ(f.weight_decay, 5e-4);
  EXPECT_EQ(f.seed, 0u);
  EXPECT_EQ(f.threads, 0);
  EXPECT_EQ(f.workers, 1);
  EXPECT_EQ(f.save, "");
  EXPECT_EQ(f.resume, "");
  EXPECT_EQ(f.metrics, "fashion_mnist_metrics.jsonl");
  EXPECT_EQ(f.plot, "fashion_mnist.svg");
  EXPECT_EQ(f.limit_train, 0);
  EXPECT_EQ(f.limit_test, 0);
  EXPECT_TRUE(f.progress);

  const std::string help = parse_train({"--help"}, {.program = "fashion_mnist"}).help;
  for (const char* line : {"--data DIR",
                           "Fashion-MNIST IDX files (default /usr/share/datasets/fashion-mnist)",
                           "--model cnn|mlp",
                           "model (default cnn)",
                           "--epochs N",
                           "epochs (default 5)",
                           "--batch-size N",
                           "batch size (default 128)",
                           "--optimizer sgd|adam|adamw|rmsprop|adagrad",
                           "optimizer (default sgd)",
                           "--lr X",
                           "learning rate, cosine-annealed per epoch (default 0.05)",
                           "momentum of sgd and rmsprop (default 0.9)",
                           "weight decay (decoupled for adamw) (default 0.0005)",
                           "seed for init and data order (default 0)",
                           "CPU threads (default all cores)",
                           "data-loader threads (default 1)",
                           "--save PATH",
                           "write a checkpoint after every epoch\n",
                           "--resume PATH",
                           "continue from a checkpoint written by --save\n",
                           "JSON-lines metrics (default fashion_mnist_metrics.jsonl)",
                           "SVG plot of loss and accuracy (default fashion_mnist.svg)",
                           "--limit-train N",
                           "training images (quick runs) (default all)",
                           "--limit-test N",
                           "test images (default all)",
                           "--no-progress",
                           "no progress bar\n",
                           "--chart PATH"})
    EXPECT_NE(help.find(line), std::string::npos) << "missing '" << line << "' in:\n" << help;
  // The training flags first, in the documented order, then the example's own.
  const std::vector<std::string> order = {
      "--data",         "--model", "--epochs",      "--batch-size", "--lr",          "--momentum",
      "--weight-decay", "--seed",  "--threads",     "--workers",    "--save",        "--resume",
      "--metrics",      "--plot",  "--limit-train", "--limit-test", "--no-progress", "--chart"};
  size_t at = 0;
  for (const auto& flag : order) {
    const size_t next = help.find("  " + flag + " ", at);
    ASSERT_NE(next, std::string::npos) << flag << " out of order in:\n" << help;
    at = next;
  }
}

TEST(TrainFlags, SpecWordsMultiProcessExamplesAndLeavesOutCheckpoints) {
  const Parsed ddp = parse_train({"--help"}, {.program = "fashion_mnist_ddp",
                                              .batch_size_help = "global batch size, split across ranks",
                                              .multi_process = true});
  EXPECT_EQ(ddp.train.metrics, "fashion_mnist_ddp_metrics.jsonl");
  EXPECT_EQ(ddp.train.plot, "fashion_mnist_ddp.svg");
  for (const char* line : {"global batch size, split across ranks (default 128)",
                           "CPU threads per rank (default cores / ranks on this node, at least 1)",
                           "data-loader threads per rank (default 1)", "rank 0 writes a checkpoint after every epoch",
                           "(default fashion_mnist_ddp_metrics.jsonl)", "(default fashion_mnist_ddp.svg)"})
    EXPECT_NE(ddp.help.find(line), std::string::npos) << "missing '" << line << "' in:\n" << ddp.help;

  const TrainFlagsSpec pipe{.program = "fashion_mnist_pipe",
                            .batch_size_help = "batch size (one pipeline step)",
                            .multi_process = true,
                            .checkpoints = false};
  const std::string help = parse_train({"--help"}, pipe).help;
  EXPECT_NE(help.find("batch size (one pipeline step) (default 128)"), std::string::npos) << help;
  EXPECT_EQ(help.find("--save"), std::string::npos) << help;
  EXPECT_EQ(help.find("--resume"), std::string::npos) << help;
  EXPECT_WEFT_ERROR(parse_train({"--save", "ck"}, pipe), "unknown flag '--save'");
  EXPECT_WEFT_ERROR(parse_train({"--resume=ck"}, pipe), "unknown flag '--resume'");

  // Other models, and a metrics default the example sets itself.
  TrainFlags preset;
  preset.metrics = "mine.jsonl";
  preset.model = "gpt";
  FlagParser p("usage: prog");
  add_train_flags(p, preset, {.program = "prog", .models = {"gpt", "mlp"}});
  EXPECT_EQ(preset.metrics, "mine.jsonl");
  EXPECT_EQ(preset.plot, "prog.svg");
  EXPECT_NE(p.help().find("--model gpt|mlp"), std::string::npos) << p.help();
  EXPECT_NE(p.help().find("model (default gpt)"), std::string::npos) << p.help();
  EXPECT_NE(p.help().find("JSON-lines metrics (default mine.jsonl)"), std::string::npos) << p.help();
}

// "a b c" as {"a", "b", "c"}.
std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

TEST(TrainFlags, ParsedValuesAndPathsResolvedAgainstTheWorkingDirectory) {
  // The paths that are read must exist: --data fm (a directory under the
  // working directory) and --resume (an absolute file elsewhere).
  const std::string home = std::string(getenv("TEST_TMPDIR")) + "/paths";
  std::filesystem::create_directories(home + "/me/run/fm");
  std::ofstream(home + "/ck.weft") << "checkpoint";
  WorkingDirectory wd((home + "/me/run").c_str());
  const Parsed r = parse_train(
      words(
          "--data fm --model=mlp --epochs 2 --batch-size 64 --lr 0.1 --momentum 0 --weight-decay=0 --ema 0.99 --seed 7 "
          "--threads 3 --workers 2 --save ck.weft --resume " +
          home +
          "/ck.weft --metrics m.jsonl --plot out/p.svg --limit-train 1024 --limit-test 512 --no-progress "
          "--chart c.txt"),
      {.program = "fashion_mnist"});
  const TrainFlags& f = r.train;
  EXPECT_EQ(f.data, home + "/me/run/fm");
  EXPECT_EQ(f.model, "mlp");
  EXPECT_EQ(f.epochs, 2);
  EXPECT_EQ(f.batch_size, 64);
  EXPECT_DOUBLE_EQ(f.lr, 0.1);
  EXPECT_DOUBLE_EQ(f.momentum, 0.0);
  EXPECT_DOUBLE_EQ(f.weight_decay, 0.0);
  EXPECT_DOUBLE_EQ(f.ema, 0.99);
  EXPECT_EQ(f.seed, 7u);
  EXPECT_EQ(f.threads, 3);
  EXPECT_EQ(f.workers, 2);
  EXPECT_EQ(f.save, home + "/me/run/ck.weft");
  EXPECT_EQ(f.resume, home + "/ck.weft");  // absolute: as given
  EXPECT_EQ(f.metrics, home + "/me/run/m.jsonl");
  EXPECT_EQ(f.plot, home + "/me/run/out/p.svg");
  EXPECT_EQ(f.limit_train, 1024);
  EXPECT_EQ(f.limit_test, 512);
  EXPECT_FALSE(f.progress);
  EXPECT_EQ(r.chart, home + "/me/run/c.txt");  // the example's own path, resolved too

  // Defaults: the dataset's absolute directory stays, empty paths stay empty,
  // the default metrics, plot and chart land in the working directory.
  const Parsed d = parse_train({}, {.program = "fashion_mnist_pipe"});
  EXPECT_EQ(d.train.data, io::kFashionMnistDir);
  EXPECT_EQ(d.train.save, "");
  EXPECT_EQ(d.train.resume, "");
  EXPECT_EQ(d.train.metrics, home + "/me/run/fashion_mnist_pipe_metrics.jsonl");
  EXPECT_EQ(d.train.plot, home + "/me/run/fashion_mnist_pipe.svg");
  EXPECT_EQ(d.chart, home + "/me/run/chart.txt");

  WorkingDirectory none(nullptr);  // not under `bazel run`: relative paths stay relative
  EXPECT_EQ(parse_train({"--save", "ck.weft"}, {.program = "x"}).train.save, "ck.weft");
}

TEST(TrainFlags, BadValuesAreNamed) {
  const TrainFlagsSpec spec{.program = "fashion_mnist"};
  EXPECT_WEFT_ERROR(parse_train({"--epochs", "0"}, spec), "--epochs must be positive (got 0)");
  EXPECT_WEFT_ERROR(parse_train({"--batch-size", "-4"}, spec), "--batch-size must be positive (got -4)");
  EXPECT_WEFT_ERROR(parse_train({"--batch-size", "two"}, spec), "flag --batch-size: 'two' is not an integer");
  EXPECT_WEFT_ERROR(parse_train({"--workers=1.5"}, spec), "flag --workers: '1.5' is not an integer");
  EXPECT_WEFT_ERROR(parse_train({"--momentum", "nan"}, spec), "flag --momentum: 'nan' is not a finite number");
  EXPECT_WEFT_ERROR(parse_train({"--ema", "1"}, spec), "--ema must be in [0, 1) (0: none; got 1)");
  EXPECT_WEFT_ERROR(parse_train({"--model", "resnet"}, spec), "flag --model must be one of cnn|mlp, got 'resnet'");
  EXPECT_WEFT_ERROR(parse_train({"--metrics"}, spec), "flag --metrics needs a value (--metrics PATH)");
  EXPECT_WEFT_ERROR(parse_train({"--no-progress=yes"}, spec), "flag --no-progress takes no value");
  EXPECT_WEFT_ERROR(parse_train({"--limit-train", "x"}, spec), "flag --limit-train: 'x' is not an integer");
  // Registering the training flags twice on one parser is a registration error.
  TrainFlags f;
  FlagParser p("usage");
  add_train_flags(p, f, spec);
  EXPECT_WEFT_ERROR(add_train_flags(p, f, spec), "flag --data is registered twice");
}

TEST(TrainFlags, ThreadsPerRank) {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  EXPECT_EQ(resolve_threads(3, 8), 3);
  EXPECT_EQ(resolve_threads(0, 1), cores);
  EXPECT_EQ(resolve_threads(0, 0), cores);
  EXPECT_EQ(resolve_threads(-1, 2), std::max(1, cores / 2));
  EXPECT_EQ(resolve_threads(0, 100000), 1);
}

}  // namespace
}  // namespace weft::examples

namespace weft::examples {
namespace {

TEST(GridFlags, BalanceGridAndJoin) {
  EXPECT_EQ(parse_balance("6,4"), (std::vector<int>{6, 4}));
  EXPECT_WEFT_ERROR(parse_balance("6,x"), "--balance: 'x' in '6,x' is not a whole number");
  EXPECT_WEFT_ERROR(parse_balance("6,,4", "layers per stage"),
                    "--balance: '' in '6,,4' is not a whole number (layers per stage)");
  EXPECT_EQ(grid_dp(2, 0, 4), 2);
  EXPECT_EQ(grid_dp(1, 4, 4), 4);
  EXPECT_WEFT_ERROR(grid_dp(3, 0, 4), "--pp 3 does not divide the world size 4");
  EXPECT_WEFT_ERROR(grid_dp(2, 3, 4), "--pp 2 x --dp 3 = 6 ranks, but the world size is 4");
  EXPECT_EQ(join_ints({6, 4}), "6,4");
  EXPECT_EQ(join_ints({}), "");
}

}  // namespace
}  // namespace weft::examples
