// A rank maps only segments that its own user made and nobody else may
// access (segment.h, trust): whoever can write the rendezvous store can name
// any segment to the ranks, and one another local user made (or could
// write) is refused with an error naming it and what is wrong, never mapped.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "process_group/shm/layout.h"
#include "process_group/shm/segment.h"
#include "process_group/shm/shm_group.h"
#include "store/hash_store.h"

namespace ddpx {
namespace shm {
namespace {

constexpr uid_t kNobody = 65534;

std::string path_of(const std::string& name) { return absl::StrCat(kShmDirectory, "/", name); }

std::string unique_name(const std::string& what) {
  static int counter = 0;
  return absl::StrCat(kSegmentPrefix, "trust-test-", what, ".", getpid(), ".", ++counter);
}

// How the test spoils a segment after making it: as another user would
// have left it.
enum class Spoil { kOpenToOthers, kOpenToGroup, kOtherOwner };

// false (with the reason in *why) where this process cannot do it.
bool spoil(const std::string& name, Spoil how, std::string* why) {
  const std::string path = path_of(name);
  switch (how) {
    case Spoil::kOpenToOthers:
      return chmod(path.c_str(), 0666) == 0;
    case Spoil::kOpenToGroup:
      return chmod(path.c_str(), 0620) == 0;
    case Spoil::kOtherOwner:
      if (chown(path.c_str(), kNobody, static_cast<gid_t>(-1)) != 0) {
        *why = absl::StrCat("cannot give a segment to uid 65534 (needs root, with that uid "
                            "mapped in its user namespace): ", strerror(errno));
        return false;
      }
      return true;
  }
  return false;
}

// What the refusal must say for each spoil.
const char* expected_reason(Spoil how) {
  switch (how) {
    case Spoil::kOpenToOthers: return "its mode is 0666, open to group or others";
    case Spoil::kOpenToGroup: return "its mode is 0620, open to group or others";
    case Spoil::kOtherOwner: return "it belongs to uid 65534, not to this process's user";
  }
  return "";
}

class SpoiledSegment : public ::testing::TestWithParam<Spoil> {};

TEST_P(SpoiledSegment, IsRefusedByOpenNamingItAndWhy) {
  const std::string name = unique_name("open");
  absl::StatusOr<Segment> made = Segment::create(name, 1 << 16);
  ASSERT_TRUE(made.ok()) << made.status();
  std::string why;
  if (!spoil(name, GetParam(), &why)) {
    GTEST_SKIP() << "SKIPPED LOUDLY: " << why << "; this refusal was NOT tested";
  }
  absl::StatusOr<Segment> opened = Segment::open(name, 1 << 16);
  ASSERT_FALSE(opened.ok()) << "a spoiled segment was mapped";
  EXPECT_EQ(opened.status().code(), absl::StatusCode::kPermissionDenied);
  const std::string m(opened.status().message());
  EXPECT_NE(m.find(path_of(name)), std::string::npos) << m;
  EXPECT_NE(m.find(expected_reason(GetParam())), std::string::npos) << m;
}

// The same segment unspoiled opens: the check refuses only what it should.
TEST(SegmentTrust, OwnUnsharedSegmentOpens) {
  const std::string name = unique_name("fine");
  absl::StatusOr<Segment> made = Segment::create(name, 1 << 16);
  ASSERT_TRUE(made.ok()) << made.status();
  struct stat st {};
  ASSERT_EQ(stat(path_of(name).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "segments are created 0600";
  absl::StatusOr<Segment> opened = Segment::open(name, 1 << 16);
  EXPECT_TRUE(opened.ok()) << opened.status();
}

// A rank set up for real (ShmGroup::create) whose peer's segment, named
// through the store, was left spoiled: the setup fails naming that segment
// and the reason, and maps nothing. The test plays the peer, making the
// segment exactly as a peer would (size and header), between the two steps.
TEST_P(SpoiledSegment, IsRefusedByAGroupSetUp) {
  HashStore store(std::chrono::seconds(5));
  const ShmOptions options{1, 2, kPage};
  const Layout layout{1, 2, kPage};
  const std::string prefix = absl::StrCat("trust/", getpid(), "/", static_cast<int>(GetParam()), "/");
  Segment peer;
  std::string peer_name, why;
  bool spoiled = true;
  int calls = 0;
  auto all_agree = [&](bool ok) {
    if (++calls == 1 && ok) {
      // Rank 0 created its segment and the token is on the store: the peer
      // (rank 1) makes its own.
      absl::StatusOr<Bytes> token = store.get(prefix + "shm/token");
      if (!token.ok()) return false;
      peer_name = absl::StrCat(kSegmentPrefix, std::string(token->begin(), token->end()), ".1");
      absl::StatusOr<Segment> made = Segment::create(peer_name, layout.total_bytes());
      if (!made.ok()) return false;
      peer = std::move(*made);
      auto* h = static_cast<SegmentHeader*>(peer.data());
      h->magic = kSegmentMagic;
      h->version = kLayoutVersion;
      h->rank = 1;
      h->world_size = 2;
      h->num_channels = layout.num_channels;
      h->num_slots = layout.num_slots;
      h->pid = static_cast<uint32_t>(getpid());
      h->slot_bytes = layout.slot_bytes;
      spoiled = spoil(peer_name, GetParam(), &why);
    }
    return ok;
  };
  absl::StatusOr<std::unique_ptr<ShmGroup>> group =
      ShmGroup::create(store, prefix, 0, 2, options, all_agree);
  if (!spoiled) GTEST_SKIP() << "SKIPPED LOUDLY: " << why << "; this refusal was NOT tested";
  ASSERT_FALSE(peer_name.empty()) << "the peer's segment was not made";
  ASSERT_FALSE(group.ok()) << "rank 0 mapped a spoiled segment of its peer";
  const std::string m(group.status().message());
  EXPECT_NE(m.find(path_of(peer_name)), std::string::npos) << m;
  EXPECT_NE(m.find(expected_reason(GetParam())), std::string::npos) << m;
}

std::string spoil_name(const ::testing::TestParamInfo<Spoil>& info) {
  const char* names[] = {"OpenToOthers", "OpenToGroup", "OtherOwner"};
  return names[static_cast<int>(info.param)];
}

INSTANTIATE_TEST_SUITE_P(Spoils, SpoiledSegment,
                         ::testing::Values(Spoil::kOpenToOthers, Spoil::kOpenToGroup,
                                           Spoil::kOtherOwner),
                         spoil_name);

}  // namespace
}  // namespace shm
}  // namespace ddpx
