#include "io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <sys/stat.h>

#include "core/error.h"

namespace weft::io {
namespace {

void fsync_path(const std::string& path, bool directory) {
  int fd = ::open(path.c_str(), directory ? (O_RDONLY | O_DIRECTORY) : O_RDONLY);
  if (fd < 0) return;  // best effort for directories on odd filesystems
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  WEFT_CHECK(rc == 0 || directory, "write_atomically: fsync of '", path, "' failed: ", std::strerror(err));
}

std::string dir_of(const std::string& path) {
  auto pos = path.find_last_of('/');
  if (pos == std::string::npos) return ".";
  if (pos == 0) return "/";
  return path.substr(0, pos);
}

}  // namespace

void write_atomically(const std::string& path, const std::function<void(std::ostream&)>& write) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  try {
    {
      std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
      WEFT_CHECK(out.good(), "write_atomically: cannot open '", tmp, "' for writing: ", std::strerror(errno));
      write(out);
      out.flush();
      WEFT_CHECK(out.good(), "write_atomically: writing '", tmp, "' failed (disk full?)");
    }
    fsync_path(tmp, false);
    WEFT_CHECK(::rename(tmp.c_str(), path.c_str()) == 0, "write_atomically: renaming '", tmp, "' to '", path,
               "' failed: ", std::strerror(errno));
    fsync_path(dir_of(path), true);
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  WEFT_CHECK(in.good(), "cannot open '", path, "': ", std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  WEFT_CHECK(!in.bad(), "error reading '", path, "'");
  return ss.str();
}

void write_file_synced(const std::string& path, const std::string& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  WEFT_CHECK(fd >= 0, "cannot open '", path, "' for writing: ", std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      WEFT_ERROR("writing '", path, "' failed after ", done, " of ", bytes.size(),
                 " bytes: ", n < 0 ? std::strerror(err) : "no progress (disk full?)");
    }
    done += static_cast<size_t>(n);
  }
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  WEFT_CHECK(rc == 0, "fsync of '", path, "' failed: ", std::strerror(err));
}

void fsync_directory(const std::string& dir) { fsync_path(dir, true); }

std::string read_file_range(const std::string& path, uint64_t offset, uint64_t length) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  WEFT_CHECK(fd >= 0, "cannot open '", path, "': ", std::strerror(errno));
  std::string out(length, '\0');
  uint64_t done = 0;
  while (done < length) {
    const ssize_t n = ::pread(fd, out.data() + done, length - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      struct stat st {};
      const bool have_size = ::fstat(fd, &st) == 0;
      ::close(fd);
      WEFT_CHECK(n == 0, "reading '", path, "' at byte ", offset + done, " failed: ", std::strerror(err));
      WEFT_ERROR("'", path, "' is truncated: bytes [", offset, ", ", offset + length, ") were asked for but it has ",
                 have_size ? std::to_string(st.st_size) : std::string("fewer"), " bytes");
    }
    done += static_cast<uint64_t>(n);
  }
  ::close(fd);
  return out;
}

}  // namespace weft::io
