// Per-call timeouts: get(key, timeout), multi_get(keys, timeout) and
// wait(keys, timeout) bound that one call, never read or change the store's
// default, and PrefixStore forwards them. Checked for every Store
// implementation over its real medium (memory, a file, TCP sockets).
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <functional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "store/file_store.h"
#include "store/hash_store.h"
#include "store/prefix_store.h"
#include "store/tcp_store.h"

namespace ddpx {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr milliseconds kDefault{60000};

struct Kind {
  const char* name;
  std::function<std::shared_ptr<Store>()> make;  // default timeout kDefault
  // False for TCPStore: one handle serializes its exchanges (one socket), so
  // a thread's long wait holds back the others; threads use clone() there.
  bool concurrent_waits;
};

std::shared_ptr<Store> make_hash() { return std::make_shared<HashStore>(kDefault); }

std::shared_ptr<Store> make_file() {
  std::string path = ::testing::TempDir() + "/per_call_timeout_XXXXXX";
  int fd = mkstemp(path.data());
  EXPECT_GE(fd, 0);
  close(fd);
  auto store = FileStore::open(path, kDefault);
  EXPECT_TRUE(store.ok()) << store.status();
  return std::shared_ptr<Store>(std::move(*store));
}

std::shared_ptr<Store> make_tcp() {
  TCPStoreOptions options;
  options.port = 0;
  options.is_master = true;
  options.timeout = kDefault;
  auto store = TCPStore::create("127.0.0.1", options);
  EXPECT_TRUE(store.ok()) << store.status();
  return std::shared_ptr<Store>(std::move(*store));
}

class PerCallTimeout : public ::testing::TestWithParam<Kind> {
 protected:
  void SetUp() override { store_ = GetParam().make(); ASSERT_NE(store_, nullptr); }
  std::shared_ptr<Store> store_;
};

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// A missing key fails after this call's timeout (not the 60 s default), the
// error names the key and that timeout, and the default is left alone.
void expect_times_out_after(const std::function<absl::Status()>& call, milliseconds timeout,
                            const std::string& key) {
  const Clock::time_point start = Clock::now();
  absl::Status s = call();
  const double took = ms_since(start);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_NE(s.message().find(key), std::string::npos) << s;
  EXPECT_NE(s.message().find(absl::StrCat(timeout.count(), " ms")), std::string::npos) << s;
  EXPECT_GE(took, timeout.count() * 0.9);
  EXPECT_LT(took, timeout.count() + 5000.0);  // far below the 60 s default
}

TEST_P(PerCallTimeout, EachBlockingCallHonoursItsOwnTimeout) {
  expect_times_out_after([&] { return store_->get("absent", milliseconds(120)).status(); },
                         milliseconds(120), "absent");
  expect_times_out_after(
      [&] { return store_->multi_get({"absent2"}, milliseconds(80)).status(); },
      milliseconds(80), "absent2");
  expect_times_out_after([&] { return store_->wait({"absent3"}, milliseconds(60)); },
                         milliseconds(60), "absent3");
  expect_times_out_after(
      [&] { return store_->get_string("absent4", milliseconds(70)).status(); },
      milliseconds(70), "absent4");
  EXPECT_EQ(store_->timeout(), kDefault);

  // The same handle still works, and a present key needs no waiting.
  ASSERT_TRUE(store_->set("here", "v").ok());
  auto v = store_->get_string("here", milliseconds(50));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "v");
}

TEST_P(PerCallTimeout, PrefixStoreForwardsTimeoutWithoutTouchingTheUnderlyingDefault) {
  PrefixStore short_wait("job", store_);
  short_wait.set_timeout(milliseconds(90));
  expect_times_out_after([&] { return short_wait.get("absent").status(); },
                         milliseconds(90), "absent");
  expect_times_out_after([&] { return short_wait.multi_get({"a", "b"}).status(); },
                         milliseconds(90), "job/a");
  expect_times_out_after([&] { return short_wait.get("x", milliseconds(40)).status(); },
                         milliseconds(40), "job/x");
  EXPECT_EQ(store_->timeout(), kDefault);
  EXPECT_EQ(short_wait.timeout(), milliseconds(90));
}

// The bug this API replaced: PrefixStore::get set the shared store's default
// timeout before calling it, so a PrefixStore with a short timeout made
// another thread's long get on the same store give up early.
TEST_P(PerCallTimeout, ThreadsWithDifferentTimeoutsDoNotDisturbEachOther) {
  if (!GetParam().concurrent_waits) {
    GTEST_SKIP() << GetParam().name << ": one handle runs one exchange at a time; "
                 << "threads use clone()";
  }
  PrefixStore impatient("job", store_);
  impatient.set_timeout(milliseconds(20));
  PrefixStore patient("job", store_);
  patient.set_timeout(milliseconds(20000));

  std::atomic<bool> patient_done{false};
  std::atomic<int> short_timeouts{0};
  std::thread hurry([&] {
    // Keeps timing out quickly for as long as the patient thread waits.
    while (!patient_done.load()) {
      absl::Status s = impatient.get("never").status();
      EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
      EXPECT_NE(s.message().find("20 ms"), std::string::npos) << s;
      short_timeouts.fetch_add(1);
      absl::Status w = store_->wait({"job/never"}, milliseconds(15));
      EXPECT_EQ(w.code(), absl::StatusCode::kDeadlineExceeded) << w;
    }
  });
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(600));
    ASSERT_TRUE(store_->set("job/late", "1").ok());
    std::this_thread::sleep_for(milliseconds(300));
    ASSERT_TRUE(store_->set("job/later", "2").ok());
  });
  // Both outlive many of the other thread's 20 ms timeouts.
  absl::StatusOr<std::string> late = patient.get_string("late");
  auto later = patient.multi_get({"later", "late"});
  patient_done.store(true);
  setter.join();
  hurry.join();
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(*late, "1");
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_EQ(to_string((*later)[0]), "2");
  EXPECT_GE(short_timeouts.load(), 5);
  EXPECT_EQ(store_->timeout(), kDefault);
}

// TCPStore's threads each take their own clone; the server serves their
// waits side by side.
TEST(PerCallTimeoutTCP, ClonesWaitSideBySideWithDifferentTimeouts) {
  std::shared_ptr<Store> master = make_tcp();
  ASSERT_NE(master, nullptr);
  auto a = master->clone();
  auto b = master->clone();
  ASSERT_TRUE(a.ok() && b.ok());
  std::thread hurry([&] {
    for (int i = 0; i < 5; ++i) {
      const Clock::time_point start = Clock::now();
      absl::Status s = (*a)->get("never", milliseconds(30)).status();
      EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
      EXPECT_LT(ms_since(start), 2000.0);
    }
  });
  std::thread setter([&] {
    std::this_thread::sleep_for(milliseconds(400));
    ASSERT_TRUE(master->set("late", "1").ok());
  });
  auto late = (*b)->get_string("late", milliseconds(20000));
  setter.join();
  hurry.join();
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(*late, "1");
}

INSTANTIATE_TEST_SUITE_P(
    Stores, PerCallTimeout,
    ::testing::Values(Kind{"HashStore", make_hash, true}, Kind{"FileStore", make_file, true},
                      Kind{"TCPStore", make_tcp, false}),
    [](const ::testing::TestParamInfo<Kind>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace ddpx
