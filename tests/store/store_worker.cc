// A rank of a multi-process store test: run as a real process by
// tcp_store_multiprocess_test and file_store_test.
//
//   --mode=rendezvous: count in, publish "rank/<r>", wait for every rank,
//     read and check everyone's value; exit 0 when all is right.
//   --mode=wait_forever: print "waiting", then block on a key nobody sets;
//     print the error it ends with and exit 3.
#include <cstdio>
#include <memory>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "store/file_store.h"
#include "store/tcp_store.h"

ABSL_FLAG(std::string, host, "127.0.0.1", "TCPStore server host");
ABSL_FLAG(int, port, 0, "TCPStore server port");
ABSL_FLAG(std::string, file, "", "use a FileStore at this path instead");
ABSL_FLAG(int, rank, 0, "this process's rank");
ABSL_FLAG(int, world, 1, "number of ranks");
ABSL_FLAG(std::string, mode, "rendezvous", "rendezvous | wait_forever");
ABSL_FLAG(int, timeout_ms, 20000, "store timeout");

namespace {

int fail(const std::string& what, const absl::Status& s) {
  std::printf("FAIL %s: %s\n", what.c_str(), s.ToString().c_str());
  std::fflush(stdout);
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int rank = absl::GetFlag(FLAGS_rank);
  const int world = absl::GetFlag(FLAGS_world);
  const auto timeout = std::chrono::milliseconds(absl::GetFlag(FLAGS_timeout_ms));

  std::unique_ptr<ddpx::Store> store;
  if (!absl::GetFlag(FLAGS_file).empty()) {
    auto fs = ddpx::FileStore::open(absl::GetFlag(FLAGS_file), timeout);
    if (!fs.ok()) return fail("open", fs.status());
    store = std::move(*fs);
  } else {
    ddpx::TCPStoreOptions options;
    options.port = static_cast<uint16_t>(absl::GetFlag(FLAGS_port));
    options.timeout = timeout;
    options.num_workers = world;
    auto tcp = ddpx::TCPStore::create(absl::GetFlag(FLAGS_host), options);
    if (!tcp.ok()) return fail("connect", tcp.status());
    store = std::move(*tcp);
  }

  if (absl::GetFlag(FLAGS_mode) == "wait_forever") {
    std::printf("waiting\n");
    std::fflush(stdout);
    absl::Status s = store->wait({"never-set"});
    std::printf("ended: %s\n", s.ToString().c_str());
    std::fflush(stdout);
    return 3;
  }

  auto arrived = store->add("arrived", 1);
  if (!arrived.ok()) return fail("add", arrived.status());
  absl::Status s = store->set(absl::StrCat("rank/", rank), absl::StrCat("value-", rank));
  if (!s.ok()) return fail("set", s);
  std::vector<std::string> keys;
  for (int r = 0; r < world; ++r) keys.push_back(absl::StrCat("rank/", r));
  s = store->wait(keys);
  if (!s.ok()) return fail("wait", s);
  auto values = store->multi_get(keys);
  if (!values.ok()) return fail("multi_get", values.status());
  for (int r = 0; r < world; ++r) {
    std::string want = absl::StrCat("value-", r);
    if (ddpx::to_string((*values)[r]) != want) {
      std::printf("FAIL rank/%d is '%s', want '%s'\n", r,
                  ddpx::to_string((*values)[r]).c_str(), want.c_str());
      return 1;
    }
  }
  auto total = store->add("arrived", 0);
  if (!total.ok()) return fail("add 0", total.status());
  if (*total != world) {
    std::printf("FAIL arrived=%lld, want %d\n", static_cast<long long>(*total), world);
    return 1;
  }
  // Tell the others this rank is done, so the last one standing can check.
  store->append("done", ddpx::to_bytes(absl::StrCat(rank, ";"))).IgnoreError();
  std::printf("OK rank %d\n", rank);
  return 0;
}
