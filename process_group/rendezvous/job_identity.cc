#include "process_group/rendezvous/job_identity.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ddpx {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kIdentityKey[] = "ddpx_job/identity";
constexpr char kSettingsKey[] = "ddpx_job/settings";
constexpr char kEventCountKey[] = "ddpx_job/events";
constexpr char kVerdictKey[] = "ddpx_job/verdict";
constexpr char kVerdictOk[] = "ok";

std::string rank_key(int rank) { return absl::StrCat("ddpx_job/rank", rank); }
std::string event_key(int64_t n) { return absl::StrCat("ddpx_job/event", n); }
// Set by a rank that read a failed verdict: rank 0 (whose process may host
// the store) waits for these before it returns, so its exit does not cut
// the verdict off on its way to the ranks.
std::string verdict_read_key(int rank) { return absl::StrCat("ddpx_job/verdict_read", rank); }
// How long rank 0 waits for those, at most.
constexpr std::chrono::milliseconds kVerdictReadWait(10000);


std::string quoted(const std::string& job_id) {
  return job_id.empty() ? std::string("(none)") : absl::StrCat("'", job_id, "'");
}

// ---- Settings on the store: "<len>:<name><len>:<value>" per pair ----------

std::string encode_settings(const JobSettings& settings) {
  std::string out;
  for (const auto& [name, value] : settings)
    absl::StrAppend(&out, name.size(), ":", name, value.size(), ":", value);
  return out;
}

std::optional<JobSettings> decode_settings(const std::string& text) {
  JobSettings out;
  size_t at = 0;
  auto field = [&](std::string* f) {
    const size_t colon = text.find(':', at);
    size_t len = 0;
    if (colon == std::string::npos || !absl::SimpleAtoi(text.substr(at, colon - at), &len) ||
        len > text.size() - colon - 1)
      return false;
    *f = text.substr(colon + 1, len);
    at = colon + 1 + len;
    return true;
  };
  while (at < text.size()) {
    std::string name, value;
    if (!field(&name) || !field(&value)) return std::nullopt;
    out.emplace_back(std::move(name), std::move(value));
  }
  return out;
}

std::string shown(const std::optional<std::string>& value) {
  if (!value.has_value()) return "(not stated)";
  return value->empty() ? "''" : *value;
}

std::optional<std::string> lookup(const JobSettings& settings, const std::string& name) {
  for (const auto& [n, v] : settings)
    if (n == name) return v;
  return std::nullopt;
}

// The first setting (in this rank's order, then rank 0's) whose values
// differ, as (name, rank 0's value, this rank's value); nullopt when they
// agree or either side states none.
struct SettingDifference {
  std::string name;
  std::optional<std::string> rank0_value;
  std::optional<std::string> rank_value;
};

std::optional<SettingDifference> first_difference(const JobSettings& rank0,
                                                  const JobSettings& mine) {
  if (rank0.empty() || mine.empty()) return std::nullopt;
  for (const auto& [name, value] : mine) {
    std::optional<std::string> theirs = lookup(rank0, name);
    if (theirs != value) return SettingDifference{name, theirs, value};
  }
  for (const auto& [name, value] : rank0)
    if (!lookup(mine, name).has_value()) return SettingDifference{name, value, std::nullopt};
  return std::nullopt;
}

std::string describe(const SettingDifference& d, const std::string& rank_words) {
  return absl::StrCat("setting '", d.name, "' differs: rank 0 has ", shown(d.rank0_value), ", ",
                      rank_words, " has ", shown(d.rank_value));
}

// A difference as an event's text: a side that does not state the setting
// has no pair.
std::string encode_difference(const SettingDifference& d) {
  JobSettings fields = {{"name", d.name}};
  if (d.rank0_value.has_value()) fields.emplace_back("rank0", *d.rank0_value);
  if (d.rank_value.has_value()) fields.emplace_back("rank", *d.rank_value);
  return encode_settings(fields);
}

SettingDifference decode_difference(const std::string& text) {
  const JobSettings fields = decode_settings(text).value_or(JobSettings{});
  return SettingDifference{lookup(fields, "name").value_or("?"), lookup(fields, "rank0"),
                           lookup(fields, "rank")};
}

// ---- Events: what a rank tells rank 0, "<rank> <kind>[ <text>]" -----------
//
// A counter numbers them, so rank 0 waits for the next one instead of
// polling a key per rank, and sees a problem as soon as it is posted.

constexpr char kJoined[] = "joined";        // claimed its rank, waits for the verdict
constexpr char kWorld[] = "world";          // text: the world size it was started with
constexpr char kDuplicate[] = "duplicate";  // its claim was the second of its rank
constexpr char kSettings[] = "settings";    // text: the difference (encode_settings)

