// A rank killed in the middle of a checkpoint save (checkpoint_kill_test.sh).
//   checkpoint_kill_driver save ROOT VICTIM [EVENT]: pp 2 x dp (np/2) with
//     ZeRO (ck_cases.h's MLP, AdamW), trains 4 steps, saves after step 2
//     (commits ROOT/step-00000002), then saves after step 4 where rank
//     VICTIM SIGKILLs itself at the save hook's first event starting with
//     EVENT (default "wrote ": right after writing its first file;
//     "manifest": rank 0 with every file written, before the manifest)
//     ("rank V: killing itself after '<event>'"). The survivors must fail:
//     "rank R: error: <what>", exit 1.
//   checkpoint_kill_driver verify ROOT: any world; checks that the latest
//     committed checkpoint is step 2 with every checksum right, that the
//     interrupted save left only its ".tmp-" directory, loads step 2 into a
//     pp 1 x dp (world) model and trains the remaining steps; prints "rank
//     R: verified (step S, loss L)".
#include <csignal>
#include <cstdio>
#include <filesystem>

#include "parallel/checkpoint/reader.h"
#include "parallel/checkpoint/rotation.h"
#include "parallel/comm/mpi/context.h"
#include "tests/parallel/checkpoint/ck_cases.h"

int main(int argc, char** argv) {
  using namespace weft;
  using namespace weft::parallel;
  using namespace weft::parallel::checkpoint;
  using namespace weft::parallel::checkpoint::testcases;
  if (argc < 3) {
    std::fprintf(stderr, "usage: checkpoint_kill_driver save ROOT VICTIM | verify ROOT\n");
    return 2;
  }
  const std::string mode = argv[1], root = argv[2];
  int rank = -1;
  try {
    DistributedContext ctx;
    rank = ctx.rank();
    const int n = ctx.size();
    const Data d = make_data(6);
    if (mode == "save") {
      const int victim = argc > 3 ? std::atoi(argv[3]) : 1;
      const std::string when = argc > 4 ? argv[4] : "wrote ";
      TrainRun run{{2, n / 2, true}, Opt::kAdamW, 0, 4};
      run.save_root = root;
      run.save_after = 1;  // commits step 2
      run_rank(run, d, ctx.world_ptr(), rank_model(run, rank));
      std::fprintf(stderr, "rank %d: step 2 committed\n", rank);
      checkpoint::detail::set_save_hook([&](const std::string& event) {
        if (rank == victim && event.rfind(when, 0) == 0) {
          std::fprintf(stderr, "rank %d: killing itself after '%s'\n", rank, event.c_str());
          std::fflush(stderr);
          raise(SIGKILL);
        }
      });
      TrainRun again{{2, n / 2, true}, Opt::kAdamW, 0, 4};
      again.save_root = root;
      again.save_after = 3;  // step 4: interrupted
      run_rank(again, d, ctx.world_ptr(), rank_model(again, rank));
      std::fprintf(stderr, "rank %d: the interrupted save returned\n", rank);
      return 0;
    }
    namespace fs = std::filesystem;
    WEFT_CHECK(latest_checkpoint(root) == root + "/step-00000002", "the latest checkpoint in '", root, "' is '",
               latest_checkpoint(root), "', not step 2");
    WEFT_CHECK(!fs::exists(root + "/step-00000004"), "the interrupted save's step-00000004 exists");
    WEFT_CHECK(fs::is_directory(root + "/.tmp-step-00000004"), "no .tmp-step-00000004 left by the interrupted save");
    WEFT_CHECK(!fs::exists(root + "/.tmp-step-00000004/manifest.json"), "the interrupted save wrote a manifest");
    CheckpointReader(root).verify_all();
    TrainRun resume{{1, n, false}, Opt::kAdamW, 2, 6};
    resume.resume = root;
    const TrainResult r = run_rank(resume, d, ctx.world_ptr(), rank_model(resume, rank));
    const std::vector<double> ref = reference_losses(Opt::kAdamW, d, 6);
    for (size_t i = 0; i < r.losses.size(); ++i)
      WEFT_CHECK(std::abs(r.losses[i] - ref[2 + i]) < 1e-5, "step ", 2 + i, ": loss ", r.losses[i], " but one process ",
                 ref[2 + i]);
    std::fprintf(stderr, "rank %d: verified (step %lld, loss %.6f)\n", rank, static_cast<long long>(r.loaded.step),
                 r.losses.back());
  } catch (const Error& e) {
    std::fprintf(stderr, "rank %d: error: %s\n", rank, e.what());
    return 1;
  }
  return 0;
}
