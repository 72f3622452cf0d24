// AmpScope (examples/device_support.h): the --amp flag of the examples/benchmarks.
#include "core/autocast.h"
#include "core/error.h"
#include "examples/device_support.h"

namespace weft::examples {

void AmpScope::check(const std::string& amp) {
  WEFT_CHECK(amp == "none" || amp == "bf16", "--amp must be none or bf16, got '", amp, "'");
}

AmpScope::AmpScope(const std::string& amp, Device d) {
  check(amp);
  if (amp == "none") return;
  guard_ = std::make_shared<AutocastGuard>(d.type, DType::BFloat16);
}

AmpScope::~AmpScope() = default;

}  // namespace weft::examples
