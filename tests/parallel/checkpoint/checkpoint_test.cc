// Partitioned checkpoints with ranks as threads (parallel/inproc): the
// resharding matrix (saved at 2x2 with ZeRO, resumed at 4x1, 1x4, 1x1 and
// back; losses within 1e-5 of one process; on the same layout bitwise equal
// to the uninterrupted run), partial and full round trips, the on-disk
// format, reading only a rank's part, async saves, rotation, interrupted
// saves, damaged checkpoints named by file, extra files (committed, listed,
// verified), mismatched models listing every key. A tied pipeline resuming from one process: tied_checkpoint_test.cc.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "parallel/checkpoint/reader.h"
#include "parallel/checkpoint/rotation.h"
#include "parallel/comm/inproc/testing.h"
#include "tests/parallel/checkpoint/ck_cases.h"
#include "tests/parallel/checkpoint/tamper.h"

namespace weft::parallel::checkpoint {
namespace {

using namespace testcases;  // NOLINT
namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kSteps = 8, kSaveAfter = 3;  // the checkpoint holds step count 4

std::string temp_dir(const std::string& tag = "") {
  const char* t = std::getenv("TEST_TMPDIR");
  std::string d =
      std::string(t ? t : "/tmp") + "/pck_" + ::testing::UnitTest::GetInstance()->current_test_info()->name() + tag;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::vector<TrainResult> run_world(const TrainRun& run, const Data& d) {
  std::vector<TrainResult> res(run.layout.world());
  std::vector<std::shared_ptr<nn::Sequential>> models;
  for (int r = 0; r < run.layout.world(); ++r) models.push_back(rank_model(run, r));
  run_ranks(run.layout.world(),
            [&](std::shared_ptr<ProcessGroup> g) { res[g->rank()] = run_rank(run, d, g, models[g->rank()]); });
  return res;
}

TrainRun saving(Layout l, const std::string& root, Opt o = Opt::kAdamW, SaveOptions so = {}) {
  TrainRun r{l, o, 0, kSaveAfter + 1};
  r.save_root = root;
  r.save_after = kSaveAfter;
  r.save_options = so;
  return r;
}

TrainRun resuming(Layout l, const std::string& from, Opt o = Opt::kAdamW) {
  TrainRun r{l, o, kSaveAfter + 1, kSteps};
  r.resume = from;
  return r;
}

const Data& data() {
  static const Data d = make_data(kSteps);
  return d;
}

TEST(PartitionedCheckpoint, SameLayoutResumesBitwise) {
  for (Layout l : {Layout{1, 1}, Layout{2, 2, true}, Layout{4, 1}, Layout{1, 4, true}}) {
    SCOPED_TRACE(l.str());
    const std::string root = temp_dir(std::to_string(l.pp) + std::to_string(l.dp));
    auto whole = run_world(TrainRun{l, Opt::kAdamW, 0, kSteps}, data());
    run_world(saving(l, root), data());
    auto resumed = run_world(resuming(l, root), data());
    for (int r = 0; r < l.world(); ++r) {
      EXPECT_EQ(resumed[r].loaded.step, kSaveAfter + 1);
      EXPECT_EQ(resumed[r].loaded.batch, kSaveAfter + 1);
      EXPECT_EQ(resumed[r].loaded.metadata.at("note"), "ck_cases");
      expect_losses_near(resumed[r].losses, whole[r].losses, kSaveAfter + 1, 0, "rank " + std::to_string(r));
      for (const auto& [n, t] : resumed[r].params)
        EXPECT_TRUE(testing::tensors_near(t, whole[r].params.at(n), 0)) << n << " on rank " << r;
    }
  }
}

// Saved on one layout, resumed on others: the losses of one process within 1e-5.
TEST(PartitionedCheckpoint, ReshardingMatrix) {
  const std::vector<double> ref = reference_losses(Opt::kAdamW, data(), kSteps);
  const std::vector<std::pair<Layout, std::vector<Layout>>> matrix = {
      {{2, 2, true}, {{4, 1}, {1, 4}, {1, 1}, {1, 4, true}, {2, 1, true}}},
      {{4, 1}, {{2, 2, true}, {1, 1}}},
      {{1, 1}, {{2, 2, true}, {4, 1}}},
      {{1, 4, true}, {{2, 2, true}, {4, 1}, {1, 1}}},
  };
  int n = 0;
  for (const auto& [from, targets] : matrix) {
    const std::string root = temp_dir(std::to_string(n++));
    auto saved = run_world(saving(from, root), data());
    expect_losses_near(saved[0].losses, ref, 0, 1e-5, "saving at " + from.str());
    for (const Layout& to : targets) {
      auto resumed = run_world(resuming(to, root), data());
      for (int r = 0; r < to.world(); ++r)
        expect_losses_near(resumed[r].losses, ref, kSaveAfter + 1, 1e-5,
                           from.str() + " -> " + to.str() + " rank " + std::to_string(r));
    }
  }
}

TEST(PartitionedCheckpoint, SgdMomentumAcrossLayouts) {
  const std::vector<double> ref = reference_losses(Opt::kSgd, data(), kSteps);
  const std::string a = temp_dir("a"), b = temp_dir("b");
  run_world(saving({2, 2, true}, a, Opt::kSgd), data());
  auto r1 = run_world(resuming({1, 1}, a, Opt::kSgd), data());
  expect_losses_near(r1[0].losses, ref, kSaveAfter + 1, 1e-5, "2x2 zero -> 1x1");
  run_world(saving({1, 1}, b, Opt::kSgd), data());
  auto r2 = run_world(resuming({1, 4, true}, b, Opt::kSgd), data());
  expect_losses_near(r2[3].losses, ref, kSaveAfter + 1, 1e-5, "1x1 -> 1x4 zero");
}

TEST(PartitionedCheckpoint, PartialFormatOnDisk) {
  const std::string root = temp_dir();
  auto saved = run_world(saving({2, 2, true}, root), data());
  const std::string dir = root + "/step-00000004";
  ASSERT_EQ(latest_checkpoint(root), dir);
  for (const char* f :
       {"manifest.json", "trainer_state.json", "model.safetensors.index.json", "optimizer.safetensors.index.json",
        "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "optimizer-00001-of-00004.safetensors",
        "optimizer-00004-of-00004.safetensors"})
    EXPECT_TRUE(fs::exists(dir + "/" + f)) << f;
  const json manifest = json::parse(io::read_file(dir + "/manifest.json"));
  EXPECT_EQ(manifest["kind"], "partial");
  EXPECT_EQ(manifest["step"], 4);
  EXPECT_EQ(manifest["layout"]["pp"], 2);
  EXPECT_EQ(manifest["layout"]["dp"], 2);
  EXPECT_EQ(manifest["layout"]["zero"], true);
  EXPECT_EQ(manifest["files"].size(), 9u);  // 2 model + 4 optimizer shards, 2 indexes, trainer state
  const json index = json::parse(io::read_file(dir + "/model.safetensors.index.json"));
  EXPECT_EQ(index["weight_map"]["0.weight"], "model-00001-of-00002.safetensors");
  EXPECT_EQ(index["weight_map"]["6.bias"], "model-00002-of-00002.safetensors");
  EXPECT_EQ(index["metadata"]["total_size"], 4 * (60 + 10 + 100 + 10 + 100 + 10 + 30 + 3));
  // ZeRO: each parameter's elementwise state in dp slices under its own name; the scalars whole.
  const json oindex = json::parse(io::read_file(dir + "/optimizer.safetensors.index.json"));
  // Stage 0's flat: 0.weight [0, 60), 0.bias [60, 70), 2.weight [70, 170), 2.bias [170, 180); dp rank 0
  // owns [0, 90), so 2.weight is split at its element 20.
  const json& pieces = oindex["weft.pieces"]["state.2.weight.exp_avg"];
  ASSERT_EQ(pieces.size(), 2u) << pieces.dump();
  EXPECT_EQ(pieces[0]["begin"], 0);
  EXPECT_EQ(pieces[0]["end"], 20);
  EXPECT_EQ(pieces[1]["begin"], 20);
  EXPECT_EQ(pieces[1]["end"], 100);
  EXPECT_EQ(pieces[0]["file"], "optimizer-00001-of-00004.safetensors");
  EXPECT_EQ(pieces[1]["file"], "optimizer-00002-of-00004.safetensors");
  EXPECT_EQ(oindex["weft.pieces"]["state.0.weight.exp_avg"].size(), 1u);
  EXPECT_FALSE(oindex["weight_map"].contains("state.2.weight.exp_avg"));
  EXPECT_TRUE(oindex["weight_map"].contains("state.0.weight.step"));
  EXPECT_TRUE(oindex["weight_map"].contains("options.0.weight.lr"));
  CheckpointReader(dir).verify_all();
  // One process reads the whole model and the whole by-name optimizer state.
  const auto model = load_model_state(root);
  ASSERT_EQ(model.size(), saved[0].model_state.size());
  for (const auto& [k, t] : saved[0].model_state) EXPECT_TRUE(testing::tensors_near(model.at(k), t, 0)) << k;
  const auto opt = load_optimizer_state(dir);
  EXPECT_EQ(opt.at("state.0.weight.exp_avg").sizes(), (Shape{10, 6}));
  EXPECT_EQ(opt.at("state.6.bias.step").item<double>(), 4.0);
}

TEST(PartitionedCheckpoint, FullCheckpointLoadsInOneProcess) {
  const std::string root = temp_dir();
  SaveOptions full;
  full.kind = Kind::kFull;
  auto saved = run_world(saving({2, 2, true}, root, Opt::kAdamW, full), data());
  const std::string dir = root + "/step-00000004";
  EXPECT_TRUE(fs::exists(dir + "/model.safetensors"));
  EXPECT_FALSE(fs::exists(dir + "/model-00001-of-00002.safetensors"));
  // A plain safetensors file with the model's own names: a single-process model loads it.
  io::SafetensorsFile f = io::load_safetensors(dir + "/model.safetensors");
  EXPECT_EQ(f.metadata.at("format"), "pt");
  auto plain = make_mlp(7);
  plain->load_state_dict(nn::StateDict(f.tensors));
  const double loss = loss_of(plain->forward(data().xs[kSaveAfter + 1]), data().ys[kSaveAfter + 1]).item<double>();
  const std::vector<double> ref = reference_losses(Opt::kAdamW, data(), kSteps);
  EXPECT_NEAR(loss, ref[kSaveAfter + 1], 1e-5);
  // The by-name optimizer state loads into the plain optimizer.
  auto popt = make_opt(Opt::kAdamW, plain->named_parameters());
  EXPECT_TRUE(popt->load_state_dict_by_name(load_optimizer_state(dir)).empty());
  // And the full checkpoint resumes on another layout.
  auto resumed = run_world(resuming({4, 1}, root), data());
  expect_losses_near(resumed[0].losses, ref, kSaveAfter + 1, 1e-5, "full 2x2 zero -> 4x1");
}

// Each rank of a 4x1 grid reads exactly its stages' tensors (model and
// optimizer state) plus the headers of the files holding them.
TEST(PartitionedCheckpoint, ALoadingRankReadsOnlyItsStages) {
  const std::string root = temp_dir();
  TrainRun wide = saving({1, 1}, root);
  wide.hidden = 64;
  run_world(wide, data());
  CheckpointReader reader(root);
  uint64_t total = 0;
  for (const auto& [name, rec] : reader.manifest().files)
    if (name.find(".safetensors") != std::string::npos && name.find("index") == std::string::npos) total += rec.bytes;
  std::vector<uint64_t> read(4), own(4);
  std::vector<std::shared_ptr<nn::Sequential>> models;
  for (int r = 0; r < 4; ++r) models.push_back(make_mlp(5, 64));
  run_ranks(4, [&](std::shared_ptr<ProcessGroup> g) {
    hybrid::DistributedModelOptions o;
    o.pp = 4;
    o.balance = balance_for(4);
    hybrid::DistributedModel dm(models[g->rank()], g, o);
    hybrid::DistributedOptimizer opt(dm, [&](const optim::NamedParameters& p) { return make_opt(Opt::kAdamW, p); });
    dm.partition(data().xs[0]);
    LoadOptions lo;
    lo.bytes_read = &read[g->rank()];
    load(root, Stateful{&dm, &opt, nullptr}, lo);
    // What this rank needs: its tensors' bytes, and the two headers.
    uint64_t need = 0;
    for (const auto& [k, t] : dm.local_state_dict()) {
      need += reader.model().at(k)[0].data_end - reader.model().at(k)[0].data_begin;
      for (const auto& [ok, pieces] : reader.optimizer())
        if (ok.rfind("state." + k + ".", 0) == 0 || ok.rfind("options." + k + ".", 0) == 0)
          need += pieces[0].data_end - pieces[0].data_begin;
    }
    for (const char* f : {"model-00001-of-00001.safetensors", "optimizer-00001-of-00001.safetensors"})
      need += io::read_safetensors_header(reader.dir() + "/" + f).data_start;
    own[g->rank()] = need;
  });
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(read[r], own[r]) << "rank " << r;
    EXPECT_LT(read[r], total) << "rank " << r;
  }
}

TEST(PartitionedCheckpoint, AsyncSaveSnapshotsAtTheStepBoundary) {
  const std::vector<double> ref = reference_losses(Opt::kAdamW, data(), kSteps);
  const std::string root = temp_dir();
  SaveOptions async;
  async.async = true;
  // Training goes on to the end while the background thread writes step 4's state.
  TrainRun r = saving({2, 2, true}, root, Opt::kAdamW, async);
  r.last = kSteps;
  auto whole = run_world(r, data());
  auto resumed = run_world(resuming({2, 2, true}, root), data());
  expect_losses_near(resumed[0].losses, whole[0].losses, kSaveAfter + 1, 0, "async 2x2 zero, same layout");
  auto other = run_world(resuming({1, 1}, root), data());
  expect_losses_near(other[0].losses, ref, kSaveAfter + 1, 1e-5, "async 2x2 zero -> 1x1");
}

// Runs `body(dm, opt, sched, group)` on a 2x1 grid of the MLP (SGD, StepLR).
void with_model(int world,
                const std::function<void(hybrid::DistributedModel&, hybrid::DistributedOptimizer&, optim::LRScheduler*,
                                         std::shared_ptr<ProcessGroup>)>& body,
                std::shared_ptr<nn::Sequential> (*make)() = nullptr) {
  std::vector<std::shared_ptr<nn::Sequential>> models;  // made here: in-process ranks share one generator
  for (int r = 0; r < world; ++r) models.push_back(make ? make() : make_mlp(5));
  run_ranks(world, [&](std::shared_ptr<ProcessGroup> g) {
    hybrid::DistributedModelOptions o;
    o.pp = world;
    auto m = models[g->rank()];
    o.balance = std::vector<int>(world, static_cast<int>(m->size()) / world);
    hybrid::DistributedModel dm(m, g, o);
    hybrid::DistributedOptimizer opt(dm, [&](const optim::NamedParameters& p) { return make_opt(Opt::kSgd, p); });
    dm.partition(data().xs[0]);
    optim::StepLR sched(opt.inner(), 3, 0.5);
    body(dm, opt, &sched, g);
  });
}

TEST(PartitionedCheckpoint, KeepLastRotatesOnlyAfterTheCommit) {
  const std::string root = temp_dir();
  with_model(2, [&](auto& dm, auto& opt, auto* sched, auto g) {
    SaveOptions so;
    so.keep_last = 2;
    Checkpointer ck(root, g, so);
    for (int s = 1; s <= 4; ++s) ck.save(Stateful{&dm, &opt, sched}, TrainingState{s, 0, s, {}});
  });
  auto all = committed_checkpoints(root);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].first, 3);
  EXPECT_EQ(all[1].first, 4);
}

