#include "store/file_store.h"

#include <cstdlib>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/store/subprocess.h"

namespace ddpx {
namespace {

using std::chrono::milliseconds;

std::string temp_path(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  std::string path = absl::StrCat(dir ? dir : "/tmp", "/", name, "-", getpid());
  std::remove(path.c_str());
  return path;
}

TEST(FileStore, EveryOperationSeenThroughTwoHandles) {
  std::string path = temp_path("ops");
  auto a = FileStore::open(path, milliseconds(2000));
  auto b = FileStore::open(path, milliseconds(2000));
  ASSERT_TRUE(a.ok() && b.ok());
  FileStore& x = **a;
  FileStore& y = **b;
  ASSERT_TRUE(x.set("k", "v").ok());
  EXPECT_EQ(*y.get_string("k"), "v");
  EXPECT_EQ(*x.add("n", 4), 4);
  EXPECT_EQ(*y.add("n", 3), 7);
  EXPECT_EQ(to_string(*y.compare_set("k", to_bytes("v"), to_bytes("w"))), "w");
  EXPECT_EQ(to_string(*x.compare_set("k", to_bytes("v"), to_bytes("z"))), "w");
  EXPECT_EQ(to_string(*x.compare_set("new", {}, to_bytes("d"))), "d");
  EXPECT_EQ(to_string(*x.compare_set("absent", to_bytes("e"), to_bytes("d"))), "e");
  EXPECT_TRUE(*y.check({"k", "n", "new"}));
  EXPECT_FALSE(*y.check({"k", "absent"}));
  EXPECT_EQ(*y.num_keys(), 3);
  EXPECT_TRUE(*x.delete_key("new"));
  EXPECT_FALSE(*y.delete_key("new"));
  EXPECT_EQ(*y.num_keys(), 2);
  ASSERT_TRUE(x.append("log", to_bytes("ab")).ok());
  ASSERT_TRUE(y.append("log", to_bytes("c")).ok());
  EXPECT_EQ(*x.get_string("log"), "abc");
  ASSERT_TRUE(x.multi_set({"m1", "m2"}, {to_bytes("1"), to_bytes("2")}).ok());
  auto values = y.multi_get({"m2", "m1"});
  ASSERT_TRUE(values.ok());
  EXPECT_EQ(to_string((*values)[0]), "2");
  EXPECT_EQ(to_string((*values)[1]), "1");
  EXPECT_EQ(*y.add("text", 0), 0);
  ASSERT_TRUE(x.set("text", "abc").ok());
  EXPECT_EQ(y.add("text", 1).status().code(), absl::StatusCode::kInvalidArgument);
  auto c = y.clone();
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*(*c)->get_string("k"), "w");
}

TEST(FileStore, GetWaitsForAnotherHandleAndTimeoutsNameKeys) {
  std::string path = temp_path("wait");
  auto a = FileStore::open(path, milliseconds(3000));
  ASSERT_TRUE(a.ok());
  std::thread setter([&] {
    auto b = FileStore::open(path);
    std::this_thread::sleep_for(milliseconds(50));
    ASSERT_TRUE((*b)->set("late", "yes").ok());
  });
  EXPECT_EQ(*(*a)->get_string("late"), "yes");
  setter.join();
  absl::Status s = (*a)->wait({"late", "missing"}, milliseconds(50));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(s.message().find("[missing]"), std::string::npos) << s;
}

TEST(FileStore, BadPathIsAClearError) {
  auto s = FileStore::open("/nonexistent-dir/x/store");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("/nonexistent-dir/x/store"), std::string::npos);
}

TEST(FileStore, FourProcessesRendezvousThroughOneFile) {
  std::string path = temp_path("procs");
  constexpr int kWorld = 4;
  std::vector<store_test::Subprocess> workers;
  for (int r = 0; r < kWorld; ++r) {
    auto w = store_test::Subprocess::spawn(
        {store_test::runfile("tests/store/store_worker"), "--file=" + path,
         absl::StrCat("--rank=", r), absl::StrCat("--world=", kWorld)});
    ASSERT_TRUE(w.ok()) << w.status();
    workers.push_back(std::move(*w));
  }
  for (int r = 0; r < kWorld; ++r) {
    auto code = workers[r].wait(milliseconds(30000));
    std::string out = workers[r].read_rest(milliseconds(100));
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_EQ(*code, 0) << out;
  }
  auto check = FileStore::open(path, milliseconds(1000));
  EXPECT_EQ(*(*check)->add("arrived", 0), kWorld);
  EXPECT_EQ((*check)->get_string("done")->size(), 8u);  // "0;1;2;3;" in some order
}

}  // namespace
}  // namespace ddpx
