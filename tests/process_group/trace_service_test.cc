// The flight recorder's dumps (format, atomic writes, a full disk) and the
// trace service: dumps on request, on SIGUSR1, through the store, and the
// peer-state exchange behind failure messages.
#include "process_group/tracing/trace_service.h"

#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "process_group/tracing/trace_dump.h"
#include "store/hash_store.h"
#include "store/prefix_store.h"

namespace ddpx {
namespace {

using Clock = std::chrono::steady_clock;

std::string fresh_dir(const std::string& name) {
  const char* tmp = getenv("TEST_TMPDIR");
  std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/" + name;
  mkdir(dir.c_str(), 0755);
  return dir;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> files_in(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") out.push_back(name);
    }
    closedir(d);
  }
  return out;
}

bool wait_for(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  const auto end = Clock::now() + limit;
  while (!done()) {
    if (Clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

TEST(TraceDump, FormatHasHeaderGroupsOpsErrorsAndEnd) {
  FlightRecorder rec(8);
  auto store = std::make_shared<PrefixStore>("default_pg", std::make_shared<HashStore>());
  auto g = rec.attach_group(store, nullptr, 2, 4, "gloo");
  rec.set_group_ranks(g->index(), {0, 1, 2, 3});
  TraceOp args;
  args.add(Tensor::zeros({8}, DType::kFloat16));
  args.reduce_op = static_cast<int8_t>(ReduceOp::SUM);
  {
    TraceSite site("a \"quoted\"\nsite", 1, 7);
    TraceHandle h = rec.record(*g, OpType::kAllreduce, args, std::chrono::seconds(3));
    rec.started(h);
    absl::Status e = absl::DeadlineExceededError("boom");
    set_culprits(&e, {CulpritReason::kSilent, {3}});
    rec.failed(h, e).IgnoreError();
  }
  const std::string text = format_dump(rec.snapshot(), {"test \\ reason", 2, 4});
  std::vector<std::string> lines = absl::StrSplit(text, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 5u) << text;
  EXPECT_TRUE(absl::StartsWith(lines[0], "{\"type\":\"header\",\"format\":\"ddpx-flight-recorder\","
                                         "\"version\":1,\"reason\":\"test \\\\ reason\","))
      << lines[0];
  EXPECT_NE(lines[0].find("\"rank\":2,\"world_size\":4,"), std::string::npos);
  EXPECT_NE(lines[0].find("\"time_realtime_ns\":"), std::string::npos);
  EXPECT_NE(lines[0].find("\"capacity\":8,\"recorded\":1,\"entries\":1}"), std::string::npos);
  EXPECT_EQ(lines[1],
            "{\"type\":\"group\",\"group\":0,\"name\":\"default_pg\",\"rank\":2,\"size\":4,"
            "\"ranks\":[0,1,2,3],\"backend\":\"gloo\",\"alive\":true,\"next_seq\":1,"
            "\"next_p2p_seq\":0}");
  EXPECT_TRUE(absl::StartsWith(
      lines[2],
      "{\"type\":\"op\",\"id\":1,\"group\":0,\"seq\":0,\"p2p\":false,\"op\":\"allreduce\","
      "\"state\":\"failed\",\"ntensors\":1,\"dtypes\":[\"float16\"],\"numel\":[8],"
      "\"total_numel\":8,\"root\":-1,\"peer\":-1,\"tag\":0,\"reduce_op\":\"SUM\","
      "\"timeout_ms\":3000,\"site\":\"a \\\"quoted\\\"\\nsite\",\"bucket\":1,\"step\":7,"))
      << lines[2];
  EXPECT_TRUE(absl::StartsWith(lines[3],
                               "{\"type\":\"error\",\"id\":1,\"group\":0,\"seq\":0,"
                               "\"op\":\"allreduce\",\"message\":\"allreduce #0 of group "
                               "default_pg (rank 2 of 4) timed out after 3 s: no data from rank "
                               "3. boom\",\"culprit_reason\":\"silent\",\"culprits\":[3],"))
      << lines[3];
  EXPECT_EQ(lines[4], "{\"type\":\"end\",\"ops\":1,\"groups\":1,\"errors\":1}");
}

TEST(TraceDump, WritesAtomicallyAndReportsFailures) {
  const std::string dir = fresh_dir("atomic");
  const std::string path = dir + "/rank0.jsonl";
  ASSERT_TRUE(write_file_atomically(path, "first\n").ok());
  ASSERT_TRUE(write_file_atomically(path, "second\n").ok());
  EXPECT_EQ(read_file(path), "second\n");
  EXPECT_EQ(files_in(dir), std::vector<std::string>({"rank0.jsonl"}));

  absl::Status s = write_file_atomically(dir + "/no/such/folder/rank0.jsonl", "x");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no/such/folder"), std::string::npos) << s;
  EXPECT_NE(s.message().find("No such file or directory"), std::string::npos) << s;
}

TEST(TraceDump, FullDiskIsAnErrorNotACrashAndLeavesNothingBehind) {
  const std::string dir = fresh_dir("full");
  const std::string path = dir + "/rank0.jsonl";
  ASSERT_TRUE(write_file_atomically(path, "old dump\n").ok());
  // A file size limit stands in for a full disk: write() fails (EFBIG)
  // part way, as with ENOSPC.
  signal(SIGXFSZ, SIG_IGN);
  rlimit old;
  getrlimit(RLIMIT_FSIZE, &old);
  rlimit small = old;
  small.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  absl::Status s = write_file_atomically(path, std::string(100000, 'x'));
  setrlimit(RLIMIT_FSIZE, &old);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot write"), std::string::npos) << s;
  EXPECT_EQ(read_file(path), "old dump\n");  // the previous dump stays whole
  EXPECT_EQ(files_in(dir), std::vector<std::string>({"rank0.jsonl"}));
}

// The service is one per process; these tests run in order on it.
class TraceServiceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fresh_dir("service");
    world_ = std::make_shared<HashStore>();
    group_store_ = std::make_shared<PrefixStore>("default_pg", world_);
    TraceService::get().set_trace_dir(dir_);
    TraceService::get().attach_world(world_, 3, 4);
    group_ = FlightRecorder::get().attach_group(group_store_, nullptr, 3, 4, "gloo");
    TraceHandle h = FlightRecorder::get().record(*group_, OpType::kAllreduce, {},
                                                 std::chrono::seconds(2));
    FlightRecorder::get().started(h);
  }
  static std::string dump_text() { return read_file(dir_ + "/rank3.jsonl"); }

  static std::string dir_;
  static std::shared_ptr<Store> world_;
  static std::shared_ptr<Store> group_store_;
  static std::shared_ptr<TraceGroup> group_;
};
std::string TraceServiceTest::dir_;
std::shared_ptr<Store> TraceServiceTest::world_;
std::shared_ptr<Store> TraceServiceTest::group_store_;
std::shared_ptr<TraceGroup> TraceServiceTest::group_;

TEST_F(TraceServiceTest, DumpsOnRequest) {
  EXPECT_EQ(TraceService::get().dump_path(), dir_ + "/rank3.jsonl");
  ASSERT_TRUE(TraceService::get().dump("asked by the test", std::chrono::seconds(5)).ok());
  const std::string text = dump_text();
  EXPECT_NE(text.find("\"reason\":\"asked by the test\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"state\":\"started\""), std::string::npos) << text;
  EXPECT_NE(text.find("{\"type\":\"end\""), std::string::npos) << text;
}

TEST_F(TraceServiceTest, DumpsOnSigusr1) {
  unlink((dir_ + "/rank3.jsonl").c_str());
  ASSERT_EQ(raise(SIGUSR1), 0);  // the process lives on
  ASSERT_TRUE(wait_for([] { return dump_text().find("\"reason\":\"SIGUSR1\"") != std::string::npos; },
                       std::chrono::seconds(10)))
      << dump_text();
}

TEST_F(TraceServiceTest, DumpsAndAnswersWhenAPeerAsksThroughTheStore) {
  unlink((dir_ + "/rank3.jsonl").c_str());
  // Another rank's failure asks every rank to dump and to say what it does.
  absl::StatusOr<int64_t> n = world_->add(TraceService::kRequestKey, 1);
  ASSERT_TRUE(n.ok());
  ASSERT_TRUE(wait_for([] { return dump_text().find("through the store") != std::string::npos; },
                       std::chrono::seconds(10)))
      << dump_text();
  std::string state;
  ASSERT_TRUE(wait_for(
      [&] {
        absl::StatusOr<std::string> v =
            group_store_->get_string(std::string(TraceService::kStatePrefix) + "3",
                                     std::chrono::milliseconds(10));
        if (v.ok()) state = *v;
        return v.ok();
      },
      std::chrono::seconds(10)));
  EXPECT_EQ(state.rfind(absl::StrCat(*n, " in allreduce #0 for "), 0), 0u) << state;
}

TEST_F(TraceServiceTest, FailingOpLearnsWhatItsSilentPeersDo) {
  // Rank 1 answers requests (as its service would); rank 2 never does.
  int64_t seen = 0;
  if (*world_->check({TraceService::kRequestKey})) {
    absl::SimpleAtoi(*world_->get_string(TraceService::kRequestKey), &seen);
  }
  std::thread rank1([seen] {
    const auto end = Clock::now() + std::chrono::seconds(10);
    while (Clock::now() < end) {
      absl::StatusOr<std::string> now = world_->get_string(TraceService::kRequestKey);
      int64_t n = 0;
      if (now.ok() && absl::SimpleAtoi(*now, &n) && n > seen) {
        group_store_->set(std::string(TraceService::kStatePrefix) + "1",
                          absl::StrCat(n, " idle since allreduce #0 completed 2.5 s ago"))
            .IgnoreError();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  const auto start = Clock::now();
  std::vector<std::string> lines = TraceService::get().peer_states(
      FlightRecorder::get().group_info(group_->index()), {CulpritReason::kSilent, {1, 2}});
  const auto took = Clock::now() - start;
  rank1.join();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "rank 1: idle since allreduce #0 completed 2.5 s ago");
  EXPECT_EQ(lines[1], "rank 2: no answer within 1200 ms (stopped, hung or dead)");
  EXPECT_LT(took, TraceService::kPeerStateWait + std::chrono::milliseconds(700));
  // Exited peers are not waited for.
  lines = TraceService::get().peer_states(FlightRecorder::get().group_info(group_->index()),
                                          {CulpritReason::kExited, {0}});
  EXPECT_EQ(lines, std::vector<std::string>({"rank 0: exited"}));
}

TEST_F(TraceServiceTest, WithoutATraceDirNothingIsWritten) {
  TraceService::get().set_trace_dir("");
  absl::Status s = TraceService::get().dump("x", std::chrono::seconds(1));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("DDPX_TRACE_DIR"), std::string::npos) << s;
  TraceService::get().set_trace_dir(dir_ + "/cannot/be/made");
  s = TraceService::get().dump("x", std::chrono::seconds(5));
  EXPECT_FALSE(s.ok());  // reported, not thrown
  TraceService::get().set_trace_dir(dir_);
  TraceService::get().detach_world();
}

}  // namespace
}  // namespace ddpx
