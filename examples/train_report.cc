// user_path (contract in train_report.h).
#include "examples/train_report.h"

#include <cstdlib>

namespace weft::examples {

std::string user_path(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  const char* wd = std::getenv("BUILD_WORKING_DIRECTORY");
  return wd ? std::string(wd) + "/" + path : path;
}

}  // namespace weft::examples
