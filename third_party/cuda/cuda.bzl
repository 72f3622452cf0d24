"""cuda_library: .cu sources compiled by nvcc, wrapped as an alwayslink cc_library.

Only call it where CUDA_AVAILABLE (see cuda_configure.bzl); packages pick whole
libraries at load time:  `cuda_library(...) if CUDA_AVAILABLE else cc_library(...)`.
Device code is built for Hopper (sm_90 SASS) plus compute_90 PTX so newer GPUs can
JIT it. Each .cu becomes one PIC object; headers come from `hdrs` (filegroups of the
packages the .cu includes) so the genrule runs hermetically in the sandbox.
"""

load("@local_cuda//:defs.bzl", "CUDA_AVAILABLE", "NVCC")

CUDA_ARCH_FLAGS = "-gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90"
NVCC_FLAGS = " ".join([
    "-std=c++20",
    "-O3",
    "--expt-relaxed-constexpr",
    "--extended-lambda",
    "-Xcompiler -fPIC,-O3,-fopenmp",
    "-Xcudafe --diag_suppress=esa_on_defaulted_function_ignored",
    "-I.",
    "-I$(GENDIR)",
])

def cuda_library(name, srcs, hdrs = [], deps = [], cc_srcs = [], visibility = None):
    """cc_library `name` from .cu `srcs` (nvcc) plus host `cc_srcs`/`hdrs` (g++)."""
    # Includes are rooted at weft's top directory: "." in weft's own workspace,
    # external/<name> where weft is an external repository (@weft).
    repo = native.repository_name()
    top = "." if repo == "@" else "external/" + repo[1:]
    flags = NVCC_FLAGS if top == "." else NVCC_FLAGS + " -I%s -I$(GENDIR)/%s" % (top, top)
    objs = []
    for src in srcs:
        base = src[:-3].replace("/", "_")
        out = "_nvcc/%s/%s.pic.o" % (name, base)
        native.genrule(
            name = "%s__%s_nvcc" % (name, base),
            srcs = [src] + hdrs + ["//core:headers", "//core/cuda:cuda_headers_for_nvcc"],
            outs = [out],
            # nvcc names its temporaries after its pid, which is the same in
            # every sandbox (a pid namespace): each action gets its own TMPDIR.
            cmd = "t=$$(mktemp -d) && TMPDIR=$$t %s %s %s -c $(location %s) -o $@; r=$$?; rm -rf $$t; exit $$r" % (
                NVCC,
                flags,
                CUDA_ARCH_FLAGS,
                src,
            ),
            message = "nvcc %s" % src,
        )
        objs.append(out)
    native.cc_library(
        name = name,
        srcs = objs + cc_srcs,
        hdrs = [h for h in hdrs if h.endswith(".h")],
        deps = deps + ["//third_party/cuda:cudart"],
        alwayslink = 1,
        visibility = visibility,
    )
