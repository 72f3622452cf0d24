// Atomic file replacement: write to a temporary file beside the target, fsync it,
// rename it over the target, fsync the directory. A crash or an exception at any
// point leaves either the old file or the new one, never a half-written file.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>

namespace weft::io {

// Calls write(stream) on a temporary file and atomically installs it at `path`.
// Throws weft::Error naming the file on any I/O failure (the temporary is removed).
void write_atomically(const std::string& path, const std::function<void(std::ostream&)>& write);

// Reads a whole file; throws weft::Error naming the file if it cannot be read.
std::string read_file(const std::string& path);

// Durable pieces for multi-file commits (parallel/checkpoint/): writes
// `bytes` to `path` (created or truncated) and fsyncs it before returning;
// fsyncs a directory so that entries created, renamed or removed in it
// survive a crash. Errors name the file and the system's reason.
void write_file_synced(const std::string& path, const std::string& bytes);
void fsync_directory(const std::string& dir);

// Reads `length` bytes at `offset` of `path` (pread: nothing else of the file
// is read). A file too short for the range is an error naming the file, the
// range and its size ("is truncated").
std::string read_file_range(const std::string& path, uint64_t offset, uint64_t length);

}  // namespace weft::io
