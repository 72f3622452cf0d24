// Schedule generators: pure functions of (ranks, micro-batches, virtual stages per
// rank) returning a Schedule (schedule.h) with its communication inserted.
//
// Contract (p ranks, m micro-batches, v stages per rank, S = p * v stages on looped
// placement except zbv's V; "rank r" below means the rank's compute order):
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
// - zbv (ZB-V, the zero-bubble paper's V schedule; v must be 2, split
//   backward): V placement (v_placement: rank r holds stages r and
//   2p - 1 - r, so the first and last stage share rank 0 and a micro-batch
//   turns round on rank p - 1 without a message). F, B and W are ordered by
//   the greedy list scheduler (list_schedule.h, Note [greedy zero bubble])
//   with at most 2p live stage activations per rank (1F1B's p micro-batches
//   of a rank's share) and 3p counting the pending W stashes (so memory does
//   not grow with m). With F = B = W, free communication and m >= p (seen
//   for p <= 8, m <= 32, except m = p + 1 at p >= 5) every rank idles only
//   p - 1 stage-times: the least possible, as rank p - 1 cannot start sooner.
// - interleaved-zb (interleaved zero bubble, v >= 1, split backward): looped
//   placement, the same list scheduler with at most v p - r live stage
//   activations on rank r (torch's ScheduleInterleavedZeroBubble's memory),
//   v p - r + 2p with the pending W stashes. Any m; with m a multiple of p
//   (seen for p <= 8, v <= 4, m <= 32) every rank idles p - 1 stage-times.
#pragma once

#include <string>

#include "parallel/pipe/schedule.h"

namespace weft::parallel::pipe {

enum class ScheduleKind { kGPipe, k1F1B, kInterleaved1F1B, kZeroBubbleH1, kZeroBubbleV, kInterleavedZeroBubble };

// "gpipe", "1f1b", "interleaved", "zb", "zbv", "interleaved-zb" (also accepted:
// "fill-drain", "interleaved-1f1b", "zb-h1").
ScheduleKind parse_schedule_kind(const std::string& name);
// The Schedule::name the generator writes: "gpipe", "1f1b", "interleaved", "zb-h1", "zbv", "interleaved-zb".
std::string schedule_name(ScheduleKind kind);

Schedule gpipe_schedule(int ranks, int microbatches, int virtual_stages = 1);
Schedule one_f_one_b_schedule(int ranks, int microbatches, int virtual_stages = 1);
Schedule interleaved_schedule(int ranks, int microbatches, int virtual_stages);
Schedule zero_bubble_h1_schedule(int ranks, int microbatches, int virtual_stages = 1);
Schedule zero_bubble_v_schedule(int ranks, int microbatches, int virtual_stages = 2);
Schedule interleaved_zero_bubble_schedule(int ranks, int microbatches, int virtual_stages);

Schedule make_schedule(ScheduleKind kind, int ranks, int microbatches, int virtual_stages = 1);

}  // namespace weft::parallel::pipe
