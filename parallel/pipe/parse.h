// Text schedules: parse_schedule reads what to_string(const Schedule&) writes
// (schedule.h), and what a user writes by hand in the same shape.
//
// Contract:
// - parse_schedule(to_string(s)) == s, field by field, for every schedule the
//   generators make (generators.h), with tied groups (add_tied_grads) and
//   data-parallel reductions (add_reduce_grads) or without; and for any
//   schedule whose name has no ':', '#' or line break and no spaces at its
//   ends (a placement other than the looped one, stage s on rank s % ranks,
//   is written in the header).
// - The grammar, line by line ('#' starts a comment that runs to the end of
//   the line; blank lines are skipped; tokens are separated by any spaces or
//   tabs):
//     header    [<name>:] key=value ...      optional, at most one, before the rank lines
//     rank line rank <r>: <action> ...       one per rank, r = 0, 1, 2, ... in order
//   A line whose first token is "rank" is a rank line; any other is the header.
//   Header keys, each at most once, in any order: ranks=N, microbatches=N,
//   virtual=N (stages per rank), stages=N (ranks * virtual), backward=full|split,
//   reduce=dp (Note [gradient reduction]), tied=G,G,... with a group G written
//   as its stages joined by '+' ("tied=0+3,1+2"), placement=looped|v|R,R,...
//   (looped: stage s on rank s % ranks, as when left out; v: v_placement,
//   2 * ranks stages in a V; else each stage's rank, "placement=0,1,1,0", its
//   length the stage count). Numbers are decimal.
//   Actions (to_string(Action)), the kind spelled as to_string(ActionKind):
//     F0.1 B0.1 W0.1                     compute: <kind><stage>.<micro-batch>
//     SendAct0.1->s1@r1 SendGrad1.1->s0@r0  <kind><stage>.<mb>->s<peer stage>@r<peer rank>
//     RecvAct1.1<-s0@r0 RecvGrad0.1<-s1@r1  <kind><stage>.<mb><-s<peer stage>@r<peer rank>
//     Tied0@s3 ReduceTied0@s3            <kind><tied group>@s<stage>
//     Reduce3                            <kind><stage>
//   Fields an action does not spell keep Action's defaults (micro-batch 0,
//   peers -1, tie -1), as the Action factories make them.
// - A key the header leaves out (or all of them, when there is no header) is
//   derived from the rank lines: ranks = their count; stages = the
//   placement's (when it gives a list or v), else the highest
//   stage any action names + 1 (it must divide by ranks), or ranks * virtual;
//   virtual = stages / ranks; microbatches = the highest micro-batch + 1
//   (text without compute or communication actions must give it); backward =
//   split when any W appears; reduce when any Reduce or ReduceTied appears;
//   tied groups from the Tied actions (group g: the stages its Tied<g>
//   actions name, which is each rank's lowest stage of the group: write tied=
//   when a rank holds two stages of one group). The name is "custom" without
//   a header.
// - parse_schedule checks the text, not the schedule: pass the result to
//   validate() (validate.h) before running it. Errors are weft::Error naming
//   the line (1-based) and, where one is at fault, the token (1-based, counted
//   over the line's space-separated words), e.g. "parse_schedule: line 3,
//   token 5 'Fx.1': expected F<stage>.<micro-batch>". Errors: an unknown kind
//   or key, a malformed action or number, a rank line out of order or twice,
//   a second header or one after a rank line, header counts that disagree
//   with each other, with the placement or with the rank lines, a stage
//   placed on a rank past the rank lines, no rank line.
#pragma once

#include <string>

#include "parallel/pipe/schedule.h"

namespace weft::parallel::pipe {

Schedule parse_schedule(const std::string& text);

}  // namespace weft::parallel::pipe
