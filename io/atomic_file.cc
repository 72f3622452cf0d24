#include "io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

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

}  // namespace weft::io
