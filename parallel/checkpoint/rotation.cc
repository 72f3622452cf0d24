// Committed checkpoints under a root, leftovers and rotation (contract in rotation.h).
#include "parallel/checkpoint/rotation.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "parallel/checkpoint/format.h"

namespace weft::parallel::checkpoint {

namespace fs = std::filesystem;

std::vector<std::pair<int64_t, std::string>> committed_checkpoints(const std::string& root) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return out;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    if (name.size() != 13 || name.rfind("step-", 0) != 0) continue;
    if (!std::all_of(name.begin() + 5, name.end(), [](char c) { return c >= '0' && c <= '9'; })) continue;
    if (!fs::is_regular_file(e.path() / kManifestFile, ec)) continue;
    out.emplace_back(std::stoll(name.substr(5)), e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string latest_checkpoint(const std::string& root) {
  auto all = committed_checkpoints(root);
  return all.empty() ? std::string() : all.back().second;
}

void remove_incomplete(const std::string& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec)) return;
  std::vector<fs::path> stale;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(".tmp-", 0) == 0 || name.rfind(".old-", 0) == 0) stale.push_back(e.path());
  }
  for (const auto& p : stale) fs::remove_all(p, ec);
}

std::vector<std::string> prune(const std::string& root, int keep_last) {
  std::vector<std::string> removed;
  if (keep_last <= 0) return removed;
  auto all = committed_checkpoints(root);
  for (size_t i = 0; i + static_cast<size_t>(keep_last) < all.size(); ++i) {
    std::error_code ec;
    // Rename first, so that a crash mid-delete leaves a ".old-" leftover, never a half checkpoint.
    const fs::path gone = fs::path(root) / (".old-" + fs::path(all[i].second).filename().string());
    fs::rename(all[i].second, gone, ec);
    if (ec) continue;  // left in place, still whole
    fs::remove_all(gone, ec);
    removed.push_back(all[i].second);
  }
  return removed;
}

}  // namespace weft::parallel::checkpoint