absl::Status post_event(Store& store, int rank, const std::string& kind,
                        const std::string& text = "") {
  absl::StatusOr<int64_t> n = store.add(kEventCountKey, 1);
  if (!n.ok()) return n.status();
  return store.set(event_key(*n), to_bytes(absl::StrCat(rank, " ", kind, " ", text)));
}

struct Event {
  int rank = -1;
  std::string kind;
  std::string text;
};

std::optional<Event> parse_event(const std::string& s) {
  const size_t a = s.find(' ');
  if (a == std::string::npos) return std::nullopt;
  const size_t b = s.find(' ', a + 1);
  if (b == std::string::npos) return std::nullopt;
  Event e;
  if (!absl::SimpleAtoi(s.substr(0, a), &e.rank)) return std::nullopt;
  e.kind = s.substr(a + 1, b - a - 1);
  e.text = s.substr(b + 1);
  return e;
}

std::string duplicate_message(int rank, const std::string& job_id) {
  return absl::StrCat(
      "rank ", rank, " of job ", quoted(job_id),
      " has already joined this rendezvous store: another process was started as the same "
      "rank, another job with the same job id uses this port or file, or a file:// store is "
      "left from an earlier run (give a fresh path)");
}

// Each rank may join once: a second claim means two processes think they are
// this rank. The second claimant fails here and tells rank 0, whose verdict
// then stops the first.
absl::Status claim_rank(Store& store, int rank, const std::string& job_id) {
  absl::StatusOr<int64_t> claims = store.add(rank_key(rank), 1);
  if (!claims.ok()) return claims.status();
  if (*claims == 1) return absl::OkStatus();
  post_event(store, rank, kDuplicate).IgnoreError();  // this process fails either way
  return absl::AlreadyExistsError(duplicate_message(rank, job_id));
}

// Rank 0: reads events until every rank has joined (the verdict is "ok")
// or one is fatal (the verdict is why). Returns the verdict as a status.
absl::Status gather_ranks(Store& store, int world_size, const std::string& job_id,
                          std::chrono::milliseconds timeout) {
  const Clock::time_point deadline = Clock::now() + timeout;
  std::vector<bool> joined(static_cast<size_t>(world_size), false);
  joined[0] = true;
  int missing = world_size - 1;
  std::vector<std::string> refusals;  // settings refusals without a job id
  absl::Status verdict;
  for (int64_t k = 1; missing > 0 && verdict.ok(); ++k) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    absl::StatusOr<Bytes> got =
        store.get(event_key(k), std::max(left, std::chrono::milliseconds(1)));
    if (!got.ok()) {
      std::vector<int> absent;
      for (int r = 1; r < world_size; ++r)
        if (!joined[static_cast<size_t>(r)]) absent.push_back(r);
      std::string why = absl::StrCat("waiting for the ranks of job ", quoted(job_id), " to join: ",
                                     got.status().message(), "; not joined: rank ",
                                     absl::StrJoin(absent, ", "));
      for (const std::string& r : refusals) absl::StrAppend(&why, "; ", r);
      verdict = absl::Status(got.status().code(), why);
      break;
    }
    std::optional<Event> e = parse_event(to_string(*got));
    if (!e.has_value()) {
      verdict = absl::InvalidArgumentError(absl::StrCat(
          "rendezvous event '", to_string(*got), "' is malformed (a store of another program?)"));
    } else if (e->kind == kJoined) {
      if (e->rank > 0 && e->rank < world_size && !joined[static_cast<size_t>(e->rank)]) {
        joined[static_cast<size_t>(e->rank)] = true;
        --missing;
      }
    } else if (e->kind == kWorld) {
      verdict = absl::FailedPreconditionError(absl::StrCat(
          "world size mismatch: rank 0 was started with world size ", world_size, ", rank ",
          e->rank, " of job ", quoted(job_id), " with world size ", e->text));
    } else if (e->kind == kDuplicate) {
      verdict = absl::AlreadyExistsError(absl::StrCat(
          "rank ", e->rank, " of job ", quoted(job_id),
          " was claimed by a second process (another process was started as the same rank, or "
          "another job with the same job id uses this port or file): every rank of the job "
          "stops"));
    } else if (e->kind == kSettings) {
      const std::string what = describe(decode_difference(e->text), absl::StrCat("rank ", e->rank));
      if (job_id.empty()) {
        refusals.push_back(absl::StrCat("a process started as rank ", e->rank,
                                        " was refused: ", what));
      } else {
        verdict = absl::FailedPreconditionError(absl::StrCat(
            "settings mismatch in job ", quoted(job_id), ": ", what));
      }
    }
  }
  const std::string published = verdict.ok() ? kVerdictOk : std::string(verdict.message());
  if (absl::Status s = store.set(kVerdictKey, to_bytes(published)); !s.ok() && verdict.ok())
    return s;
  if (!verdict.ok()) {
    // Every rank claimed so far waits for the verdict, including one whose
    // "joined" event rank 0 has not read yet (it came after a fatal one).
    std::vector<std::string> readers;
    for (int r = 1; r < world_size; ++r) {
      absl::StatusOr<bool> claimed = store.check({rank_key(r)});
      if (joined[static_cast<size_t>(r)] || (claimed.ok() && *claimed))
        readers.push_back(verdict_read_key(r));
    }
    // Bounded and best effort: a rank that died meanwhile reads nothing.
    if (!readers.empty()) store.wait(readers, std::min(timeout, kVerdictReadWait)).IgnoreError();
  }
  return verdict;
}

