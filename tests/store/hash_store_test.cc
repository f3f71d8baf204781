#include "store/hash_store.h"

#include <thread>

#include "gtest/gtest.h"
#include "store/prefix_store.h"

namespace ddpx {
namespace {

TEST(HashStore, GetBlocksUntilAnotherThreadSets) {
  HashStore store;
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_TRUE(store.set("k", "v").ok());
  });
  absl::StatusOr<std::string> v = store.get_string("k");
  setter.join();
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "v");
}

TEST(HashStore, TimeoutNamesMissingKeys) {
  HashStore store(std::chrono::milliseconds(30));
  ASSERT_TRUE(store.set("present", "1").ok());
  absl::Status s = store.wait({"present", "absent"});
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(s.message().find("absent"), std::string::npos) << s;
  EXPECT_EQ(s.message().find("present"), std::string::npos) << s;
  EXPECT_NE(s.message().find("30 ms"), std::string::npos) << s;
}

TEST(HashStore, AddCompareSetAppendDelete) {
  HashStore store;
  EXPECT_EQ(*store.add("c", 2), 2);
  EXPECT_EQ(*store.add("c", -5), -3);
  EXPECT_EQ(*store.get_string("c"), "-3");
  EXPECT_EQ(to_string(*store.compare_set("x", to_bytes("e"), to_bytes("d"))), "e");
  EXPECT_EQ(to_string(*store.compare_set("x", {}, to_bytes("d"))), "d");
  EXPECT_EQ(to_string(*store.compare_set("x", to_bytes("no"), to_bytes("z"))), "d");
  EXPECT_EQ(to_string(*store.compare_set("x", to_bytes("d"), to_bytes("z"))), "z");
  ASSERT_TRUE(store.append("a", to_bytes("he")).ok());
  ASSERT_TRUE(store.append("a", to_bytes("llo")).ok());
  EXPECT_EQ(*store.get_string("a"), "hello");
  EXPECT_EQ(*store.num_keys(), 3);
  EXPECT_TRUE(*store.delete_key("a"));
  EXPECT_FALSE(*store.delete_key("a"));
  EXPECT_FALSE(*store.check({"a"}));
}

TEST(PrefixStore, KeysAreNamespaced) {
  auto base = std::make_shared<HashStore>();
  PrefixStore a("a", base), b("b", base);
  ASSERT_TRUE(a.set("k", "1").ok());
  ASSERT_TRUE(b.set("k", "2").ok());
  EXPECT_EQ(*a.get_string("k"), "1");
  EXPECT_EQ(*b.get_string("k"), "2");
  EXPECT_EQ(*base->get_string("a/k"), "1");
}

}  // namespace
}  // namespace ddpx
