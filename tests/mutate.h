// Damaged inputs for the readers' tests: deterministic mutations of a valid
// file's bytes (or text), and a check that a reader handed each mutant either
// returns or throws weft::Error -- never another exception (a JSON library's,
// std::bad_alloc from a size read off the file, std::out_of_range), never a
// crash or a hang; under tools/sanitize.sh asan, never a memory error.
//
// A mutant is one to four edits, each picked from: flip a bit; set a byte to a
// value that means something to a parser ('{', '"', ':', 0, 0xff, ...); write
// an extreme integer (0, 2^31, 2^32 - 1, 2^62, 2^64 - 1, ...) as 4 or 8 bytes,
// little- or big-endian; erase, duplicate or insert a run of bytes; truncate;
// replace a decimal number in text with an extreme one or with a value of
// another JSON type; swap a word for another word of the same input.
//
// Mutant i of a run is a function of (seed + i) alone, so a failure names the
// seed that reproduces it. An internal assert (WEFT_INTERNAL_ASSERT) counts as
// a failure: damaged input must be caught by a check that names the fault. When a mutant crashes the process, rerun the
// test with WEFT_MUTANT_TRACE=1: each mutant's seed is printed before it is read.
#pragma once

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"

namespace weft::testing {

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull) {}

  // splitmix64
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // uniform in [0, n), 0 when n is 0
  size_t below(size_t n) { return n == 0 ? 0 : static_cast<size_t>(next() % n); }

  std::string mutate(const std::string& in) {
    std::string s = in;
    const size_t edits = 1 + below(4);
    for (size_t e = 0; e < edits; ++e) edit(s);
    return s;
  }

 private:
  void edit(std::string& s) {
    static const unsigned char kBytes[] = {0,   1,   0x7f, 0x80, 0xff, '"',  '{', '}', '[', ']',  ',',
                                           ':', '-', '0',  '9',  ' ',  '\n', '#', 'e', '.', '\\', '+'};
    static const uint64_t kInts[] = {0,
                                     1,
                                     2,
                                     0x7f,
                                     0xff,
                                     0xffff,
                                     0x7fffffffull,
                                     0x80000000ull,
                                     0xffffffffull,
                                     0x100000000ull,
                                     1ull << 40,
                                     1ull << 61,
                                     1ull << 62,
                                     0x7fffffffffffffffull,
                                     0x8000000000000000ull,
                                     0xffffffffffffffffull};
    static const char* const kTexts[] = {"0",
                                         "-1",
                                         "1",
                                         "-0",
                                         "7",
                                         "255",
                                         "2147483648",
                                         "4294967295",
                                         "4294967296",
                                         "1099511627776",
                                         "2305843009213693952",
                                         "4611686018427387904",
                                         "9223372036854775807",
                                         "9223372036854775808",
                                         "18446744073709551615",
                                         "18446744073709551616",
                                         "99999999999999999999999",
                                         "1e308",
                                         "1e400",
                                         "0.5",
                                         "-2.5e-7",
                                         "null",
                                         "true",
                                         "\"x\"",
                                         "\"\"",
                                         "[]",
                                         "[1,2]",
                                         "{}"};
    switch (below(11)) {
      case 0:  // flip a bit
        if (!s.empty()) s[below(s.size())] ^= static_cast<char>(1u << below(8));
        break;
      case 1:  // a byte that means something to a parser
        if (!s.empty()) s[below(s.size())] = static_cast<char>(kBytes[below(sizeof kBytes)]);
        break;
      case 2: {  // an extreme integer, 4 or 8 bytes, either byte order
        const uint64_t v = kInts[below(sizeof kInts / sizeof kInts[0])];
        const size_t width = below(2) ? 8 : 4;
        const bool big = below(2) != 0;
        if (s.size() < width) break;
        const size_t at = below(s.size() - width + 1);
        for (size_t k = 0; k < width; ++k) {
          const size_t shift = 8 * (big ? width - 1 - k : k);
          s[at + k] = static_cast<char>((v >> shift) & 0xff);
        }
        break;
      }
      case 3: {  // erase a run
        if (s.empty()) break;
        const size_t at = below(s.size());
        s.erase(at, 1 + below(below(2) ? 16 : s.size() - at));
        break;
      }
      case 4: {  // duplicate a run
        if (s.empty()) break;
        const size_t at = below(s.size());
        const std::string run = s.substr(at, 1 + below(64));
        s.insert(below(s.size() + 1), run);
        break;
      }
      case 5:  // truncate
        s.resize(below(s.size() + 1));
        break;
      case 6: {  // insert random bytes
        std::string run(1 + below(8), '\0');
        for (char& c : run) c = static_cast<char>(next() & 0xff);
        s.insert(below(s.size() + 1), run);
        break;
      }
      case 7:
      case 8:
      case 9: {  // a decimal number in text -> an extreme number or another JSON value
        std::vector<std::pair<size_t, size_t>> numbers;  // [begin, end)
        for (size_t i = 0; i < s.size();) {
          if (std::isdigit(static_cast<unsigned char>(s[i]))) {
            size_t b = i > 0 && s[i - 1] == '-' ? i - 1 : i;
            while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
            numbers.push_back({b, i});
          } else {
            ++i;
          }
        }
        if (numbers.empty()) break;
        const auto [b, e] = numbers[below(numbers.size())];
        s.replace(b, e - b, kTexts[below(sizeof kTexts / sizeof kTexts[0])]);
        break;
      }
      case 10: {  // a word -> another word of the input
        std::vector<std::pair<size_t, size_t>> words;
        for (size_t i = 0; i < s.size();) {
          if (std::isalpha(static_cast<unsigned char>(s[i])) || s[i] == '_') {
            size_t b = i;
            while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_' || s[i] == '.')) ++i;
            words.push_back({b, i});
          } else {
            ++i;
          }
        }
        if (words.size() < 2) break;
        const auto [b, e] = words[below(words.size())];
        const auto [fb, fe] = words[below(words.size())];
        const std::string from = s.substr(fb, fe - fb);
        s.replace(b, e - b, from);
        break;
      }
    }
  }

  uint64_t state_;
};

