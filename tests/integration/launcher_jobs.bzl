"""2-rank training jobs started through a launcher (torchrun, srun), for each trainer."""

# Arguments after the trainer: steps, minimum test accuracy in %, flags.
# The MLP: 200 steps of 2 ranks x 32, above 70%.
MLP_TRAIN_JOB_ARGS = [
    "200",
    "70",
    "--hidden=128",
    "--batch_size=32",
    "--log_every=100",
]

# The libtorch trainer: 16 steps (two epochs of 256 images over 2 ranks x
# 16), width 4, one thread per rank; better than chance (10%) on the test
# set.
TORCH_TRAIN_JOB_ARGS = [
    "16",
    "20",
    "--width=4",
    "--batch_size=16",
    "--train_limit=256",
    "--epochs=2",
    "--threads=1",
    "--log_every=1000",
    "--timeout_s=60",
]

def two_rank_job_tests(launcher, tags = []):
    """<launcher>_train_test and <launcher>_torch_train_test.

    Each runs <launcher>_train_test.sh with its trainer (//examples:train,
    //examples/torch:train) and that trainer's arguments above.
    """
    for name, trainer, size, job_args in [
        (launcher + "_train_test", "//examples:train", "medium", MLP_TRAIN_JOB_ARGS),
        # large: the test-set evaluation of the CNN under ASan, as
        # torch_train_test.
        (launcher + "_torch_train_test", "//examples/torch:train", "large", TORCH_TRAIN_JOB_ARGS),
    ]:
        native.sh_test(
            name = name,
            size = size,
            srcs = [launcher + "_train_test.sh"],
            args = ["$(location %s)" % trainer] + job_args,
            data = [
                "two_rank_job.sh",
                trainer,
            ],
            tags = tags,
        )