thread_local int t_rank = -1;  // the in-process rank of this thread

TEST(PartitionedCheckpoint, AnInterruptedSaveLeavesThePreviousOne) {
  const std::string root = temp_dir();
  with_model(2, [&](auto& dm, auto& opt, auto* sched, auto g) {
    Stateful st{&dm, &opt, sched};
    save(root, st, TrainingState{2, 0, 2, {}});
    t_rank = g->rank();
    g->barrier()->wait();
    if (g->rank() == 0)  // one hook for the process; it fails rank 1's first file
      detail::set_save_hook([](const std::string& event) {
        if (t_rank == 1 && event.rfind("wrote ", 0) == 0) WEFT_ERROR("disk failure injected on purpose");
      });
    g->barrier()->wait();
    EXPECT_WEFT_ERROR(save(root, st, TrainingState{5, 0, 5, {}}),
                      "checkpoint save to '" + root + "/step-00000005' failed: rank 1: disk failure injected");
    g->barrier()->wait();
    if (g->rank() == 0) detail::set_save_hook(nullptr);
  });
  EXPECT_TRUE(fs::exists(root + "/.tmp-step-00000005"));
  EXPECT_FALSE(fs::exists(root + "/step-00000005"));
  EXPECT_EQ(latest_checkpoint(root), root + "/step-00000002");
  CheckpointReader(root).verify_all();
  with_model(2, [&](auto& dm, auto& opt, auto* sched, auto g) {
    EXPECT_EQ(load(root, Stateful{&dm, &opt, sched}).step, 2);
    save(root, Stateful{&dm, &opt, sched}, TrainingState{6, 0, 6, {}});  // clears the leftover
  });
  EXPECT_FALSE(fs::exists(root + "/.tmp-step-00000005"));
  EXPECT_EQ(committed_checkpoints(root).size(), 2u);
}

