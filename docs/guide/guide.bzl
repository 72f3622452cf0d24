"""guide_program: one program of the guide, built and run as a test.

The program `name`.cc becomes a private cc_binary `name`; the sh_test
`name`_test runs it through run_program.sh with `args` (@TMP@ standing for
the test's temporary directory), under mpirun once per rank count in `np`
when np is given (then tagged multiprocess), and checks that each run exits
0 and prints every line of `expect` (fixed strings).
"""

def guide_program(name, deps, expect, np = [], args = [], size = "small"):
    native.cc_binary(
        name = name,
        srcs = [name + ".cc"],
        deps = deps,
    )
    script_args = ["$(location :%s)" % name]
    data = [":" + name]
    tags = []
    if np:
        script_args += ["--np", ",".join([str(n) for n in np]), "--mpirun", "$(location //tests/parallel:mpirun.sh)"]
        data.append("//tests/parallel:mpirun.sh")
        tags.append("multiprocess")
    for line in expect:
        # Test args are split like a shell command line: quote each pattern.
        script_args += ["--expect", "'%s'" % line.replace("'", "'\\''")]
    native.sh_test(
        name = name + "_test",
        # Under mpirun: two runs, each starting its ranks on a shared machine.
        size = "medium" if np else size,
        srcs = ["run_program.sh"],
        args = script_args + ["--"] + args,
        data = data,
        tags = tags,
    )
