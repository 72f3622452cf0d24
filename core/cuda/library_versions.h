// The one-line reports of the CUDA libraries' versions printed at first use
// (cuDNN handle, cuBLAS handle, NCCL communicator), free of CUDA so the text and
// the comparison are tested on any machine (tests/cuda/library_versions_test.cc).
// The build's headers (cuDNN 9.19, cuBLAS 13.1 here) may be newer than the
// libraries a GPU host loads; the line says so.
//
// Contract:
// - mmp_text(v): a major * 10000 + minor * 100 + patch number (cudnnGetVersion,
//   CUDNN_VERSION, CUBLAS_VERSION, NCCL_VERSION_CODE from NCCL 2.9) as "9.19.0".
// - cuda_text(v): a CUDA runtime/driver number (1000 * major + 10 * minor) as "13.0".
// - version_line(library, runtime, built): "weft: cuDNN 9.17.0 loaded (built
//   with 9.19.0; the loaded library is older than the headers)" when runtime <
//   built, "weft: cuDNN 9.19.0 loaded (built with 9.19.0)" otherwise.
// - print_version_once(key, line): writes line to stderr the first time `key`
//   is reported in the process (not at all when WEFT_PRINT_VERSIONS=0); returns
//   whether it wrote. Thread-safe.
#pragma once

#include <cstdint>
#include <string>

namespace weft::cuda {

std::string mmp_text(int64_t v);
std::string cuda_text(int64_t v);
// runtime and built in the same encoding; `text` turns one into words.
std::string version_line(const std::string& library, int64_t runtime, int64_t built,
                         std::string (*text)(int64_t) = mmp_text);
bool print_version_once(const std::string& key, const std::string& line);

}  // namespace weft::cuda
