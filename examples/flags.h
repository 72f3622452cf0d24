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
//   numbers, choices one of the listed words. Every error is a FlagError (a
//   weft::Error) that names the flag (unknown flag, missing value, bad number,
//   value not allowed, value given to a switch, stray positional argument).
//   Checks after parsing throw FlagError too (WEFT_FLAG_CHECK), naming the flag
//   and the value at fault.
// - parse() returns false when --help or -h is given (the program should then
//   exit 0), after writing help() to `help_out` on launcher rank 0 only; it
//   never exits by itself. parse_in_main() wraps it for a main() that has
//   nothing else to report.
// - Under mpirun every rank parses the same command line, so help and flag
//   errors are printed once: by the process whose launcher_rank() is 0. The
//   other ranks print nothing and end the same way (0 after --help, 2 after a
//   flag error). The rank comes from the launcher's environment, known before
//   MPI is initialised: OMPI_COMM_WORLD_RANK (Open MPI), else PMIX_RANK, else
//   PMI_RANK; 0 when none is set (one process).
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"

namespace weft::examples {

// A mistake on the command line (a flag, its value or a combination of flags):
// the same on every rank, so reported once (see the contract above).
class FlagError : public Error {
 public:
  using Error::Error;
};

// This process's rank as its launcher set it (OMPI_COMM_WORLD_RANK, PMIX_RANK,
// PMI_RANK, in that order; a value that is not a whole number counts as unset);
// 0 outside a launcher.
int launcher_rank();

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
  // as "<program>: error: <message>"); printed on launcher rank 0 only.
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

// For main(): runs `body` and returns its status. A FlagError escaping it is
// printed to stderr as "<program>: error: <message>" on launcher rank 0 only
// and gives 2 on every rank (the other ranks return a second later, so that
// mpirun, which ends the job at the first failed rank, lets rank 0 print); any other weft::Error or std::exception is
// printed by every rank as "\n<program>: error: <message>" (a rank's own
// failure) and gives 1.
int run_main(const std::string& program, const std::function<int()>& body);

}  // namespace weft::examples

// WEFT_CHECK for command-line checks: throws weft::examples::FlagError.
#define WEFT_FLAG_CHECK(cond, ...)                                                                 \
  do {                                                                                             \
    if (!(cond)) [[unlikely]] {                                                                    \
      throw ::weft::examples::FlagError(::weft::detail::str_cat(__VA_ARGS__), __FILE__, __LINE__); \
    }                                                                                              \
  } while (0)
