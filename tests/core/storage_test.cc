// The CPU allocator's huge-page advice (Note [huge pages] in core/storage.cc):
// read back from the kernel's own view of this process, /proc/self/smaps.
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "core/ops.h"

namespace weft {
namespace {

constexpr uintptr_t kHugePage = uintptr_t{2} << 20;

// The VmFlags line of the mapping that holds address `a`, or "" if none does.
std::string vm_flags_at(uintptr_t a) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {  // a mapping's first line: "lo-hi perms ..."
      inside = lo <= a && a < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return "";
}

bool kernel_has_thp() { return std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled").good(); }

TEST(Storage, WholeHugePagesOfALargeBlockAreAdvisedHuge) {
  if (!kernel_has_thp())
    GTEST_SKIP() << "this kernel has no transparent huge pages (no /sys/kernel/mm/transparent_hugepage)";
  Tensor t = zeros({3 << 20});  // 12 MiB: at least five whole huge pages wherever malloc puts it
  const auto p = reinterpret_cast<uintptr_t>(t.raw_data());
  const uintptr_t first = (p + kHugePage - 1) / kHugePage * kHugePage;
  const uintptr_t last = (p + t.numel() * sizeof(float)) / kHugePage * kHugePage - kHugePage;
  ASSERT_LT(first, last);
  for (uintptr_t a : {first, first + kHugePage, last, last + kHugePage - 1}) {
    const std::string flags = vm_flags_at(a);
    ASSERT_FALSE(flags.empty()) << "no mapping in /proc/self/smaps holds " << std::hex << a;
    EXPECT_NE(flags.find(" hg"), std::string::npos) << "address " << std::hex << a << ": " << flags;
  }
  // the advice changes pages, not values
  EXPECT_EQ(t.sum().item<float>(), 0.0f);
}

}  // namespace
}  // namespace weft
