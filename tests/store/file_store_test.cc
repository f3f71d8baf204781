#include "store/file_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
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

// The store's file decides where ranks connect, so only a regular file of
// our own that nobody else may write is trusted.
TEST(FileStoreTrust, CreatesTheFileWithMode0600) {
  std::string path = temp_path("mode");
  const mode_t old_umask = umask(0);  // the mode must not rely on the umask
  auto store = FileStore::open(path);
  umask(old_umask);
  ASSERT_TRUE(store.ok()) << store.status();
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u) << std::oct << (st.st_mode & 07777);
}

TEST(FileStoreTrust, RefusesASymlinkNamingThePath) {
  std::string target = temp_path("symlink-target");
  std::string path = temp_path("symlink");
  ASSERT_TRUE(FileStore::open(target).ok());
  ASSERT_EQ(symlink(target.c_str(), path.c_str()), 0);
  auto store = FileStore::open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find(path), std::string::npos) << store.status();
  EXPECT_NE(store.status().message().find("symbolic link"), std::string::npos) << store.status();
  // A dangling link is refused too, and nothing is created at its target.
  std::string dangling = temp_path("dangling");
  std::string nowhere = temp_path("nowhere");
  ASSERT_EQ(symlink(nowhere.c_str(), dangling.c_str()), 0);
  auto d = FileStore::open(dangling);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("symbolic link"), std::string::npos) << d.status();
  EXPECT_NE(access(nowhere.c_str(), F_OK), 0) << "the link was followed";
}

TEST(FileStoreTrust, RefusesWhatIsNotARegularFile) {
  std::string fifo = temp_path("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto f = FileStore::open(fifo);
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find(fifo), std::string::npos) << f.status();
  EXPECT_NE(f.status().message().find("not a regular file"), std::string::npos) << f.status();

  const char* dir = std::getenv("TEST_TMPDIR");
  auto d = FileStore::open(dir ? dir : "/tmp");
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find(dir ? dir : "/tmp"), std::string::npos) << d.status();
}

TEST(FileStoreTrust, RefusesAFileOthersMayWriteAndKeepsOneOthersMayRead) {
  std::string path = temp_path("writable");
  {
    std::ofstream(path) << "";
  }
  ASSERT_EQ(chmod(path.c_str(), 0620), 0);
  auto group_writable = FileStore::open(path);
  ASSERT_FALSE(group_writable.ok());
  EXPECT_NE(group_writable.status().message().find(path), std::string::npos)
      << group_writable.status();
  EXPECT_NE(group_writable.status().message().find("writable by"), std::string::npos)
      << group_writable.status();
  ASSERT_EQ(chmod(path.c_str(), 0602), 0);
  EXPECT_FALSE(FileStore::open(path).ok());

  // Readable by others: nobody else can change what it says; accepted as is.
  ASSERT_EQ(chmod(path.c_str(), 0644), 0);
  auto readable = FileStore::open(path);
  ASSERT_TRUE(readable.ok()) << readable.status();
  ASSERT_TRUE((*readable)->set("k", "v").ok());
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u);
}

TEST(FileStoreTrust, RefusesAFileOwnedByAnotherUser) {
  if (geteuid() != 0) {
    GTEST_SKIP() << "needs root to give a file to another user (chown); not run as uid "
                 << geteuid();
  }
  std::string path = temp_path("foreign");
  {
    std::ofstream(path) << "";
  }
  ASSERT_EQ(chmod(path.c_str(), 0600), 0);
  if (chown(path.c_str(), 65534, 65534) != 0) {
    GTEST_SKIP() << "chown to uid 65534 failed here (" << std::strerror(errno)
                 << "): cannot make a file of another user";
  }
  auto store = FileStore::open(path);
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.status().message().find(path), std::string::npos) << store.status();
  EXPECT_NE(store.status().message().find("owned by uid 65534"), std::string::npos)
      << store.status();
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
