#include "core/dtype.h"

#include "core/device.h"

namespace weft {

namespace {
int rank(DType d) {
  switch (d) {
    case DType::Bool: return 0;
    case DType::UInt8: return 1;
    case DType::Int32: return 2;
    case DType::Int64: return 3;
    case DType::Float16: return 4;
    case DType::BFloat16: return 4;
    case DType::Float32: return 5;
    case DType::Float64: return 6;
  }
  return 0;
}
}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if ((a == DType::Float16 && b == DType::BFloat16) || (a == DType::BFloat16 && b == DType::Float16))
    return DType::Float32;
  return rank(a) >= rank(b) ? a : b;
}

Device::Device(const std::string& spec) {
  if (spec == "cpu") {
    type = DeviceType::CPU;
    index = 0;
    return;
  }
  if (spec.rfind("cuda", 0) == 0) {
    type = DeviceType::CUDA;
    index = 0;
    if (spec.size() > 4) {
      WEFT_CHECK(spec[4] == ':' && spec.size() > 5, "Device: invalid device string '", spec,
                 "' (expected cpu, cuda or cuda:N)");
      try {
        size_t pos = 0;
        index = std::stoi(spec.substr(5), &pos);
        WEFT_CHECK(pos == spec.size() - 5 && index >= 0, "Device: invalid device index in '", spec, "'");
      } catch (const std::logic_error&) {
        WEFT_ERROR("Device: invalid device string '", spec, "' (expected cpu, cuda or cuda:N)");
      }
    }
    return;
  }
  WEFT_ERROR("Device: invalid device string '", spec, "' (expected cpu, cuda or cuda:N)");
}

}  // namespace weft
