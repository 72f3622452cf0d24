// FlagParser (examples/flags.h): both value syntaxes, defaults, help, and the
// errors that name the flag.
#include "examples/flags.h"

#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace weft::examples
