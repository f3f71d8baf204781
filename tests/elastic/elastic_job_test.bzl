"""elastic_job_test: a C++ test, `name` + ".cc", that runs examples/train
--elastic jobs through ElasticJob and checks what they leave behind
(job_checks); each job takes seconds, so the cases are spread over shards."""

load("@rules_cc//cc:defs.bzl", "cc_test")

def elastic_job_test(name, shard_count, deps = []):
    cc_test(
        name = name,
        size = "large",
        shard_count = shard_count,
        srcs = [name + ".cc"],
        data = ["//examples:train"],
        deps = [
            ":elastic_job",
            ":job_checks",
            "//tests:test_main",
            "@system//:gtest",
        ] + deps,
    )
