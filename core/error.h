// weft::Error and the checking macros used everywhere.
//
// Contract: WEFT_CHECK(cond, parts...) throws weft::Error whose message starts with
// the streamed parts and ends with " (file:line)". Library code reports user errors
// through WEFT_CHECK and broken invariants through WEFT_INTERNAL_ASSERT; it never
// calls exit() or abort().
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace weft {

class Error : public std::runtime_error {
 public:
  Error(std::string msg, const char* file, int line)
      : std::runtime_error(msg + " (" + file + ":" + std::to_string(line) + ")"),
        what_without_location_(std::move(msg)) {}
  // The message without the file:line suffix.
  const std::string& message() const { return what_without_location_; }

 private:
  std::string what_without_location_;
};

namespace detail {
template <typename... Args>
std::string str_cat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}
}  // namespace detail

}  // namespace weft

#define WEFT_CHECK(cond, ...)                                                        \
  do {                                                                               \
    if (!(cond)) [[unlikely]] {                                                      \
      throw ::weft::Error(::weft::detail::str_cat(__VA_ARGS__), __FILE__, __LINE__); \
    }                                                                                \
  } while (0)

#define WEFT_ERROR(...) throw ::weft::Error(::weft::detail::str_cat(__VA_ARGS__), __FILE__, __LINE__)

#define WEFT_INTERNAL_ASSERT(cond, ...)                                                                            \
  do {                                                                                                             \
    if (!(cond)) [[unlikely]] {                                                                                    \
      throw ::weft::Error(                                                                                         \
          ::weft::detail::str_cat("internal assert failed: " #cond ". ", ##__VA_ARGS__, " (please report a bug)"), \
          __FILE__, __LINE__);                                                                                     \
    }                                                                                                              \
  } while (0)
