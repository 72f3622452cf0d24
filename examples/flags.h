// Command-line flags for the example and benchmark programs: one parser instead
// of a hand-written loop in every main().
//
// Contract:
// - A flag is registered with its name and a value placeholder ("--epochs N"),
//   a pointer to the variable it sets and a help line. The variable's value at
//   registration is the default; help() prints it, or `default_text` when given
//   (for defaults like "all cores"); an empty string default prints none.
// - Both `--name value` and `--name=value` are accepted; a later occurrence
//   overrides an earlier one. A value may start with a single '-' (negative
//   numbers) but not with "--" in the `--name value` form: `--save --epochs 2`
//   is "--save needs a value", not a file named "--epochs".
// - Switches (add_switch) take no value and set their variable to a fixed one.
// - Integers must be whole numbers in the variable's range, doubles finite
//   numbers, choices one of the listed words. Every error is a weft::Error that
//   names the flag (unknown flag, missing value, bad number, value not allowed,
//   value given to a switch, stray positional argument).
// - parse() returns false after writing help() to `help_out` when --help or -h
//   is given (the program should then exit 0); it never exits by itself.
//   parse_in_main() wraps it for a main() that has nothing else to report.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

namespace weft::examples {

class FlagParser {
 public:
  // `usage` is help()'s first line, e.g. "usage: fashion_mnist [flags]".
  explicit FlagParser(std::string usage);

  // `spec` is "--name" or "--name META" (META names the value in help()).
  FlagParser& add(const std::string& spec, std::string* value, std::string help, std::string default_text = "");
  FlagParser& add(const std::string& spec, int64_t* value, std::string help, std::string default_text = "");
  FlagParser& add(const std::string& spec, int* value, std::string help, std::string default_text = "");
  FlagParser& add(const std::string& spec, uint64_t* value, std::string help, std::string default_text = "");
  FlagParser& add(const std::string& spec, double* value, std::string help, std::string default_text = "");
  // A string restricted to `choices`; help() shows them as META ("cnn|mlp").
  FlagParser& add_choice(const std::string& name, std::string* value, std::vector<std::string> choices,
                         std::string help);
  // `--name` (no value) sets *value = when_given.
  FlagParser& add_switch(const std::string& name, bool* value, bool when_given, std::string help);

  // Parses argv[1..argc-1]. Returns false when help was requested (and printed).
  bool parse(int argc, const char* const* argv, std::ostream& help_out);
  // The usage line and one aligned line per flag, in registration order.
  std::string help() const;
  // For main(): parses; returns std::nullopt to go on, else the exit status:
  // 0 after --help (printed to stdout), 2 after a flag error (printed to stderr
  // as "<program>: error: <message>").
  std::optional<int> parse_in_main(int argc, const char* const* argv, const std::string& program);

 private:
  struct Flag {
    std::string name;  // with the leading "--"
    std::string meta;  // empty for switches
    std::string help;
    std::string default_text;
    bool takes_value = true;
    std::function<void(const std::string& value)> set;
  };
  Flag& define(const std::string& spec, std::string help, std::string default_text);
  const Flag* find(const std::string& name) const;

  std::string usage_;
  std::vector<Flag> flags_;
};

// For main(): runs `body` and returns its status; a weft::Error or other
// std::exception escaping it is printed to stderr as "\n<program>: error:
// <message>" and gives 1.
int run_main(const std::string& program, const std::function<int()>& body);

}  // namespace weft::examples
