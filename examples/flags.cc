// FlagParser (examples/flags.h): registration, parsing, help.
#include "examples/flags.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <ostream>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>

#include "core/error.h"

namespace weft::examples {
namespace {

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

template <typename Int>
Int parse_integer(const std::string& flag, const std::string& s) {
  Int v{};
  const char* first = s.data();
  const char* last = s.data() + s.size();
  if (!s.empty() && s[0] == '+') ++first;  // from_chars rejects a leading '+'
  auto [end, ec] = std::from_chars(first, last, v);
  WEFT_FLAG_CHECK(ec != std::errc::result_out_of_range && !(std::is_unsigned_v<Int> && !s.empty() && s[0] == '-'),
                  "flag ", flag, ": '", s, "' is out of range (", std::numeric_limits<Int>::min(), " to ",
                  std::numeric_limits<Int>::max(), ")");
  WEFT_FLAG_CHECK(!s.empty() && ec == std::errc() && end == last, "flag ", flag, ": '", s, "' is not an integer");
  return v;
}

double parse_double(const std::string& flag, const std::string& s) {
  char* end = nullptr;
  const double v = s.empty() ? 0.0 : std::strtod(s.c_str(), &end);
  WEFT_FLAG_CHECK(!s.empty() && end != nullptr && *end == '\0', "flag ", flag, ": '", s, "' is not a number");
  WEFT_FLAG_CHECK(std::isfinite(v), "flag ", flag, ": '", s, "' is not a finite number");
  return v;
}

template <typename T>
std::string to_text(const T& v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace

int launcher_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"}) {
    const char* v = std::getenv(name);
    if (v == nullptr || *v == '\0') continue;
    int rank = 0;
    const char* last = v + std::char_traits<char>::length(v);
    auto [end, ec] = std::from_chars(v, last, rank);
    if (ec == std::errc() && end == last && rank >= 0) return rank;
  }
  return 0;
}

FlagParser::FlagParser(std::string usage) : usage_(std::move(usage)) {}

FlagParser::Flag& FlagParser::define(const std::string& spec, std::string help, std::string default_text) {
  const size_t space = spec.find(' ');
  std::string name = spec.substr(0, space);
  WEFT_CHECK(starts_with(name, "--") && name.size() > 2 && name.find('=') == std::string::npos,
             "FlagParser: flag name '", name, "' must look like --name");
  WEFT_CHECK(name != "--help", "FlagParser: --help is built in");
  WEFT_CHECK(find(name) == nullptr, "FlagParser: flag ", name, " is registered twice");
  Flag f;
  f.name = std::move(name);
  if (space != std::string::npos) f.meta = spec.substr(space + 1);
  f.help = std::move(help);
  f.default_text = std::move(default_text);
  flags_.push_back(std::move(f));
  return flags_.back();
}

FlagParser& FlagParser::add(const std::string& spec, std::string* value, std::string help, std::string default_text) {
  Flag& f = define(spec, std::move(help), default_text.empty() ? *value : std::move(default_text));
  f.set = [value](const std::string& v) { *value = v; };
  return *this;
}

FlagParser& FlagParser::add(const std::string& spec, int64_t* value, std::string help, std::string default_text) {
  Flag& f = define(spec, std::move(help), default_text.empty() ? to_text(*value) : std::move(default_text));
  f.set = [value, name = f.name](const std::string& v) { *value = parse_integer<int64_t>(name, v); };
  return *this;
}

FlagParser& FlagParser::add(const std::string& spec, int* value, std::string help, std::string default_text) {
  Flag& f = define(spec, std::move(help), default_text.empty() ? to_text(*value) : std::move(default_text));
  f.set = [value, name = f.name](const std::string& v) { *value = parse_integer<int>(name, v); };
  return *this;
}

FlagParser& FlagParser::add(const std::string& spec, uint64_t* value, std::string help, std::string default_text) {
  Flag& f = define(spec, std::move(help), default_text.empty() ? to_text(*value) : std::move(default_text));
  f.set = [value, name = f.name](const std::string& v) { *value = parse_integer<uint64_t>(name, v); };
  return *this;
}

FlagParser& FlagParser::add(const std::string& spec, double* value, std::string help, std::string default_text) {
  Flag& f = define(spec, std::move(help), default_text.empty() ? to_text(*value) : std::move(default_text));
  f.set = [value, name = f.name](const std::string& v) { *value = parse_double(name, v); };
  return *this;
}

FlagParser& FlagParser::add_choice(const std::string& name, std::string* value, std::vector<std::string> choices,
                                   std::string help) {
  WEFT_CHECK(!choices.empty(), "FlagParser: flag ", name, " has no choices");
  std::string meta;
  for (const auto& c : choices) meta += (meta.empty() ? "" : "|") + c;
  Flag& f = define(name + " " + meta, std::move(help), *value);
  f.set = [value, choices = std::move(choices), name = f.name, meta](const std::string& v) {
    bool ok = false;
    for (const auto& c : choices) ok = ok || c == v;
    WEFT_FLAG_CHECK(ok, "flag ", name, " must be one of ", meta, ", got '", v, "'");
    *value = v;
  };
  return *this;
}

FlagParser& FlagParser::add_switch(const std::string& name, bool* value, bool when_given, std::string help) {
  WEFT_CHECK(name.find(' ') == std::string::npos, "FlagParser: switch ", name, " takes no value placeholder");
  Flag& f = define(name, std::move(help), "");
  f.takes_value = false;
  f.set = [value, when_given](const std::string&) { *value = when_given; };
  return *this;
}

const FlagParser::Flag* FlagParser::find(const std::string& name) const {
  for (const Flag& f : flags_)
    if (f.name == name) return &f;
  return nullptr;
}

bool FlagParser::parse(int argc, const char* const* argv, std::ostream& help_out) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      if (launcher_rank() == 0) help_out << help();
      return false;
    }
    WEFT_FLAG_CHECK(starts_with(arg, "--") && arg.size() > 2, "unexpected argument '", arg,
                    "' (flags start with --; run with --help for the list)");
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(0, eq);
    const Flag* f = find(name);
    WEFT_FLAG_CHECK(f != nullptr, "unknown flag '", name, "' (run with --help for the list)");
    if (!f->takes_value) {
      WEFT_FLAG_CHECK(eq == std::string::npos, "flag ", name, " takes no value, got '", arg, "'");
      f->set("");
      continue;
    }
    std::string value;
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
    } else {
      WEFT_FLAG_CHECK(i + 1 < argc && !starts_with(argv[i + 1], "--"), "flag ", name, " needs a value (", name, " ",
                      f->meta.empty() ? "VALUE" : f->meta, ")");
      value = argv[++i];
    }
    f->set(value);
  }
  return true;
}

