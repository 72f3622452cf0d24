"""One cc_test per *_test.cc file in a folder, all with the same deps."""

def weft_tests(srcs, deps = [], tags = [], data = [], size = "small", shard_count = None):
    for src in srcs:
        name = src[:-3]
        native.cc_test(
            name = name,
            srcs = [src],
            deps = deps + ["//third_party:gtest_main"],
            tags = tags,
            data = data,
            size = size,
            shard_count = shard_count,
        )
