// Deprecated: the in-process ProcessGroup (ranks as threads) is now
// parallel/inproc/process_group_inproc.h (//parallel/comm/inproc). This header only
// forwards fake::run_ranks there for code not yet migrated; include that
// header and call weft::parallel::run_ranks instead.
#pragma once

#include "parallel/comm/inproc/process_group_inproc.h"

namespace weft::parallel::fake {
using ::weft::parallel::run_ranks;
}  // namespace weft::parallel::fake
