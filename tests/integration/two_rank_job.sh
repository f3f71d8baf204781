# Sourced by the tests that start a 2-rank training job through a launcher
# (torchrun_train_test.sh, slurm_train_test.sh), for either trainer.
# `expect_two_rank_job OUTPUT STEPS MIN_ACCURACY WHAT` passes (prints PASS)
# when OUTPUT shows a 2-rank job that finished STEPS steps with a final test
# accuracy above MIN_ACCURACY percent; else prints OUTPUT's verdict and
# exits 1.
expect_two_rank_job() {
  local out=$1 steps=$2 min_acc=$3 what=$4 acc
  grep -q "2 ranks x batch" <<<"$out" || { echo "FAIL: not a 2-rank job"; exit 1; }
  acc=$(sed -n "s/^done: $steps steps, test accuracy \([0-9.]*\)%.*/\1/p" <<<"$out")
  [ -n "$acc" ] || { echo "FAIL: no 'done: $steps steps' line with a test accuracy"; exit 1; }
  awk -v a="$acc" -v m="$min_acc" 'BEGIN { exit !(a > m) }' ||
    { echo "FAIL: accuracy $acc% <= $min_acc%"; exit 1; }
  echo "PASS: $what trained to $acc%"
}
