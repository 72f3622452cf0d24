"""weft_dependencies(): the repositories weft needs, for weft's own WORKSPACE and
for any workspace that uses weft as an external repository (@weft).

    local_repository(name = "weft", path = "/path/to/weft")   # or http_archive
    load("@weft//:deps.bzl", "weft_dependencies")
    weft_dependencies()

Everything is offline: system libraries come from Debian packages (weft's
./bazelw installs them: libeigen3-dev, libopenmpi-dev, bazel-rules-java, ...),
and the three repositories Bazel 4 would otherwise download are replaced by
local ones:
- rules_cc: weft's tiny forwarder to the native rules (Debian's bazel-rules-cc
  is too new for Bazel 4.2.3);
- rules_java: Debian's bazel-rules-java;
- remote_coverage_tools: two empty filegroups, which every cc_test needs.
A repository the calling WORKSPACE already declared is left as it is.
"""

load("//third_party/cuda:cuda_configure.bzl", "cuda_configure")

def _weft_dir_impl(ctx):
    # The directory holding `marker` (a file inside weft), linked entry by entry.
    src = ctx.path(ctx.attr.marker).dirname
    for child in src.readdir():
        ctx.symlink(child, child.basename)

# A repository made of one of weft's own directories (third_party/rules_cc, ...).
_weft_dir = repository_rule(
    implementation = _weft_dir_impl,
    attrs = {"marker": attr.label(allow_single_file = True)},
    local = True,
)

def weft_dependencies():
    """Declares rules_cc, rules_java, remote_coverage_tools, local_cuda, eigen and openmpi."""
    existing = native.existing_rules()
    if "rules_cc" not in existing:
        _weft_dir(name = "rules_cc", marker = Label("//third_party/rules_cc:WORKSPACE"))
    if "rules_java" not in existing:
        native.local_repository(name = "rules_java", path = "/usr/share/bazel/rules/java")
    if "remote_coverage_tools" not in existing:
        _weft_dir(name = "remote_coverage_tools", marker = Label("//third_party/coverage_tools:WORKSPACE"))

    # CUDA where a toolkit is found (CUDA_PATH, else /usr/local/cuda; WEFT_NO_CUDA=1
    # turns it off); empty targets and CUDA_AVAILABLE = False elsewhere.
    if "local_cuda" not in existing:
        cuda_configure(name = "local_cuda")

    # Eigen from libeigen3-dev (header-only).
    if "eigen" not in existing:
        native.new_local_repository(
            name = "eigen",
            build_file = str(Label("//third_party:eigen.BUILD")),
            path = "/usr/include/eigen3",
        )

    # Open MPI from libopenmpi-dev.
    if "openmpi" not in existing:
        native.new_local_repository(
            name = "openmpi",
            build_file = str(Label("//third_party:openmpi.BUILD")),
            path = "/usr/lib/x86_64-linux-gnu/openmpi",
        )
