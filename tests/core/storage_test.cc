// The CPU allocator's huge-page advice (Note [huge pages] in core/storage.cc):
// read back from the kernel's own view of this process, /proc/self/smaps.
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include <gtest/gtest.h>
#include <sys/mman.h>

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

// Why this process cannot observe the advice, or "" if it can: a kernel without
// transparent huge pages, one that refuses MADV_HUGEPAGE, or a /proc without
// VmFlags (some sandboxes).
std::string why_unobservable() {
  if (!std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled").good())
    return "this kernel has no transparent huge pages (no /sys/kernel/mm/transparent_hugepage)";
  const size_t len = size_t{4} << 20;
  void* probe = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (probe == MAP_FAILED) return "mmap of a 4 MiB probe failed";
  const int rc = madvise(probe, len, MADV_HUGEPAGE);
  const std::string flags = vm_flags_at(reinterpret_cast<uintptr_t>(probe));
  munmap(probe, len);
  if (rc != 0) return "the kernel refuses madvise(MADV_HUGEPAGE)";
  if (flags.empty()) return "/proc/self/smaps shows no VmFlags here";
  return "";
}

TEST(Storage, WholeHugePagesOfALargeBlockAreAdvisedHuge) {
  const std::string why = why_unobservable();
  if (!why.empty()) GTEST_SKIP() << why;
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