// Extra files (snapshot.h): each rank's written into the commit and listed
// in the manifest under its writer, read back whole and checked; damaged or
// missing, refused like any file; one name written twice, or a name that is
// not plain or is the checkpoint's own, refused at the save.
TEST(PartitionedCheckpoint, ExtraFilesAreCommittedListedAndVerified) {
  const std::string root = temp_dir();
  with_model(2, [&](auto& dm, auto& opt, auto* sched, auto g) {
    Stateful st{&dm, &opt, sched};
    st.extra_files = {
        {"notes-" + std::to_string(g->rank()) + ".txt", "rank " + std::to_string(g->rank()) + " was here"}};
    save(root, st, TrainingState{3, 0, 3, {}});
    EXPECT_EQ(load(root, Stateful{&dm, &opt, sched}).step, 3);
    st.extra_files = {{"same.txt", "x"}};
    EXPECT_WEFT_ERROR(save(root, st, TrainingState{4, 0, 4, {}}), "rank 0: ranks 0 and 1 both wrote 'same.txt'");
    for (const char* bad : {"sub/x", ".hidden", "manifest.json", "model-extra.safetensors", ""}) {
      st.extra_files = {{bad, "x"}};
      EXPECT_WEFT_ERROR(save(root, st, TrainingState{5, 0, 5, {}}),
                        "extra file name '" + std::string(bad) + "' is not a plain file name of its own");
    }
  });
  const std::string dir = root + "/step-00000003";
  EXPECT_EQ(latest_checkpoint(root), dir);
  const Manifest m = read_manifest(dir);
  ASSERT_TRUE(m.files.count("notes-1.txt"));
  EXPECT_EQ(m.files.at("notes-0.txt").rank, 0);
  EXPECT_EQ(m.files.at("notes-1.txt").rank, 1);
  EXPECT_EQ(read_listed_file(dir, m, "notes-1.txt"), "rank 1 was here");
  CheckpointReader(dir).verify_all();
  EXPECT_WEFT_ERROR(read_listed_file(dir, m, "notes-7.txt"),
                    "'" + dir + "/notes-7.txt' is not in " + dir + "/manifest.json");
  io::write_file_synced(dir + "/notes-0.txt", "rank 0 was HERE");  // the same size
  EXPECT_WEFT_ERROR(read_listed_file(dir, m, "notes-0.txt"),
                    "'" + dir + "/notes-0.txt' is corrupted: checksum mismatch");
  EXPECT_WEFT_ERROR(CheckpointReader(dir).verify_all(), "notes-0.txt' is corrupted: checksum mismatch");
  io::write_file_synced(dir + "/notes-0.txt", "rank 0");
  EXPECT_WEFT_ERROR(read_listed_file(dir, m, "notes-0.txt"), "is truncated: it has 6 of 15 bytes");
  EXPECT_WEFT_ERROR(CheckpointReader{dir}, "shard '" + dir + "/notes-0.txt' is truncated: it has 6 of 15 bytes");
  io::write_file_synced(dir + "/notes-0.txt", "rank 0 was here");
  fs::remove(dir + "/notes-1.txt");
  EXPECT_WEFT_ERROR(read_listed_file(dir, m, "notes-1.txt"), "'" + dir + "/notes-1.txt' is missing");
  EXPECT_WEFT_ERROR(CheckpointReader{dir}, "shard '" + dir + "/notes-1.txt' is missing");
}

