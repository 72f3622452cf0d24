// SequentialSampler and RandomSampler (io/sampler.h).
#include "io/sampler.h"

#include "core/error.h"
#include "io/dataloader.h"

namespace weft::io {

SequentialSampler::SequentialSampler(int64_t dataset_size) : n_(dataset_size) {
  WEFT_CHECK(dataset_size >= 0, "SequentialSampler: dataset size must be non-negative, got ", dataset_size);
}

std::vector<int64_t> SequentialSampler::indices(int64_t epoch) const {
  WEFT_CHECK(epoch >= 0, "SequentialSampler::indices: epoch must be >= 0, got ", epoch);
  std::vector<int64_t> p(static_cast<size_t>(n_));
  for (int64_t i = 0; i < n_; ++i) p[i] = i;
  return p;
}

RandomSampler::RandomSampler(int64_t dataset_size, uint64_t seed) : n_(dataset_size), seed_(seed) {
  WEFT_CHECK(dataset_size >= 0, "RandomSampler: dataset size must be non-negative, got ", dataset_size);
}

std::vector<int64_t> RandomSampler::indices(int64_t epoch) const {
  WEFT_CHECK(epoch >= 0, "RandomSampler::indices: epoch must be >= 0, got ", epoch);
  return seeded_permutation(n_, shuffle_seed(seed_, static_cast<uint64_t>(epoch)));
}

}  // namespace weft::io
