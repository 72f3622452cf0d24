// A damaged checkpoint resumed by the Trainer: each file of a committed
// checkpoint (momentum SGD state, LR schedule, history) mutated
// (tests/mutate.h) and re-signed in its manifest (tamper.h), so that the
// damage reaches the loading behind the checksums: the model's and the
// optimizer's state, the scheduler's, the RNG's, the history. Resuming and
// training on must then work or stop with a weft::Error, never crash.
#include <algorithm>
#include <filesystem>

#include "io/atomic_file.h"
#include "parallel/checkpoint/rotation.h"
#include "tests/mutate.h"
#include "tests/parallel/checkpoint/tamper.h"
#include "tests/train/cases.h"
#include "train/callbacks.h"
#include "train/trainer.h"

namespace weft::train {
namespace {

using namespace testcases;  // NOLINT
namespace fs = std::filesystem;

TEST(MalformedResume, EveryFileMutatedAndResigned) {
  const std::string root = fresh_dir("malformed_resume_saved"), work = fresh_dir("malformed_resume_work");
  {
    Trainer t(Local{}, model(), ce, sgd(sgd_options()), {.valid_name = "test"});
    t.add<LRSchedule>(cosine(2));
    t.add<Checkpoint>(CheckpointOptions{.root = root, .quiet = true});
    io::DataLoader train = loader(dataset());
    t.fit(train, nullptr, 1);
  }
  const auto saved = parallel::checkpoint::committed_checkpoints(root);
  ASSERT_EQ(saved.size(), 1u);
  const std::string dir = saved.back().second;
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  ASSERT_GE(names.size(), 6u);  // manifest, trainer state, two indexes, model and optimizer shards
  uint64_t seed = 1;
  for (const std::string& name : names) {
    const std::string valid = io::read_file(dir + "/" + name);
    const int count = name.find(".json") != std::string::npos ? 150 : 40;
    testing::MutantCounts counts;
    EXPECT_TRUE(testing::survives_mutants(
        valid, count, seed,
        [&](const std::string& m) {
          fs::remove_all(work);
          fs::copy(dir, work);
          parallel::checkpoint::tamper::replace_file(work, name, m);
          Trainer t(Local{}, model(kSeed + 1), ce, sgd(sgd_options()), {.valid_name = "test"});
          t.add<LRSchedule>(cosine(2));
          t.resume(work);
          io::DataLoader train = loader(dataset());
          t.fit(train, nullptr, 2);
        },
        &counts))
        << name;
    EXPECT_GT(counts.rejected, count / 4) << name;
    seed += static_cast<uint64_t>(count);
  }
}

}  // namespace
}  // namespace weft::train
