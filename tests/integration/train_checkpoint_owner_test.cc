// A checkpoint folder belongs to one job at a time (issue 33 point 10):
// while job A runs (stopped mid-training, holding the folder), job B on the
// same --checkpoint_dir is refused naming job A and writes nothing; once A
// is killed with SIGKILL, job C takes the folder over and trains to the end.
#include <string>

#include "gtest/gtest.h"
#include "tests/integration/train_runner.h"

namespace ddpx::integration_test {
namespace {

// 5 steps per epoch, checkpoints at steps 2 and 4 (--max_steps).
std::string job(const std::string& id, const std::string& dir) {
  return std::string(kTrainBinary) +
         " --nproc=2 --hidden=16 --batch_size=8 --train_limit=80 --epochs=1 --max_steps=4"
         " --checkpoint_every=2 --log_every=1000 --timeout_s=60 --job_id=" + id +
         " --checkpoint_dir=" + dir;
}

TEST(TrainCheckpointOwnerTest, ASecondJobIsRefusedNamingTheFirstAndADeadOwnerIsTakenOver) {
  const std::string root = fresh_dir("owner");
  const std::string dir = root + "/ckpt";
  // Job A stops as its rank 0 begins the checkpoint of step 2: it has
  // taken the folder, and its `latest` is not written yet.
  const pid_t a = start_stopped_at(job("jobA", dir), "2:0:begin:" + root + "/a_stopped",
                                   root + "/a_stopped", root + "/a.log");
  ASSERT_GT(a, 0) << read_file(root + "/a.log");

  RunResult b = run_command(job("jobB", dir));
  EXPECT_EQ(b.exit_code, 1) << b.output;
  EXPECT_NE(b.output.find("checkpoint folder " + dir + " belongs to another running job: job "
                          "'jobA' host "),
            std::string::npos)
      << b.output;
  EXPECT_NE(b.output.find(" holds " + dir + "/LOCK"), std::string::npos) << b.output;
  EXPECT_EQ(b.output.find("done:"), std::string::npos) << b.output;
  EXPECT_EQ(run_command("ls " + dir).output, "LOCK\n");  // B wrote no step and no `latest`

  kill_job(a);
  RunResult c = run_command(job("jobC", dir));
  EXPECT_EQ(c.exit_code, 0) << c.output;
  EXPECT_NE(c.output.find(dir + "/LOCK: taking the checkpoint folder over from job 'jobA' host "),
            std::string::npos)
      << c.output;
  EXPECT_NE(c.output.find("done: 4 steps"), std::string::npos) << c.output;
  EXPECT_EQ(read_file(dir + "/latest"), "step-00000004\n");
  EXPECT_EQ(read_file(dir + "/LOCK").find("job 'jobC' host "), 0u) << read_file(dir + "/LOCK");
}

}  // namespace
}  // namespace ddpx::integration_test