// Loading `dir` on a 2x1 grid fails on every rank with `message`.
void expect_load_error(const std::string& dir, const std::string& message) {
  EXPECT_WEFT_ERROR(with_model(2,
                               [&](auto& dm, auto& opt, auto* sched, auto) {
                                 load(dir, Stateful{&dm, &opt, sched});
                               }),
                    message);
}

TEST(PartitionedCheckpoint, DamagedCheckpointsAreRefusedNamingTheFile) {
  const std::string root = temp_dir();
  with_model(2, [&](auto& dm, auto& opt, auto* sched, auto) { save(root, Stateful{&dm, &opt, sched}, {4, 0, 4, {}}); });
  const std::string good = root + "/step-00000004";
  auto variant = [&](const std::string& name) {
    const std::string d = root + "/" + name + "/step-00000004";
    fs::create_directories(d);
    fs::copy(good, d, fs::copy_options::recursive);
    return d;
  };
  // Truncated shard.
  std::string d = variant("truncated"), f = d + "/model-00002-of-00002.safetensors";
  fs::resize_file(f, fs::file_size(f) - 10);
  expect_load_error(d, "shard '" + f + "' is truncated: it has");
  // A flipped byte in a tensor's data.
  d = variant("corrupted");
  f = d + "/model-00001-of-00002.safetensors";
  {
    std::string bytes = io::read_file(f);
    bytes[bytes.size() - 3] = static_cast<char>(bytes[bytes.size() - 3] ^ 0x5a);
    io::write_file_synced(f, bytes);
  }
  expect_load_error(d, "shard '" + f + "' is corrupted: checksum mismatch in tensor");
  EXPECT_WEFT_ERROR(CheckpointReader(d).verify_all(), "shard '" + f + "' is corrupted: checksum mismatch");
  // A missing shard.
  d = variant("missing");
  f = d + "/optimizer-00001-of-00002.safetensors";
  fs::remove(f);
  expect_load_error(d, "shard '" + f + "' is missing");
  // No manifest: the save never committed.
  d = variant("uncommitted");
  fs::remove(d + "/manifest.json");
  expect_load_error(d, "checkpoint '" + d + "' has no manifest.json: the save did not commit");
  // A damaged manifest.
  d = variant("manifest");
  {
    std::string m = io::read_file(d + "/manifest.json");
    m[m.find("\"step\": 4") + 8] = '7';
    io::write_file_synced(d + "/manifest.json", m);
  }
  expect_load_error(d, "manifest '" + d + "/manifest.json' is corrupted: checksum mismatch");
  // A damaged index.
  d = variant("index");
  {
    std::string m = io::read_file(d + "/model.safetensors.index.json");
    m[m.find("weight_map")] = 'W';
    io::write_file_synced(d + "/model.safetensors.index.json", m);
  }
  expect_load_error(d, "'" + d + "/model.safetensors.index.json' is corrupted: checksum mismatch");
}