absl::Status check_as_rank0(Store& store, int world_size, const std::string& job_id,
                            std::chrono::milliseconds timeout, const JobSettings& settings) {
  if (absl::Status s = claim_rank(store, 0, job_id); !s.ok()) return s;
  // The settings first: a rank that sees the identity finds them there.
  if (absl::Status s = store.set(kSettingsKey, to_bytes(encode_settings(settings))); !s.ok())
    return s;
  if (absl::Status s = store.set(kIdentityKey, to_bytes(absl::StrCat(world_size, " ", job_id)));
      !s.ok())
    return s;
  if (world_size == 1) return absl::OkStatus();
  return gather_ranks(store, world_size, job_id, timeout);
}

}  // namespace

absl::Status check_job_identity(Store& store, int rank, int world_size,
                                const std::string& job_id, std::chrono::milliseconds timeout,
                                const JobSettings& settings) {
  if (rank == 0) return check_as_rank0(store, world_size, job_id, timeout, settings);
  const Clock::time_point deadline = Clock::now() + timeout;
  absl::StatusOr<Bytes> got = store.get(kIdentityKey, timeout);
  if (!got.ok()) {
    return absl::Status(got.status().code(),
                        absl::StrCat("waiting for rank 0 to state the job's world size and id: ",
                                     got.status().message()));
  }
  const std::string theirs = to_string(*got);
  const size_t space = theirs.find(' ');
  int their_world = -1;
  if (space == std::string::npos || !absl::SimpleAtoi(theirs.substr(0, space), &their_world)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank 0's job identity on the store is '", theirs,
        "', not '<world size> <job id>' (a store of another program?)"));
  }
  const std::string their_job = theirs.substr(space + 1);
  if (their_job != job_id) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job id mismatch: rank ", rank, " belongs to job ", quoted(job_id),
        ", but rank 0 at this rendezvous belongs to job ", quoted(their_job),
        " (two jobs on one port or file?)"));
  }
  if (their_world != world_size) {
    post_event(store, rank, kWorld, std::to_string(world_size)).IgnoreError();
    return absl::FailedPreconditionError(absl::StrCat(
        "world size mismatch: rank ", rank, " was started with world size ", world_size,
        ", rank 0 of job ", quoted(job_id), " with world size ", their_world));
  }
  absl::StatusOr<Bytes> their_settings_text = store.get(kSettingsKey, timeout);
  if (!their_settings_text.ok()) return their_settings_text.status();
  std::optional<JobSettings> their_settings = decode_settings(to_string(*their_settings_text));
  if (!their_settings.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rank 0's settings on the store are malformed: '", to_string(*their_settings_text),
        "' (a store of another program?)"));
  }
  if (std::optional<SettingDifference> d = first_difference(*their_settings, settings)) {
    post_event(store, rank, kSettings, encode_difference(*d)).IgnoreError();
    return absl::FailedPreconditionError(absl::StrCat(
        describe(*d, absl::StrCat("this rank (", rank, ")")), " (refused at the rendezvous of job ",
        quoted(job_id), ": every rank of a job is started with the same settings, and two jobs "
        "on one port or file need distinct job ids)"));
  }
  if (absl::Status s = claim_rank(store, rank, job_id); !s.ok()) return s;
  if (absl::Status s = post_event(store, rank, kJoined); !s.ok()) return s;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  absl::StatusOr<Bytes> verdict =
      store.get(kVerdictKey, std::max(left, std::chrono::milliseconds(1)));
  if (!verdict.ok()) {
    return absl::Status(verdict.status().code(),
                        absl::StrCat("rank ", rank, " of job ", quoted(job_id),
                                     " joined; waiting for rank 0's verdict on the whole job: ",
                                     verdict.status().message()));
  }
  if (to_string(*verdict) == kVerdictOk) return absl::OkStatus();
  store.set(verdict_read_key(rank), to_bytes("")).IgnoreError();  // rank 0 may exit now
  return absl::FailedPreconditionError(absl::StrCat("rank 0 stopped job ", quoted(job_id),
                                                    " at rendezvous: ", to_string(*verdict)));
}

}  // namespace ddpx
