// Device selection for the examples and GPU benchmarks, identical in CUDA and
// CPU-only builds: the BUILD file picks device_support_cuda.cc where a CUDA
// toolkit was detected (CUDA_AVAILABLE) and device_support_cpu.cc elsewhere, so
// no source file needs #ifdefs and CPU-only builds never include core/cuda/*.h.
//
// Contract:
// - parse_device("cpu" | "cuda" | "cuda:N") returns the device after checking it
//   can be used: a CUDA device must exist (the error says "no CUDA GPU is visible"
//   and the driver's reason without one, or that the binary was built without CUDA
//   support). A CUDA device becomes the process's device
//   (weft::cuda::set_process_device; the first choice wins).
// - move_to(t, d) copies a CPU batch to d (values identical to t.to(d)).
// - synchronize(d) waits for all queued work on d (no-op for the CPU).
// - AmpScope(amp, d): "none" does nothing; "bf16" enables bfloat16 autocast for d's
//   device type for the scope (weft::AutocastGuard, core/autocast.h).
#pragma once

#include <memory>
#include <string>

#include "core/tensor.h"

namespace weft::examples {

bool cuda_built();
Device parse_device(const std::string& spec);
Tensor move_to(const Tensor& t, Device d);
void synchronize(Device d);

class AmpScope {
 public:
  AmpScope(const std::string& amp, Device d);
  ~AmpScope();
  AmpScope(const AmpScope&) = delete;
  AmpScope& operator=(const AmpScope&) = delete;
  // Checks `amp` is a known mode ("none" or "bf16"), before any work starts.
  static void check(const std::string& amp);

 private:
  std::shared_ptr<void> guard_;
};

}  // namespace weft::examples
