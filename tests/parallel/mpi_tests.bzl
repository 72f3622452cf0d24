"""Multi-process tests of parallel/: binaries run under mpirun by a script.

Usable from any package under tests/. mpi_sh_test runs one binary through a
script (//tests/parallel:mpi_test.sh: mpirun -np 2, then
-np 4; fault_test.sh and friends: a scenario and its expected errors) with
//tests/parallel:mpirun.sh in its data and the "multiprocess" tag. mpi_gtest adds the gtest
binary (with mpi_gtest_main.cc); mpi_scenario_tests makes one test per
scenario of a driver.
"""

def mpi_sh_test(name, binary, args = [], script = "//tests/parallel:mpi_test.sh", size = "medium", tags = []):
    native.sh_test(
        name = name,
        size = size,
        srcs = [script],
        args = ["$(location %s)" % binary] + args,
        data = [
            binary,
            "//tests/parallel:mpirun.sh",
        ],
        tags = ["multiprocess"] + tags,
    )

def mpi_gtest(name, srcs, deps, args = [], size = "medium", tags = []):
    """cc_binary `name`_bin (gtest, one process per rank) and sh_test `name` running it at -np 2 and 4."""
    native.cc_binary(
        name = name + "_bin",
        testonly = 1,
        srcs = srcs + ["//tests/parallel:mpi_gtest_main.cc"],
        deps = deps + ["//third_party:gtest"],
    )
    mpi_sh_test(name = name, binary = ":%s_bin" % name, args = args, size = size, tags = tags)

def mpi_scenario_tests(name_format, binary, scenarios, script, size = "medium", tags = []):
    """One sh_test per scenario: `script` `binary` `scenario`, named name_format % scenario."""
    for scenario in scenarios:
        mpi_sh_test(
            name = name_format % scenario,
            binary = binary,
            args = [scenario],
            script = script,
            size = size,
            tags = tags,
        )
