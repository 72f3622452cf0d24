"""Detects a CUDA toolkit and exposes it as @local_cuda.

Where a toolkit exists (CUDA_PATH, else /usr/local/cuda), @local_cuda//:defs.bzl has
CUDA_AVAILABLE = True and the BUILD wires cudart, cublas, cudnn and nccl as targets.
Where none exists the same targets exist but are empty, and CUDA_AVAILABLE = False,
so packages select whole CUDA libraries at load time; the CPU build never needs it.
"""

def _find(ctx, root, names):
    for n in names:
        for d in ["lib64", "lib", "targets/x86_64-linux/lib"]:
            p = ctx.path(root + "/" + d + "/" + n)
            if p.exists:
                return root + "/" + d
    for d in ["/usr/lib/x86_64-linux-gnu", "/usr/lib64"]:
        for n in names:
            if ctx.path(d + "/" + n).exists:
                return d
    return None

def _cuda_configure_impl(ctx):
    root = ctx.os.environ.get("CUDA_PATH", "/usr/local/cuda")
    nvcc = ctx.path(root + "/bin/nvcc")
    available = nvcc.exists and ctx.os.environ.get("WEFT_NO_CUDA", "") == ""
    if not available:
        ctx.file("defs.bzl", "CUDA_AVAILABLE = False\nNVCC = None\nCUDA_ROOT = None\n")
        ctx.file("BUILD", "\n".join([
            'package(default_visibility = ["//visibility:public"])',
            'exports_files(["defs.bzl"])',
        ] + ['cc_library(name = "%s")' % n for n in ["cuda_headers", "cudart", "cublas", "cudnn", "nccl"]]) + "\n")
        return
    ctx.symlink(root + "/include", "include")
    libs = {
        "cudart": ["libcudart.so"],
        "cublas": ["libcublas.so", "libcublasLt.so"],
        "cudnn": ["libcudnn.so"],
        "nccl": ["libnccl.so"],
    }
    lines = [
        'package(default_visibility = ["//visibility:public"])',
        'exports_files(["defs.bzl"])',
        'cc_library(name = "cuda_headers", hdrs = glob(["include/**/*.h", "include/**/*.hpp", "include/**/*.cuh"]), includes = ["include"])',
    ]
    for name, files in libs.items():
        d = _find(ctx, root, files[:1])
        if d == None:
            lines.append('cc_library(name = "%s", deps = [":cuda_headers"])' % name)
            continue
        flags = ['"-L%s"' % d, '"-Wl,-rpath,%s"' % d] + ['"-l%s"' % f[3:-3] for f in files]
        lines.append('cc_library(name = "%s", deps = [":cuda_headers"], linkopts = [%s])' % (name, ", ".join(flags)))
    ctx.file("BUILD", "\n".join(lines) + "\n")
    ctx.file("defs.bzl", 'CUDA_AVAILABLE = True\nNVCC = "%s"\nCUDA_ROOT = "%s"\n' % (str(nvcc), root))

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_PATH", "WEFT_NO_CUDA"],
    local = True,
)
