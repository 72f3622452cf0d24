// The schedule validator: a Schedule that passes can be run without a missing
// input, an unmatched message or a deadlock.
//
// Contract: validate(schedule) returns normally or throws weft::Error. Checks, in
// this order (the first failure is reported):
// 1. shape: positive counts, one action list per rank, a placement entry per
//    stage naming a valid rank;
// 2. each action: stage in range and placed on this rank, micro-batch in range, W
//    only in split schedules, communication naming the right neighbour stage
//    (s+1 for SendAct/RecvGrad, s-1 for RecvAct/SendGrad) on its own rank, which
//    is not this rank;
// 3. per rank, in order: no action twice; F(s, mb) before B(s, mb) before W(s, mb);
//    F's input available (F(s-1, mb) earlier on this rank when stage s-1 is local,
//    else RecvAct(s, mb) earlier); B's output gradient available (B(s+1, mb) earlier
//    when local, else RecvGrad(s, mb) earlier); a send after the compute it sends;
//    a TiedGrad(g) after every B (W when split) of group g's stages on its rank;
//    a ReduceGrad(s) after every B (W when split) of stage s; a
//    ReduceTiedGrad(g) after TiedGrad(g) (Note [gradient reduction]); an
//    Overlap(s) followed at once by F(s, mb) and a B of another stage or
//    micro-batch (Note [overlapped F and B] in schedule.h);
// 4. completeness: every (stage, mb) has its F and B (and W when split); every
//    rank holding a stage of a tied group has its TiedGrad; with reduce_grads,
//    every stage its ReduceGrad and every tied holder its ReduceTiedGrad
//    (without reduce_grads, any reduction is an error in step 2);
// 5. matching: every send has exactly one receive of the same payload, micro-batch
//    and sending stage on its peer rank, and every receive exactly one send;
// 6. deadlock: the ranks' lists are run against each other with buffered sends
//    (a send never blocks), blocking receives (a receive waits until its send
//    was issued) and TiedGrad(g) as a rendezvous of the group's ranks (each
//    waits until all reached theirs); the reductions never wait on a
//    pipeline peer (their partners are other replicas running the same
//    lists); if all remaining ranks wait, the lowest such rank, its action
//    and the cycle of waiting ranks are reported.
// Messages start "schedule <name>: rank R action I (<action>): ...".
#pragma once

#include "parallel/pipe/schedule.h"

namespace weft::parallel::pipe {

void validate(const Schedule& schedule);

}  // namespace weft::parallel::pipe
