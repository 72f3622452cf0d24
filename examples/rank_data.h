// Small pieces the multi-process examples share: a row range of a dataset,
// and three numbers summed over the ranks (losses, counts).
//
// Contract: slice_rows(ds, begin, end) views rows [begin, end) of `ds` (no
// copy); allreduce_sum(g, a, b, c) is collective over `g` and returns the
// three sums on every rank (float64).
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "io/dataset.h"
#include "parallel/comm/process_group.h"

namespace weft::examples {

std::shared_ptr<io::TensorDataset> slice_rows(const io::TensorDataset& ds, int64_t begin, int64_t end);
std::array<double, 3> allreduce_sum(parallel::ProcessGroup& g, double a, double b, double c);

}  // namespace weft::examples
