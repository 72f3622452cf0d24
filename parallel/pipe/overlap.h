// Overlapped F and B (DualPipeV's idea, Note [overlapped F and B] in
// schedule.h): pairing a rank's forwards with the backwards that follow them.
//
// Contract:
// - overlap_forward_backward(schedule) returns the schedule with Overlap
//   pairs, named "<name>-overlap". Rank by rank, front to back, an F whose
//   next compute action on the rank is a B of another stage or micro-batch
//   (only sends and receives between them) becomes a pair: the receives
//   between them move before the Overlap, the sends after the B. A pair is
//   kept only when the whole schedule still validates (validate.h: no
//   deadlock, every input there); otherwise that F stays as it was. The
//   input is validated first; an F already in a pair is left alone, and in
//   a split schedule F pairs with B, never with W.
// - With costs, a pair is kept only when simulate(trial, costs).makespan is
//   at most the makespan before it.
// - The pair costs what the simulator's overlap_speed says (simulate.h): it
//   pays only when a rank's cores are not all busy with one action (small
//   micro-batches, few threads), or, on a GPU, when one action's transfers
//   hide behind the other's compute.
#pragma once

#include "parallel/pipe/schedule.h"
#include "parallel/pipe/simulate.h"

namespace weft::parallel::pipe {

Schedule overlap_forward_backward(Schedule schedule);
// The same, keeping a pair only when the simulated step under `costs` does
// not grow (so with overlap_speed 0.5, no gain, pairs that delay a send are
// dropped).
Schedule overlap_forward_backward(Schedule schedule, const CostModel& costs);

}  // namespace weft::parallel::pipe
