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
      .add("--keep-last N", &o.keep_last, "keep only the newest N checkpoints under --save (0: all)")
      .add("--resume DIR", &o.resume,
           "continue from the latest checkpoint in DIR (saved by any --pp/--dp/--zero, or one process), or sample "
           "from it")
      .add_switch("--no-progress", &o.progress, false, "no progress bar")
      .add("--sample N", &o.sample, "generate N bytes from --resume's checkpoint and exit (no training)", "0: train")
      .add("--final-sample N", &o.final_sample, "bytes sampled at the end of training")
      .add("--prompt TEXT", &o.prompt, "text the sample continues", "a new line")
      .add("--temperature X", &o.temperature, "sampling temperature (0: always the most likely byte)")
      .add("--top-k N", &o.top_k, "sample among the N most likely bytes", "0: all")
      .add("--sample-seed N", &o.sample_seed, "seed for sampling")
      .add("--pp N", &o.pp, "pipeline stages (ranks per replica; under mpirun)")
      .add("--dp N", &o.dp, "data-parallel replicas; --pp x --dp must be the world size", "world size / --pp")
      .add("--chunks N", &o.chunks, "micro-batches per replica per step")
      .add_choice("--schedule", &o.schedule, {"gpipe", "1f1b", "interleaved", "zb"}, "pipeline schedule")
      .add("--virtual N", &o.virtual_stages, "stages per rank (interleaved needs --balance)",
           "2 for interleaved, else 1")
      .add("--balance auto|A,B,...", &o.balance,
           "layers per stage (the model's children: embedding, blocks, norm, head), or auto: measured on rank 0")
      .add_switch("--zero", &o.zero, true, "shard the optimizer state over the replicas (ZeRO-1)");
  if (!p.parse(argc, argv, std::cout)) return std::nullopt;
  m.tied = !o.untied;
  for (std::string* path : {&o.data, &o.save, &o.resume, &o.metrics, &o.plot}) *path = user_path(*path);
  return o;
}

void check_options(const Options& o, int world) {
  check_config(o.model);
  WEFT_CHECK(o.steps >= 1, "--steps must be a positive integer, got ", o.steps);
  WEFT_CHECK(o.batch_size >= 1, "--batch-size must be a positive integer, got ", o.batch_size);
  WEFT_CHECK(o.lr > 0, "--lr must be positive, got ", o.lr);
  WEFT_CHECK(o.min_lr_ratio >= 0 && o.min_lr_ratio <= 1, "--min-lr-ratio must be in [0, 1], got ", o.min_lr_ratio);
  WEFT_CHECK(o.warmup >= 0 && o.warmup < o.steps, "--warmup ", o.warmup, " must be below --steps ", o.steps);
  WEFT_CHECK(o.weight_decay >= 0, "--weight-decay must be >= 0, got ", o.weight_decay);
  WEFT_CHECK(o.beta2 > 0 && o.beta2 < 1, "--beta2 must be in (0, 1), got ", o.beta2);
  WEFT_CHECK(o.clip >= 0, "--clip must be >= 0 (0: no clipping), got ", o.clip);
  WEFT_CHECK(o.eval_interval >= 1, "--eval-interval must be a positive integer, got ", o.eval_interval);
  WEFT_CHECK(o.eval_batches >= 1, "--eval-batches must be a positive integer, got ", o.eval_batches);
  WEFT_CHECK(o.stop_after >= 0, "--stop-after must be >= 0, got ", o.stop_after);
  WEFT_CHECK(o.keep_last >= 0, "--keep-last must be >= 0 (0: keep all), got ", o.keep_last);
  WEFT_CHECK(o.sample >= 0 && o.final_sample >= 0, "--sample and --final-sample must be >= 0");
  WEFT_CHECK(o.sample == 0 || !o.resume.empty(), "--sample ", o.sample,
             " generates from a trained checkpoint: give it with --resume PATH");
  WEFT_CHECK(o.pp >= 1, "--pp must be a positive integer, got ", o.pp);
  WEFT_CHECK(o.dp >= 0, "--dp must be a positive integer (or omitted: world size / --pp), got ", o.dp);
  WEFT_CHECK(o.chunks >= 1, "--chunks must be a positive integer, got ", o.chunks);
  WEFT_CHECK(o.virtual_stages >= 0, "--virtual must be a positive integer, got ", o.virtual_stages);
  if (world == 1 && !under_mpirun()) {
    const int dp = o.dp == 0 ? 1 : o.dp;
    WEFT_CHECK(o.pp * dp == 1, "--pp ", o.pp, " x --dp ", dp, " needs ", o.pp * dp,
               " processes: launch it under mpirun -np ", o.pp * dp);
    WEFT_CHECK(!o.zero, "--zero shards the optimizer state over data-parallel replicas: launch under mpirun");
  }
}

}  // namespace weft::examples::gpt