// The first `n` bytes of `s` in hex, for a failure message.
inline std::string hex_prefix(const std::string& s, size_t n = 128) {
  std::string out;
  char buf[4];
  for (size_t i = 0; i < s.size() && i < n; ++i) {
    std::snprintf(buf, sizeof buf, "%02x", static_cast<unsigned char>(s[i]));
    out += buf;
  }
  if (s.size() > n) out += "...";
  return out;
}

struct MutantCounts {
  int read = 0;      // the reader returned
  int rejected = 0;  // the reader threw weft::Error
};

// Hands `count` mutants of `valid` (seeds first_seed, first_seed + 1, ...) to
// read(const std::string&); each must return or throw weft::Error. Fails at
// the first that throws anything else, naming its seed, the exception and the
// mutant's first bytes. `counts` (optional) tallies the outcomes.
template <class Read>
::testing::AssertionResult survives_mutants(const std::string& valid, int count, uint64_t first_seed, Read&& read,
                                            MutantCounts* counts = nullptr) {
  const bool trace = std::getenv("WEFT_MUTANT_TRACE") != nullptr;
  MutantCounts local;
  for (int i = 0; i < count; ++i) {
    const uint64_t seed = first_seed + static_cast<uint64_t>(i);
    const std::string m = Mutator(seed).mutate(valid);
    if (trace) std::fprintf(stderr, "mutant seed %llu\n", static_cast<unsigned long long>(seed));
    try {
      read(m);
      ++local.read;
    } catch (const weft::Error& e) {
      if (std::string(e.what()).find("internal assert failed") != std::string::npos)
        return ::testing::AssertionFailure() << "mutant seed " << seed << " tripped an internal assert: " << e.what()
                                             << "\n  bytes: " << hex_prefix(m);
      ++local.rejected;
    } catch (const std::exception& e) {
      return ::testing::AssertionFailure()
             << "mutant seed " << seed << " (" << m.size() << " bytes) threw a non-weft exception: " << e.what()
             << "\n  bytes: " << hex_prefix(m);
    } catch (...) {
      return ::testing::AssertionFailure() << "mutant seed " << seed << " threw a non-exception object";
    }
  }
  if (counts) *counts = local;
  return ::testing::AssertionSuccess();
}

}  // namespace weft::testing