std::optional<int> FlagParser::parse_in_main(int argc, const char* const* argv, const std::string& program) {
  try {
    if (!parse(argc, argv, std::cout)) return 0;
  } catch (const Error& e) {  // parse() throws FlagError only
    if (launcher_rank() == 0) std::fprintf(stderr, "%s: error: %s\n", program.c_str(), e.message().c_str());
    return 2;
  }
  return std::nullopt;
}

std::string FlagParser::help() const {
  std::vector<std::string> heads;
  size_t width = 0;
  for (const Flag& f : flags_) {
    heads.push_back(f.name + (f.meta.empty() ? "" : " " + f.meta));
    width = std::max(width, heads.back().size());
  }
  std::ostringstream os;
  os << usage_ << "\n";
  for (size_t k = 0; k < flags_.size(); ++k) {
    const Flag& f = flags_[k];
    os << "  " << heads[k] << std::string(width - heads[k].size() + 2, ' ') << f.help;
    if (f.takes_value && !f.default_text.empty()) os << " (default " << f.default_text << ")";
    os << "\n";
  }
  os << "  --help" << std::string(width > 6 ? width - 6 + 2 : 2, ' ') << "print this help and exit\n";
  return os.str();
}

int run_main(const std::string& program, const std::function<int()>& body) {
  try {
    return body();
  } catch (const FlagError& e) {
    if (launcher_rank() == 0) {
      std::fprintf(stderr, "%s: error: %s\n", program.c_str(), e.message().c_str());
      std::fflush(stderr);
    } else {
      // mpirun ends the whole job when the first rank exits non-zero: the
      // silent ranks leave rank 0 a moment to print the one copy first.
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
    return 2;
  } catch (const Error& e) {
    std::fprintf(stderr, "\n%s: error: %s\n", program.c_str(), e.message().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "\n%s: error: %s\n", program.c_str(), e.what());
  }
  return 1;
}

}  // namespace weft::examples
