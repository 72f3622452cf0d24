// sgemm_mkl_ab: weft's float32 GEMM against MKL's sgemm in one process, the
// two taking turns so that both see the same host (on a shared machine the
// speed of a core moves by 10-20% within seconds, more than the gap measured).
//   sgemm_mkl_ab --mkl-lib PATH [--threads 1] [--rounds 15] [--reps 5]
// (./bazelw run //bench:sgemm_vs_mkl -- [flags] finds PATH itself)
// PATH is a shared library exporting MKL's Fortran `sgemm` and
// `MKL_Set_Num_Threads_Local`: PyTorch's libtorch_cpu.so on x86 (the PyPI
// wheels link MKL into it), found by //bench:sgemm_vs_mkl's wrapper. Per
// shape (sgemm 1024 and the GPT block's forward and weight-gradient
// products, bench/balance_ab.cc's list): `rounds` rounds, each timing `reps`
// calls of weft and of MKL after one untimed call, which one goes first
// alternating by round. Prints both medians in GFLOP/s, the median of the
// rounds' weft / MKL ratios with their range, and the largest difference
// between the two results relative to the largest |C| (a check that both
// computed the same product).
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "core/cpu/gemm.h"
#include "core/error.h"
#include "core/parallel.h"
#include "examples/flags.h"

namespace weft {
namespace {

// Fortran BLAS: column-major, every argument by pointer.
using SgemmFn = void (*)(const char*, const char*, const int*, const int*, const int*, const float*, const float*,
                         const int*, const float*, const int*, const float*, float*, const int*);
using SetThreadsFn = int (*)(int);

struct Mkl {
  SgemmFn sgemm = nullptr;
  SetThreadsFn set_threads = nullptr;
  explicit Mkl(const std::string& path) {
    void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* why = dlerror();
      WEFT_CHECK(false, "cannot load --mkl-lib ", path, ": ", why ? why : "unknown error");
    }
    sgemm = reinterpret_cast<SgemmFn>(dlsym(lib, "sgemm"));
    set_threads = reinterpret_cast<SetThreadsFn>(dlsym(lib, "MKL_Set_Num_Threads_Local"));
    WEFT_CHECK(sgemm && set_threads, path,
               " does not export MKL's sgemm and MKL_Set_Num_Threads_Local (a PyTorch built without MKL?)");
  }
};

int run(int argc, char** argv) {
  int threads = 1, rounds = 15, reps = 5;
  std::string mkl_lib;
  examples::FlagParser flags("usage: sgemm_mkl_ab --mkl-lib PATH [flags]");
  flags.add("--mkl-lib PATH", &mkl_lib, "library exporting MKL's sgemm (PyTorch's libtorch_cpu.so)")
      .add("--threads N", &threads, "threads for both")
      .add("--rounds N", &rounds, "rounds per shape")
      .add("--reps N", &reps, "timed calls per round and side");
  if (auto status = flags.parse_in_main(argc, argv, "sgemm_mkl_ab")) return *status;
  WEFT_FLAG_CHECK(!mkl_lib.empty(), "--mkl-lib is required");
  WEFT_FLAG_CHECK(rounds > 0 && reps > 0 && threads > 0, "--threads, --rounds and --reps must be positive");
  Mkl mkl(mkl_lib);
  set_num_threads(threads);
  mkl.set_threads(threads);

  const int64_t most = bench::kGptGemmMostElements;
  const std::vector<float> a = bench::lcg_floats(most, 1), b = bench::lcg_floats(most, 2);
  std::vector<float> c(most), c_mkl(most);
  std::printf("threads=%d, %d rounds of %d calls per side\n", threads, rounds, reps);
  std::printf("%-11s %11s %11s %8s %15s %10s\n", "case", "weft GF/s", "MKL GF/s", "ratio", "rounds", "max diff");
  for (const bench::GemmCase& sh : bench::kGptGemmCases) {
    const int m = static_cast<int>(sh.m), n = static_cast<int>(sh.n), k = static_cast<int>(sh.k);
    // row-major C (m, n) = A B is column-major C^T (n, m) = B^T A^T
    const int64_t a_rs = sh.a_transposed ? 1 : sh.k, a_cs = sh.a_transposed ? sh.m : 1;
    const int lda_f = n, ldb_f = sh.a_transposed ? m : k, ldc_f = n;
    const char* trans_a = sh.a_transposed ? "T" : "N";
    const float one = 1, zero = 0;
    auto weft_call = [&] {
      cpu::gemm<float>(sh.m, sh.n, sh.k, a.data(), a_rs, a_cs, b.data(), sh.n, 1, c.data(), sh.n);
    };
    auto mkl_call = [&] {
      mkl.sgemm("N", trans_a, &n, &m, &k, &one, b.data(), &lda_f, a.data(), &ldb_f, &zero, c_mkl.data(), &ldc_f);
    };
    const double gflop = 2e-9 * sh.m * sh.n * sh.k * reps;
    auto rate = [&](const auto& call) {
      call();
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < reps; ++i) call();
      return gflop / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    std::vector<double> rates_weft, rates_mkl, ratio;
    for (int r = 0; r < rounds; ++r) {
      double rw, rm;
      if (r % 2 == 0) rw = rate(weft_call), rm = rate(mkl_call);
      else rm = rate(mkl_call), rw = rate(weft_call);
      rates_weft.push_back(rw), rates_mkl.push_back(rm), ratio.push_back(rw / rm);
    }
    double diff = 0, top = 0;
    for (int64_t i = 0; i < sh.m * sh.n; ++i)
      diff = std::max(diff, double(std::fabs(c[i] - c_mkl[i]))), top = std::max(top, double(std::fabs(c_mkl[i])));
    const auto [lo, hi] = std::minmax_element(ratio.begin(), ratio.end());
    std::printf("%-11s %11.1f %11.1f %7.3fx %7.2f - %5.2f %10.1e\n", sh.name, bench::median(rates_weft),
                bench::median(rates_mkl), bench::median(ratio), *lo, *hi, top > 0 ? diff / top : diff);
  }
  return 0;
}

}  // namespace
}  // namespace weft

int main(int argc, char** argv) {
  return weft::examples::run_main("sgemm_mkl_ab", [&] { return weft::run(argc, argv); });
}
