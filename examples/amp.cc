// AmpScope (examples/device_support.h): the --amp flag of the examples/benchmarks.
#include "core/error.h"
#include "examples/device_support.h"

// TODO(integ): once core/autocast.h (branch h/kern_lib) is merged, include it and
// replace the error below with:
//   guard_ = std::make_shared<AutocastGuard>(d.type, DType::BFloat16);
namespace weft::examples {

void AmpScope::check(const std::string& amp) {
  WEFT_CHECK(amp == "none" || amp == "bf16", "--amp must be none or bf16, got '", amp, "'");
}

AmpScope::AmpScope(const std::string& amp, Device d) {
  check(amp);
  if (amp == "none") return;
  (void)d;
  WEFT_ERROR("--amp bf16: autocast (core/autocast.h, weft::AutocastGuard) is not in this build yet");
}

AmpScope::~AmpScope() = default;

}  // namespace weft::examples
