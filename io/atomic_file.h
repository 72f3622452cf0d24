// Atomic file replacement: write to a temporary file beside the target, fsync it,
// rename it over the target, fsync the directory. A crash or an exception at any
// point leaves either the old file or the new one, never a half-written file.
#pragma once

#include <functional>
#include <ostream>
#include <string>

namespace weft::io {

// Calls write(stream) on a temporary file and atomically installs it at `path`.
// Throws weft::Error naming the file on any I/O failure (the temporary is removed).
void write_atomically(const std::string& path, const std::function<void(std::ostream&)>& write);

// Reads a whole file; throws weft::Error naming the file if it cannot be read.
std::string read_file(const std::string& path);

}  // namespace weft::io