// Note [checkpoint cross-checks]: each edit is re-signed (the files' sizes and CRC-32s in the manifest, and the
// manifest's own, agree with the new bytes), so what refuses it is the cross-check, naming the file and the field.
TEST(PartitionedCheckpoint, MetadataThatDisagreesWithItselfIsRefusedNamingFileAndField) {
  const std::string root = temp_dir();
  with_model(2, [&](auto& dm, auto& opt, auto* sched, auto) { save(root, Stateful{&dm, &opt, sched}, {4, 1, 2, {}}); });
  const std::string good = root + "/step-00000004";
  const std::string m0 = "model-00001-of-00002.safetensors", m1 = "model-00002-of-00002.safetensors";
  const std::string o0 = "optimizer-00001-of-00002.safetensors", o1 = "optimizer-00002-of-00002.safetensors";
  int n = 0;
  auto variant = [&] {
    const std::string d = root + "/v" + std::to_string(n++) + "/step-00000004";
    fs::create_directories(d);
    fs::copy(good, d, fs::copy_options::recursive);
    return d;
  };
  // `edit` applied to a copy of the good checkpoint; loading it fails with message(dir).
  auto refused = [&](const std::function<void(const std::string&)>& edit,
                     const std::function<std::string(const std::string&)>& message) {
    const std::string d = variant();
    edit(d);
    SCOPED_TRACE(message(d));
    expect_load_error(d, message(d));
  };
  using json = nlohmann::json;
  auto manifest = [](std::function<void(json&)> f) {
    return [f](const std::string& d) { tamper::edit_manifest(d, f); };
  };
  auto file_json = [](const std::string& name, std::function<void(json&)> f) {
    return [name, f](const std::string& d) { tamper::edit_json(d, name, f); };
  };
  auto state = [&](std::function<void(json&)> f) { return file_json("trainer_state.json", f); };
  auto ck = [](const std::string& d) { return "checkpoint '" + d + "': "; };
  auto in_manifest = [](const std::string& d) { return "manifest '" + d + "/manifest.json': "; };
  auto in_state = [](const std::string& d) { return "checkpoint '" + d + "': '" + d + "/trainer_state.json': "; };

  // Re-signing alone (no edit) leaves a checkpoint that loads: the helpers sign as the writer does.
  {
    const std::string d = variant();
    tamper::edit_json(d, "trainer_state.json", [](json&) {});
    tamper::edit_json(d, "model.safetensors.index.json", [](json&) {});
    tamper::edit_manifest(d, [](json&) {});
    with_model(2, [&](auto& dm, auto& opt, auto* sched, auto) {
      const TrainingState ts = load(d, Stateful{&dm, &opt, sched});
      EXPECT_EQ(ts.step, 4);
      EXPECT_EQ(ts.epoch, 1);
      EXPECT_EQ(ts.batch, 2);
    });
  }

  // (a) manifest.json and trainer_state.json disagree.
  refused(manifest([](json& m) { m["step"] = 5; }),
          [&](auto d) { return ck(d) + "manifest.json step 5 disagrees with trainer_state.json step 4"; });
  refused(state([](json& t) { t["epoch"] = 3; }),
          [&](auto d) { return ck(d) + "manifest.json epoch 1 disagrees with trainer_state.json epoch 3"; });
  refused(manifest([](json& m) { m["batch"] = 0; }),
          [&](auto d) { return ck(d) + "manifest.json batch 0 disagrees with trainer_state.json batch 2"; });
  refused(manifest([](json& m) {
            m["layout"]["world"] = 4;
            m["layout"]["dp"] = 2;
          }),
          [&](auto d) { return ck(d) + "manifest.json layout.world 4 disagrees with trainer_state.json world 2"; });
  refused(state([](json& t) { t["rng"].push_back(t["rng"][0]); }),
          [&](auto d) { return ck(d) + "trainer_state.json rng has 3 entries, but the saving world has 2 ranks"; });
  // Both files moved to another step: the directory's name (by which the latest is chosen) disagrees.
  refused(
      [&](const std::string& d) {
        tamper::edit_json(d, "trainer_state.json", [](json& t) { t["step"] = 6; });
        tamper::edit_manifest(d, [](json& m) { m["step"] = 6; });
      },
      [&](auto d) { return ck(d) + "manifest.json step 6 disagrees with the directory name 'step-00000004'"; });

  // (b) Nonsense values.
  for (const char* key : {"step", "epoch", "batch"}) {
    refused(manifest([key](json& m) { m[key] = -1; }),
            [&](auto d) { return in_manifest(d) + "\"" + key + "\" is -1, but it must be >= 0"; });
    refused(state([key](json& t) { t[key] = -1; }),
            [&](auto d) { return in_state(d) + "\"" + key + "\" is -1, but it must be >= 0"; });
  }
  refused(manifest([](json& m) { m["layout"]["pp"] = 3; }), [&](auto d) {
    return in_manifest(d) + "\"layout\" does not add up: pp 3 x dp 1 is 3 ranks, but \"layout.world\" is 2";
  });
  refused(manifest([](json& m) { m["layout"]["dp"] = 0; }),
          [&](auto d) { return in_manifest(d) + "\"layout.dp\" must be a positive integer (it is 0)"; });
  refused(manifest([](json& m) {
            m["layout"]["balance"] = {2, 2, 2, 2};
          }),
          [&](auto d) { return in_manifest(d) + "\"layout.balance\" has 4 stages, but pp 2 x virtual_stages 1 is 2"; });
  refused(manifest([](json& m) { m["layout"]["zero"] = "no"; }),
          [&](auto d) { return in_manifest(d) + "\"layout.zero\" must be true or false (it is \"no\")"; });
  refused(manifest([&](json& m) { m["files"][m1]["rank"] = 2; }), [&](auto d) {
    return in_manifest(d).substr(0, in_manifest(d).size() - 2) + ", file '" + m1 +
           "': \"rank\" 2 is not a rank of the saving world (\"layout.world\" 2)";
  });
  refused(state([](json& t) { t["step"] = "four"; }),
          [&](auto d) { return in_state(d) + "\"step\" must be an integer (it is \"four\")"; });
  refused(state([](json& t) { t.erase("rng"); }), [&](auto d) { return in_state(d) + "\"rng\" is missing"; });
  refused(state([](json& t) { t["rng"][1]["seed"] = -5; }),
          [&](auto d) { return in_state(d) + "\"rng\"[1] must be {\"seed\": n, \"offset\": n} with integers >= 0"; });
  refused(state([](json& t) { t["metadata"]["note"] = 7; }),
          [&](auto d) { return in_state(d) + "\"metadata\"[\"note\"] must be a string (it is 7)"; });
  refused(state([](json& t) {
            t["scheduler"] = {{"last_epoch", 4}};
          }),
          [&](auto d) { return in_state(d) + "\"scheduler\" must be null or {\"last_epoch\": integer"; });

  // (c) weight_map against the pieces (Hugging Face tools read weight_map alone).
  const std::string model_index = "model.safetensors.index.json", opt_index = "optimizer.safetensors.index.json";
  refused(file_json(model_index, [&](json& j) { j["weight_map"]["0.weight"] = m1; }), [&](auto d) {
    return "'" + d + "/" + model_index + "': weight_map[\"0.weight\"] is '" + m1 + "', but the tensor's piece is in '" +
           m0 + "'";
  });
  refused(file_json(model_index, [&](json& j) { j["weight_map"].erase("2.bias"); }), [&](auto d) {
    return "'" + d + "/" + model_index + "': weight_map has no entry for tensor '2.bias', stored whole in '" + m0 + "'";
  });
  refused(file_json(model_index, [&](json& j) { j["weight_map"]["9.weight"] = m0; }), [&](auto d) {
    return "'" + d + "/" + model_index + "': weight_map[\"9.weight\"] is '" + m0 +
           "', but \"weft.pieces\" holds no tensor of that name";
  });
  refused(file_json(opt_index, [&](json& j) { j["weight_map"]["options.0.weight.lr"] = o1; }), [&](auto d) {
    return "'" + d + "/" + opt_index + "': weight_map[\"options.0.weight.lr\"] is '" + o1 +
           "', but the tensor's piece is in '" + o0 + "'";
  });

  // (d) A shard's own header without a tensor the index places in it (renamed in the header, same length).
  auto rename_in_header = [](const std::string& file, const std::string& from, const std::string& to) {
    return [=](const std::string& d) {
      tamper::edit_file(d, file, [&](std::string& bytes) {
        const size_t at = bytes.find("\"" + from + "\"");
        ASSERT_NE(at, std::string::npos) << from;
        bytes.replace(at + 1, from.size(), to);
      });
    };
  };
  refused(rename_in_header(m0, "2.bias", "2.biaz"), [&](auto d) {
    return ck(d) + "shard '" + d + "/" + m0 +
           "' is corrupted: its header does not hold tensor '2.bias', which model.safetensors.index.json places in it";
  });
  // An optimizer shard's, found even by a load that reads no optimizer state.
  {
    const std::string d = variant();
    rename_in_header(o0, "options.0.weight.lr", "options.0.weight.lz")(d);
    const std::string message = ck(d) + "shard '" + d + "/" + o0 +
                                "' is corrupted: its header does not hold tensor 'options.0.weight.lr', which "
                                "optimizer.safetensors.index.json places in it";
    EXPECT_WEFT_ERROR(with_model(2,
                                 [&](auto& dm, auto& opt, auto* sched, auto) {
                                   LoadOptions lo;
                                   lo.optimizer = false;
                                   load(d, Stateful{&dm, &opt, sched}, lo);
                                 }),
                      message);
    EXPECT_WEFT_ERROR(load_optimizer_state(d), message);
  }

  // (e) trainer_state.json that is not JSON: named with the parser's message.
  refused(
      [](const std::string& d) {
        tamper::edit_file(d, "trainer_state.json", [](std::string& b) { b.resize(b.size() / 2); });
      },
      [&](auto d) { return ck(d) + "'" + d + "/trainer_state.json' is not valid JSON: [json.exception.parse_error"; });

  // The untampered checkpoint still loads, in one process and on a grid.
  EXPECT_EQ(load_model_state(good).size(), 8u);
  EXPECT_FALSE(load_optimizer_state(good).empty());
  with_model(2, [&](auto& dm, auto& opt, auto* sched, auto) {
    const TrainingState ts = load(good, Stateful{&dm, &opt, sched});
    EXPECT_EQ(ts.step, 4);
    EXPECT_EQ(ts.epoch, 1);
    EXPECT_EQ(ts.batch, 2);
  });
}

