// Paths on the examples' command lines: user_path resolves a relative path
// against the directory `bazel run` was started from.
#pragma once

#include <string>

namespace weft::examples {

// A path relative to where the user launched `bazel run` (BUILD_WORKING_DIRECTORY);
// absolute and empty paths are returned as they are.
std::string user_path(const std::string& path);

}  // namespace weft::examples
