// Library version reports (core/cuda/library_versions.h).
#include "core/cuda/library_versions.h"

#include <gtest/gtest.h>

namespace weft::cuda {
namespace {

TEST(LibraryVersions, Text) {
  EXPECT_EQ(mmp_text(91900), "9.19.0");
  EXPECT_EQ(mmp_text(130100), "13.1.0");
  EXPECT_EQ(mmp_text(22703), "2.27.3");
  EXPECT_EQ(cuda_text(13000), "13.0");
  EXPECT_EQ(cuda_text(12080), "12.8");
}

TEST(LibraryVersions, SaysWhenTheLoadedLibraryIsOlderThanTheHeaders) {
  EXPECT_EQ(version_line("cuDNN", 91700, 91900),
            "weft: cuDNN 9.17.0 loaded (built with 9.19.0; the loaded library is older than the headers)");
  EXPECT_EQ(version_line("cuBLAS", 130100, 130100), "weft: cuBLAS 13.1.0 loaded (built with 13.1.0)");
  EXPECT_EQ(version_line("cuDNN", 92100, 91900), "weft: cuDNN 9.21.0 loaded (built with 9.19.0)");
  EXPECT_EQ(version_line("CUDA runtime", 12080, 13000, cuda_text),
            "weft: CUDA runtime 12.8 loaded (built with 13.0; the loaded library is older than the headers)");
}

TEST(LibraryVersions, PrintsEachLibraryOnce) {
  EXPECT_TRUE(print_version_once("test-lib", "weft: test-lib 1.0.0 loaded (built with 1.0.0)"));
  EXPECT_FALSE(print_version_once("test-lib", "weft: test-lib 1.0.0 loaded (built with 1.0.0)"));
  EXPECT_TRUE(print_version_once("other-lib", "weft: other-lib 1.0.0 loaded (built with 1.0.0)"));
}

}  // namespace
}  // namespace weft::cuda
