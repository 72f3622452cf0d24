// Deprecated: the in-process ProcessGroup (ranks as threads) is now
// parallel/comm/inproc/process_group_inproc.h, its run_ranks harness
// parallel/comm/inproc/testing.h (//parallel/comm/inproc:testing). This header
// only forwards fake::run_ranks there for code not yet migrated; include that
// header and call weft::parallel::run_ranks instead.
#pragma once

#include "parallel/comm/inproc/testing.h"

namespace weft::parallel::fake {
using ::weft::parallel::run_ranks;
}  // namespace weft::parallel::fake
