// Schedule generators: pure functions of (ranks, micro-batches, virtual stages per
// rank) returning a Schedule (schedule.h) with its communication inserted.
//
// Contract (p ranks, m micro-batches, v stages per rank, S = p * v stages on looped
// placement; "rank r" below means the rank's compute order):
// - gpipe (fill-drain; with v > 1 the looped BFS order): every forward, then every
//   backward. Rank r runs F for its stages in increasing order, each over micro-
//   batches 0..m-1, then B for its stages in decreasing order, each over 0..m-1.
// - 1f1b (PipeDream-flush, v = 1): rank r runs min(p-1-r, m) warm-up forwards,
//   then alternates one forward and one backward, then drains the remaining
//   backwards. Stage r keeps at most p - r micro-batches' activations alive.
// - interleaved (Megatron's interleaved 1F1B, v >= 1, m a multiple of p): forward
//   step k of rank r runs stage ((k / p) % v) * p + r on micro-batch
//   (k / (p v)) * p + k % p; backward step k the same micro-batch on chunk
//   v - 1 - (k / p) % v. Warm-up: min((v-1) p + 2 (p-1-r), m v) forwards (for
//   v = 1 it is 1f1b's p-1-r, so interleaved with v = 1 is 1f1b), then one forward
//   and one backward step at a time, then the remaining backwards. (Megatron runs
//   everything as warm-up when m = p; with buffered sends that is not needed.)
// - zb-h1 (zero bubble, "ZB-H1" of Qi et al. 2023, v = 1, split backward): 1f1b's
//   order of F and B (same warm-up, same peak of live activations), with W(r, j)
//   deferred: rank r runs W in micro-batch order, the j-th W right after the B of
//   micro-batch j + r (so W lags B by r micro-batches), and the last r Ws after its
//   final B, where they fill the drain bubble. With F = B = W in cost and m >= p
//   every rank idles exactly p - 1 (1f1b: 3 (p-1)).
#pragma once

#include <string>

#include "parallel/pipe/schedule.h"

namespace weft::parallel::pipe {

enum class ScheduleKind { kGPipe, k1F1B, kInterleaved1F1B, kZeroBubbleH1 };

// "gpipe", "1f1b", "interleaved", "zb" (also accepted: "fill-drain", "interleaved-1f1b", "zb-h1").
ScheduleKind parse_schedule_kind(const std::string& name);
// The Schedule::name the generator writes: "gpipe", "1f1b", "interleaved", "zb-h1".
std::string schedule_name(ScheduleKind kind);

Schedule gpipe_schedule(int ranks, int microbatches, int virtual_stages = 1);
Schedule one_f_one_b_schedule(int ranks, int microbatches, int virtual_stages = 1);
Schedule interleaved_schedule(int ranks, int microbatches, int virtual_stages);
Schedule zero_bubble_h1_schedule(int ranks, int microbatches, int virtual_stages = 1);

Schedule make_schedule(ScheduleKind kind, int ranks, int microbatches, int virtual_stages = 1);

}  // namespace weft::parallel::pipe
