// Backend names -> factories, and the "round_robin:<spec>" composition
// (declared in init.h).
#include <map>
#include <mutex>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "process_group/rendezvous/init.h"
#include "process_group/round_robin.h"
#include "store/prefix_store.h"

namespace ddpx {
namespace {

constexpr absl::string_view kRoundRobinPrefix = "round_robin:";
// More would only multiply connections and threads.
constexpr int kMaxRoundRobinBackends = 64;

struct Registry {
  std::mutex mu;
  std::map<std::string, BackendFactory> factories;
};

// Never destroyed: backends register from static initializers and may be
// looked up from anywhere until exit.
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

absl::StatusOr<BackendFactory> find_factory(const std::string& name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.factories.find(name);
  if (it != r.factories.end()) return it->second;
  if (name == "nccl") {
    return absl::FailedPreconditionError(
        "nccl backend not built: build with --config=cuda");
  }
  std::vector<std::string> known;
  for (const auto& kv : r.factories) known.push_back(kv.first);
  return absl::NotFoundError(absl::StrCat(
      "unknown backend '", name, "' (registered: ",
      known.empty() ? "none" : absl::StrJoin(known, ", "),
      "; compose with round_robin:<backend>*N)"));
}

// "gloo*2,nccl" -> {"gloo", "gloo", "nccl"}.
absl::StatusOr<std::vector<std::string>> expand_round_robin(absl::string_view list) {
  std::vector<std::string> names;
  for (absl::string_view item : absl::StrSplit(list, ',')) {
    item = absl::StripAsciiWhitespace(item);
    std::pair<absl::string_view, absl::string_view> parts =
        absl::StrSplit(item, absl::MaxSplits('*', 1));
    absl::string_view name = absl::StripAsciiWhitespace(parts.first);
    int count = 1;
    if (item.find('*') != absl::string_view::npos &&
        (!absl::SimpleAtoi(parts.second, &count) || count < 1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "backend 'round_robin:", list, "': '", item,
          "' needs a positive count after '*' (e.g. gloo*2)"));
    }
    if (name.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "backend 'round_robin:", list, "' names an empty backend"));
    }
    if (absl::StartsWith(name, kRoundRobinPrefix)) {
      return absl::InvalidArgumentError("round_robin backends cannot be nested");
    }
    for (int i = 0; i < count; ++i) names.emplace_back(name);
    if (static_cast<int>(names.size()) > kMaxRoundRobinBackends) {
      return absl::InvalidArgumentError(absl::StrCat(
          "backend 'round_robin:", list, "' composes more than ",
          kMaxRoundRobinBackends, " backends"));
    }
  }
  return names;
}

}  // namespace

void register_backend(const std::string& name, BackendFactory factory) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.factories[name] = std::move(factory);
}

absl::StatusOr<std::shared_ptr<Backend>> create_backend(
    const std::string& spec, std::shared_ptr<Store> store, int rank, int size,
    std::chrono::milliseconds timeout) {
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "backend '", spec, "': rank ", rank, " is out of range for world size ",
        size));
  }
  if (store == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("backend '", spec, "': no store"));
  }
  absl::string_view trimmed = absl::StripAsciiWhitespace(spec);
  if (!absl::ConsumePrefix(&trimmed, kRoundRobinPrefix)) {
    absl::StatusOr<BackendFactory> factory = find_factory(std::string(trimmed));
    if (!factory.ok()) return factory.status();
    return (*factory)(std::move(store), rank, size, timeout);
  }

  absl::StatusOr<std::vector<std::string>> names = expand_round_robin(trimmed);
  if (!names.ok()) return names.status();
  std::vector<std::shared_ptr<Backend>> backends;
  for (size_t i = 0; i < names->size(); ++i) {
    // Each member rendezvouses under its own prefix so their keys never mix.
    auto member_store = std::make_shared<PrefixStore>(
        absl::StrCat("round_robin_", i), store);
    absl::StatusOr<std::shared_ptr<Backend>> b =
        create_backend((*names)[i], member_store, rank, size, timeout);
    if (!b.ok()) {
      return absl::Status(b.status().code(),
                          absl::StrCat("round_robin member ", i, ": ",
                                       b.status().message()));
    }
    backends.push_back(*std::move(b));
  }
  absl::StatusOr<std::shared_ptr<RoundRobinBackend>> rr =
      RoundRobinBackend::create(std::move(backends));
  if (!rr.ok()) return rr.status();
  return std::shared_ptr<Backend>(*std::move(rr));
}

}  // namespace ddpx
