// Library version reports (core/cuda/library_versions.h).
#include "core/cuda/library_versions.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>

namespace weft::cuda {

std::string mmp_text(int64_t v) {
  return std::to_string(v / 10000) + "." + std::to_string(v % 10000 / 100) + "." + std::to_string(v % 100);
}

std::string cuda_text(int64_t v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

std::string version_line(const std::string& library, int64_t runtime, int64_t built, std::string (*text)(int64_t)) {
  std::string line = "weft: " + library + " " + text(runtime) + " loaded (built with " + text(built);
  if (runtime < built) line += "; the loaded library is older than the headers";
  return line + ")";
}

bool print_version_once(const std::string& key, const std::string& line) {
  static std::mutex mu;
  static auto* seen = new std::set<std::string>();  // leaked: reports may come late in exit
  {
    std::lock_guard<std::mutex> lk(mu);
    if (!seen->insert(key).second) return false;
  }
  const char* env = std::getenv("WEFT_PRINT_VERSIONS");
  if (env != nullptr && std::string(env) == "0") return false;
  std::fprintf(stderr, "%s\n", line.c_str());
  return true;
}

}  // namespace weft::cuda
