// The GPT example's command line (contract in options.h).
#include "examples/gpt/options.h"

#include <cstdlib>
#include <iostream>

#include "core/error.h"
#include "examples/flags.h"
#include "examples/train_report.h"

namespace weft::examples::gpt {

bool under_mpirun() { return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr; }

std::optional<Options> parse_options(int argc, char** argv) {
  Options o;
  GptConfig& m = o.model;
  FlagParser p(
      "usage: gpt [flags]                                   (one process)\n"
      "       mpirun -np N gpt --pp P [--dp D] [flags]      (pipeline x data parallel, P x D = N)\n"
      "       gpt --resume CHECKPOINT --sample N [--prompt TEXT] [--temperature T] [--top-k K]");
  p.add("--data FILE_OR_DIR", &o.data, "text to train on: a file or a directory of text files")
      .add("--val-fraction X", &o.val_fraction, "share of the records (fortunes, paragraphs) held out for validation")
      .add("--layers N", &m.layers, "transformer blocks")
      .add("--heads N", &m.heads, "attention heads per block")
      .add("--dim N", &m.dim, "model width (a multiple of --heads)")
      .add("--context N", &m.context, "tokens (bytes) per sequence")
      .add("--dropout X", &m.dropout, "dropout after the embeddings, in attention and after each block's branches")
      .add_switch("--untied", &o.untied, true, "give the output head its own weight (default: the token embedding's)")
      .add("--steps N", &o.steps, "optimizer steps")
      .add("--batch-size N", &o.batch_size, "sequences per step (global: split across the --dp replicas)")
      .add("--lr X", &o.lr, "AdamW peak learning rate (linear warm-up, then cosine decay)")
      .add("--min-lr-ratio X", &o.min_lr_ratio, "the cosine decay ends at this fraction of --lr")
      .add("--warmup N", &o.warmup, "warm-up steps")
      .add("--weight-decay X", &o.weight_decay, "AdamW weight decay (every parameter)")
      .add("--beta2 X", &o.beta2, "AdamW beta2 (beta1 0.9)")
      .add("--clip X", &o.clip, "clip the gradient's global norm to X (0: no clipping)")
      .add("--seed N", &o.seed, "seed for the weights and the batches")
      .add("--threads N", &o.threads, "CPU threads (per rank under mpirun)", "all cores / ranks on this node")
      .add("--eval-interval N", &o.eval_interval, "evaluate (and --save) every N steps and after the last")
      .add("--eval-batches N", &o.eval_batches, "validation windows: N batches of --batch-size")
      .add("--stop-after N", &o.stop_after, "stop after step N as if interrupted (to test --resume)", "never")
      .add("--metrics PATH", &o.metrics, "JSON lines, one per evaluation")
      .add("--plot PATH", &o.plot, "SVG chart of training and validation loss")
      .add("--save DIR", &o.save, "write a checkpoint into DIR/step-<step> at every evaluation (every rank its part)")
      .add("--resume DIR", &o.resume,
           "continue from the latest checkpoint in DIR (saved by any --pp/--dp/--zero, or one process), or sample "
           "from it")
      .add_switch("--no-progress", &o.progress, false, "no progress bar");
  add_keep_last_flag(p, &o.keep_last);
  add_save_every_minutes_flag(p, &o.save_every_minutes);
  p.add("--sample N", &o.sample, "generate N bytes from --resume's checkpoint and exit (no training)", "0: train")
      .add("--final-sample N", &o.final_sample, "bytes sampled at the end of training")
      .add("--prompt TEXT", &o.prompt, "text the sample continues", "a new line")
      .add("--temperature X", &o.temperature, "sampling temperature (0: always the most likely byte)")
      .add("--top-k N", &o.top_k, "sample among the N most likely bytes", "0: all")
      .add("--sample-seed N", &o.sample_seed, "seed for sampling");
  add_grid_flags(p, o,
                 {.pp_help = "pipeline stages (ranks per replica; under mpirun)",
                  .balance_help = "layers per stage (the model's children: embedding, blocks, norm, head)"});
  p.add_switch("--zero", &o.zero, true, "shard the optimizer state over the replicas (ZeRO-1)");
  p.add_choice("--amp", &o.amp, {"none", "bf16"},
               "bfloat16 autocast for forward passes and the loss (float32 weights, gradients and AdamW state)");
  if (!p.parse(argc, argv, std::cout)) return std::nullopt;
  m.tied = !o.untied;
  for (std::string* path : {&o.data, &o.save, &o.resume, &o.metrics, &o.plot}) *path = user_path(*path);
  return o;
}

void check_options(const Options& o, int world) {
  try {
    check_config(o.model);  // --context, --layers, --heads, --dim, --dropout
  } catch (const FlagError&) {
    throw;
  } catch (const Error& e) {
    throw FlagError(e.message(), __FILE__, __LINE__);
  }
  WEFT_FLAG_CHECK(o.val_fraction > 0 && o.val_fraction <= 0.5, "--val-fraction must be in (0, 0.5], got ",
                  o.val_fraction);
  WEFT_FLAG_CHECK(o.steps >= 1, "--steps must be a positive integer, got ", o.steps);
  WEFT_FLAG_CHECK(o.batch_size >= 1, "--batch-size must be a positive integer, got ", o.batch_size);
  WEFT_FLAG_CHECK(o.lr > 0, "--lr must be positive, got ", o.lr);
  WEFT_FLAG_CHECK(o.min_lr_ratio >= 0 && o.min_lr_ratio <= 1, "--min-lr-ratio must be in [0, 1], got ", o.min_lr_ratio);
  WEFT_FLAG_CHECK(o.warmup >= 0, "--warmup must be >= 0, got ", o.warmup);
  WEFT_FLAG_CHECK(o.warmup < o.steps, "--warmup ", o.warmup, " must be below --steps ", o.steps);
  WEFT_FLAG_CHECK(o.weight_decay >= 0, "--weight-decay must be >= 0, got ", o.weight_decay);
  WEFT_FLAG_CHECK(o.beta2 > 0 && o.beta2 < 1, "--beta2 must be in (0, 1), got ", o.beta2);
  WEFT_FLAG_CHECK(o.clip >= 0, "--clip must be >= 0 (0: no clipping), got ", o.clip);
  WEFT_FLAG_CHECK(o.threads >= 0, "--threads must be >= 0 (0: all cores / ranks on this node), got ", o.threads);
  WEFT_FLAG_CHECK(o.eval_interval >= 1, "--eval-interval must be a positive integer, got ", o.eval_interval);
  WEFT_FLAG_CHECK(o.eval_batches >= 1, "--eval-batches must be a positive integer, got ", o.eval_batches);
  WEFT_FLAG_CHECK(o.stop_after >= 0, "--stop-after must be >= 0 (0: never), got ", o.stop_after);
  check_keep_last_flag(o.keep_last);
  check_save_every_minutes_flag(o.save_every_minutes);
  WEFT_FLAG_CHECK(o.sample >= 0, "--sample must be >= 0 (0: train), got ", o.sample);
  WEFT_FLAG_CHECK(o.final_sample >= 0, "--final-sample must be >= 0, got ", o.final_sample);
  WEFT_FLAG_CHECK(o.temperature >= 0, "--temperature must be >= 0 (0: the most likely byte), got ", o.temperature);
  WEFT_FLAG_CHECK(o.top_k >= 0, "--top-k must be >= 0 (0: all bytes), got ", o.top_k);
  WEFT_FLAG_CHECK(o.sample == 0 || !o.resume.empty(), "--sample ", o.sample,
                  " generates from a trained checkpoint: give it with --resume PATH");
  check_grid_flags(o);
  // Under mpirun before any rank does more, so that every rank fails alike and rank 0's message is out
  // before mpirun ends the job.
  if (under_mpirun()) (void)grid_dp(o.pp, o.dp, world);
  if (world == 1 && !under_mpirun()) {
    const int dp = o.dp == 0 ? 1 : o.dp;
    WEFT_FLAG_CHECK(o.pp * dp == 1, "--pp ", o.pp, " x --dp ", dp, " needs ", o.pp * dp,
                    " processes: launch it under mpirun -np ", o.pp * dp);
    WEFT_FLAG_CHECK(!o.zero, "--zero shards the optimizer state over data-parallel replicas: launch under mpirun");
  }
  if (o.sample == 0) check_path_exists("--data", o.data);  // sampling reads only the checkpoint
  check_path_exists("--resume", o.resume);
}

}  // namespace weft::examples::gpt
