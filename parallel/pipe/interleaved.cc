// Interleaved 1F1B (Megatron-LM style): v stages per rank, micro-batches in groups of p.
#include <algorithm>

#include "core/error.h"
#include "parallel/pipe/generators.h"

namespace weft::parallel::pipe {

Schedule interleaved_schedule(int ranks, int microbatches, int virtual_stages) {
  WEFT_CHECK(ranks > 0 && microbatches > 0 && virtual_stages > 0,
             "interleaved: ranks, micro-batches and virtual stages must be positive (ranks=", ranks,
             ", microbatches=", microbatches, ", virtual=", virtual_stages, ")");
  WEFT_CHECK(microbatches % ranks == 0,
             "interleaved 1F1B needs the micro-batch count to be a multiple of the rank count",
             " (microbatches=", microbatches, ", ranks=", ranks, ")");
  Schedule s = make_empty_schedule("interleaved", ranks, microbatches, virtual_stages, /*split_backward=*/false);
  const int p = ranks, v = virtual_stages, total = microbatches * virtual_stages;
  for (int r = 0; r < p; ++r) {
    // Step k of either direction works on micro-batch (k / (p v)) * p + k % p.
    auto mb_of = [&](int k) { return (k / (p * v)) * p + k % p; };
    auto forward = [&](int k) { return Action::forward(((k / p) % v) * p + r, mb_of(k)); };
    auto backward = [&](int k) { return Action::backward((v - 1 - (k / p) % v) * p + r, mb_of(k)); };
    const int warmup = v == 1 ? std::min(p - 1 - r, total) : std::min((v - 1) * p + 2 * (p - 1 - r), total);
    auto& out = s.rank_actions[r];
    for (int k = 0; k < warmup; ++k) out.push_back(forward(k));
    for (int i = 0; i < total - warmup; ++i) {
      out.push_back(forward(warmup + i));
      out.push_back(backward(i));
    }
    for (int k = total - warmup; k < total; ++k) out.push_back(backward(k));
  }
  insert_communication(s);
  return s;
}

}  // namespace weft::parallel::pipe
