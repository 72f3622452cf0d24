// The GPT example's checkpoints (contract in checkpoint.h).
#include "examples/gpt/checkpoint.h"

#include <cerrno>
#include <cstdlib>

#include "core/error.h"
#include "parallel/checkpoint/reader.h"

namespace weft::examples::gpt {
namespace {

namespace ck = parallel::checkpoint;

// The whole of `text` as a decimal integer, else an error naming the key and the checkpoint.
int64_t parse_meta_int(const std::string& text, const std::string& key, const std::string& path) {
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  WEFT_CHECK(!text.empty() && end == text.c_str() + text.size() && errno == 0, "checkpoint '", path, "': '", key,
             "' in its trainer_state.json metadata is '", text, "', not an integer");
  return v;
}

int64_t meta_int(const std::map<std::string, std::string>& meta, const std::string& key, const std::string& path) {
  auto it = meta.find(key);
  WEFT_CHECK(it != meta.end(), "checkpoint '", path, "' is not a GPT example checkpoint (no '", key,
             "' in its trainer_state.json metadata)");
  return parse_meta_int(it->second, key, path);
}

}  // namespace

std::map<std::string, std::string> gpt_metadata(const GptConfig& g, int64_t steps) {
  return {{"gpt.layers", std::to_string(g.layers)},   {"gpt.heads", std::to_string(g.heads)},
          {"gpt.dim", std::to_string(g.dim)},         {"gpt.context", std::to_string(g.context)},
          {"gpt.vocab", std::to_string(g.vocab)},     {"gpt.tied", g.tied ? "1" : "0"},
          {"gpt.dropout", std::to_string(g.dropout)}, {"gpt.steps", std::to_string(steps)}};
}

SavedRun read_saved_run(const std::string& path) {
  ck::CheckpointReader reader(path);
  const auto& ts = reader.trainer_state();
  const auto meta = ts.value("metadata", std::map<std::string, std::string>{});
  SavedRun r;
  r.dir = reader.dir();
  r.step = ts.at("step").get<int64_t>();
  GptConfig& g = r.config;
  g.layers = meta_int(meta, "gpt.layers", r.dir);
  g.heads = meta_int(meta, "gpt.heads", r.dir);
  g.dim = meta_int(meta, "gpt.dim", r.dir);
  g.context = meta_int(meta, "gpt.context", r.dir);
  g.vocab = meta_int(meta, "gpt.vocab", r.dir);
  g.tied = meta_int(meta, "gpt.tied", r.dir) != 0;
  auto dropout = meta.find("gpt.dropout");
  if (dropout != meta.end()) {
    char* end = nullptr;
    g.dropout = std::strtod(dropout->second.c_str(), &end);
    WEFT_CHECK(!dropout->second.empty() && end == dropout->second.c_str() + dropout->second.size(), "checkpoint '",
               r.dir, "': 'gpt.dropout' in its trainer_state.json metadata is '", dropout->second, "', not a number");
  }
  auto steps = meta.find("gpt.steps");
  r.steps = steps == meta.end() ? 0 : parse_meta_int(steps->second, "gpt.steps", r.dir);
  return r;
}

void check_same_model(const GptConfig& f, const GptConfig& s, const std::string& path) {
  auto same = [&](const char* flag, int64_t mine, int64_t saved) {
    WEFT_CHECK(mine == saved, "--resume '", path, "': the checkpoint's model has ", flag, " ", saved, ", not ", mine,
               " (give ", flag, " ", saved, ")");
  };
  same("--layers", f.layers, s.layers);
  same("--heads", f.heads, s.heads);
  same("--dim", f.dim, s.dim);
  same("--context", f.context, s.context);
  WEFT_CHECK(f.tied == s.tied, "--resume '", path, "': the checkpoint's model has ", s.tied ? "a tied" : "an untied",
             " head (", s.tied ? "drop --untied" : "give --untied", ")");
}

}  // namespace weft::examples::gpt
