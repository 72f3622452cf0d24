// Damaged partitioned checkpoints against the reader: each file of
// golden/python_written (manifest, indexes, trainer state, shards) is
// mutated (tests/mutate.h) and re-signed in the manifest (tamper.h), so the
// damage gets past the checksums to the parsing and the cross-checks behind
// them. Opening, verifying and reading every tensor must then return or throw
// weft::Error; a tensor read must have the shape its index gives.
#include <filesystem>

#include <gtest/gtest.h>

#include "io/atomic_file.h"
#include "io/crc32.h"
#include "parallel/checkpoint/load.h"
#include "parallel/checkpoint/reader.h"
#include "tests/mutate.h"
#include "tests/parallel/checkpoint/tamper.h"

namespace weft::parallel::checkpoint {
namespace {

namespace fs = std::filesystem;
using testing::MutantCounts;
using testing::survives_mutants;

const std::string kGolden = "tests/parallel/checkpoint/golden/python_written/step-00000003";

std::string tmp_dir(const std::string& name) {
  const char* d = std::getenv("TEST_TMPDIR");
  return std::string(d ? d : "/tmp") + "/" + name;
}

// Everything a resuming job reads.
void read_everything(const std::string& dir) {
  CheckpointReader r(dir);
  r.verify_headers();
  for (const PieceMap* map : {&r.model(), &r.optimizer()})
    for (const auto& [name, pieces] : *map) {
      const Tensor t = r.read(name, pieces);
      if (pieces.empty() || t.sizes() != pieces.front().shape)
        WEFT_ERROR("read '", name, "' with a shape its index does not give");
      if (t.numel() > 1) r.read_elements(name, pieces, 1, t.numel());
    }
  r.verify_all();
  load_model_state(dir);
  load_optimizer_state(dir);
}

TEST(MalformedCheckpoint, EveryFileMutatedAndResigned) {
  const std::string dir = tmp_dir("mutant_checkpoint");
  ASSERT_NO_THROW(read_everything(kGolden));
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(kGolden)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  ASSERT_EQ(names.size(), 8u);
  uint64_t seed = 1;
  for (const std::string& name : names) {
    const std::string valid = io::read_file(kGolden + "/" + name);
    // the JSON files get more mutants: they hold what the reader parses
    const int count = name.find(".json") != std::string::npos ? 600 : 250;
    MutantCounts counts;
    EXPECT_TRUE(survives_mutants(
        valid, count, seed,
        [&](const std::string& m) {
          fs::remove_all(dir);
          fs::copy(kGolden, dir);
          tamper::replace_file(dir, name, m);
          read_everything(dir);
        },
        &counts))
        << name;
    EXPECT_GT(counts.rejected, count / 4) << name;
    seed += static_cast<uint64_t>(count);
  }
}

}  // namespace
}  // namespace weft::parallel::checkpoint
