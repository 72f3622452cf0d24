// Fused attention through cuDNN (core/cuda/attention_cudnn.cc): counters and a
// switch, for tests, benchmarks and diagnosis.
//
// Contract: the counters count fused kernel calls that ran on cuDNN (successful
// cudnnBackendExecute) in this process, all threads; a declined call does not count.
// sdpa_fused_last_decline() is why the most recent declined call (any thread)
// declined, e.g. "cuDNN 9.12.0 < 9.13.1" or a cuDNN status with its message; ""
// before any decline. set_sdpa_fused_enabled(false) makes the kernels decline, so
// scaled_dot_product_attention takes the unfused path; the default is on unless the
// environment variable WEFT_CUDNN_SDPA is "0".
#pragma once

#include <cstdint>
#include <string>

namespace weft::cuda {

int64_t sdpa_fused_forward_calls();
int64_t sdpa_fused_backward_calls();
std::string sdpa_fused_last_decline();
void set_sdpa_fused_enabled(bool enabled);
bool sdpa_fused_enabled();
// The loaded cuDNN library's version (cudnnGetVersion(): major * 10000 + minor * 100 + patch).
int64_t cudnn_runtime_version();

}  // namespace weft::cuda
