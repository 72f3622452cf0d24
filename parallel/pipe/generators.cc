// Schedule names and the make_schedule dispatch (see generators.h).
#include "parallel/pipe/generators.h"

#include "core/error.h"

namespace weft::parallel::pipe {

ScheduleKind parse_schedule_kind(const std::string& name) {
  if (name == "gpipe" || name == "fill-drain") return ScheduleKind::kGPipe;
  if (name == "1f1b") return ScheduleKind::k1F1B;
  if (name == "interleaved" || name == "interleaved-1f1b") return ScheduleKind::kInterleaved1F1B;
  if (name == "zb" || name == "zb-h1") return ScheduleKind::kZeroBubbleH1;
  if (name == "zbv") return ScheduleKind::kZeroBubbleV;
  if (name == "interleaved-zb") return ScheduleKind::kInterleavedZeroBubble;
  WEFT_ERROR("unknown pipeline schedule '", name, "' (known: gpipe, 1f1b, interleaved, zb, zbv, interleaved-zb)");
}

std::string schedule_name(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::kGPipe: return "gpipe";
    case ScheduleKind::k1F1B: return "1f1b";
    case ScheduleKind::kInterleaved1F1B: return "interleaved";
    case ScheduleKind::kZeroBubbleH1: return "zb-h1";
    case ScheduleKind::kZeroBubbleV: return "zbv";
    case ScheduleKind::kInterleavedZeroBubble: return "interleaved-zb";
  }
  return "?";
}

Schedule make_schedule(ScheduleKind kind, int ranks, int microbatches, int virtual_stages) {
  switch (kind) {
    case ScheduleKind::kGPipe: return gpipe_schedule(ranks, microbatches, virtual_stages);
    case ScheduleKind::k1F1B: return one_f_one_b_schedule(ranks, microbatches, virtual_stages);
    case ScheduleKind::kInterleaved1F1B: return interleaved_schedule(ranks, microbatches, virtual_stages);
    case ScheduleKind::kZeroBubbleH1: return zero_bubble_h1_schedule(ranks, microbatches, virtual_stages);
    case ScheduleKind::kZeroBubbleV: return zero_bubble_v_schedule(ranks, microbatches, virtual_stages);
    case ScheduleKind::kInterleavedZeroBubble:
      return interleaved_zero_bubble_schedule(ranks, microbatches, virtual_stages);
  }
  WEFT_ERROR("make_schedule: unknown schedule kind ", static_cast<int>(kind));
}

}  // namespace weft::parallel::pipe
