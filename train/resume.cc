// Locating a checkpoint and converting positional optimizer state (train/resume.h).
#include "train/resume.h"

#include <filesystem>
#include <system_error>

#include "core/error.h"
#include "parallel/checkpoint/format.h"
#include "parallel/checkpoint/rotation.h"

namespace weft::train {

namespace fs = std::filesystem;
namespace ck = parallel::checkpoint;

CheckpointLocation locate_checkpoint(const std::string& path) {
  std::error_code ec;
  WEFT_CHECK(!path.empty(), "resume: no checkpoint path given");
  const fs::file_status st = fs::status(path, ec);
  WEFT_CHECK(fs::exists(st), "resume: '", path, "': no such file or directory");
  CheckpointLocation loc;
  if (fs::is_directory(st)) {
    if (fs::is_regular_file(fs::path(path) / ck::kManifestFile, ec)) {
      loc.path = path;
      return loc;
    }
    loc.path = ck::latest_checkpoint(path);
    if (!loc.path.empty()) return loc;
    const bool uncommitted =
        fs::exists(fs::path(path) / ck::kModelIndexFile, ec) || fs::exists(fs::path(path) / ck::kTrainerStateFile, ec);
    WEFT_CHECK(!uncommitted, "resume: '", path, "' is a checkpoint directory without ", ck::kManifestFile,
               ": its save did not commit (interrupted or incomplete), so it is not loaded");
    WEFT_ERROR("resume: '", path,
               "' is a directory with no committed checkpoint: expected a partitioned checkpoint directory (with ",
               ck::kManifestFile,
               ") or a root holding step-<N> directories (as the Checkpoint callback and --save "
               "write them)");
  }
  loc.kind = CheckpointLocation::Kind::kSingleFile;
  loc.path = path;
  try {
    loc.contents = io::load_checkpoint(path);
  } catch (const Error& e) {
    WEFT_ERROR("resume: '", path, "' is not a checkpoint: ", e.what());
  }
  return loc;
}

optim::OptimizerStateDict optimizer_state_by_name(const optim::OptimizerStateDict& positional,
                                                  const std::vector<std::string>& names, const std::string& where) {
  optim::OptimizerStateDict out;
  auto name_of = [&](const std::string& index) -> const std::string& {
    size_t pos = 0;
    long long i = -1;
    try {
      i = std::stoll(index, &pos);
    } catch (const std::exception&) {
    }
    WEFT_CHECK(pos == index.size() && i >= 0 && i < static_cast<long long>(names.size()), where,
               ": optimizer state refers to parameter '", index, "' but the model has ", names.size(), " parameters");
    return names[static_cast<size_t>(i)];
  };
  // Group options: param_groups.<g>.params lists the group's parameters.
  std::map<std::string, std::vector<int64_t>> group_params;
  for (const auto& [key, t] : positional) {
    if (key.rfind("param_groups.", 0) != 0) continue;
    const std::string rest = key.substr(13);
    const size_t dot = rest.find('.');
    WEFT_CHECK(dot != std::string::npos, where, ": malformed optimizer key '", key, "'");
    if (rest.substr(dot + 1) != "params") continue;
    Tensor idx = t.to(DType::Int64).contiguous();
    group_params[rest.substr(0, dot)].assign(idx.data_ptr<int64_t>(), idx.data_ptr<int64_t>() + idx.numel());
  }
  for (const auto& [key, t] : positional) {
    if (key.rfind("state.", 0) == 0) {
      const std::string rest = key.substr(6);
      const size_t dot = rest.find('.');
      WEFT_CHECK(dot != std::string::npos, where, ": malformed optimizer key '", key, "'");
      out["state." + name_of(rest.substr(0, dot)) + rest.substr(dot)] = t;
    } else if (key.rfind("param_groups.", 0) == 0) {
      const std::string rest = key.substr(13);
      const size_t dot = rest.find('.');
      const std::string opt = rest.substr(dot + 1);
      if (opt == "params") continue;
      for (int64_t i : group_params[rest.substr(0, dot)]) out["options." + name_of(std::to_string(i)) + "." + opt] = t;
    } else {
      WEFT_ERROR(where, ": unexpected optimizer key '", key, "'");
    }
  }
  return out;
}

}  // namespace weft::train