std::shared_ptr<nn::Sequential> other_mlp() {
  // 3.weight..: one Linear fewer (6.weight, 6.bias unexpected), 2.weight (12, 10) vs (10, 10), an extra 6-child tail.
  manual_seed(3);
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Linear>(kIn, kHidden));
  m->push_back(std::make_shared<nn::Tanh>());
  m->push_back(std::make_shared<nn::Linear>(kHidden, 12));
  m->push_back(std::make_shared<nn::Tanh>());
  m->push_back(std::make_shared<nn::Linear>(12, kOut));
  m->push_back(std::make_shared<nn::Tanh>());
  return m;
}

TEST(PartitionedCheckpoint, AMismatchedModelListsEveryKey) {
  const std::string root = temp_dir();
  with_model(2, [&](auto& dm, auto& opt, auto* sched, auto) { save(root, Stateful{&dm, &opt, sched}, {4, 0, 4, {}}); });
  const std::string dir = root + "/step-00000004";
  EXPECT_WEFT_ERROR(
      with_model(
          2,
          [&](auto& dm, auto& opt, auto* sched, auto) {
            load(root, Stateful{&dm, &opt, sched});
          },
          other_mlp),
      "checkpoint '" + dir +
          "' does not match the model: unexpected keys [6.bias, 6.weight]; mismatched keys [2.bias: checkpoint [10] "
          "float32 vs model [12] float32, 2.weight: checkpoint [10, 10] float32 vs model [12, 10] float32, 4.bias: "
          "checkpoint [10] float32 vs model [3] float32, 4.weight: checkpoint [10, 10] float32 vs model [3, 12] "
          "float32];");
}

TEST(PartitionedCheckpoint, RngOfRanksBeyondTheSavedWorld) {
  const std::vector<GeneratorState> saved{{11, 40}, {12, 80}};
  EXPECT_EQ(rng_for_rank(saved, 0), (GeneratorState{11, 40}));
  EXPECT_EQ(rng_for_rank(saved, 1), (GeneratorState{12, 80}));
  const GeneratorState a = rng_for_rank(saved, 2), b = rng_for_rank(saved, 3);
  EXPECT_EQ(a.offset, 0u);
  EXPECT_NE(a.seed, 11u);
  EXPECT_NE(a.seed, b.seed);
  EXPECT_EQ(rng_for_rank(saved, 2), a);  // deterministic
}

}  // namespace
}  // namespace weft::parallel::checkpoint
