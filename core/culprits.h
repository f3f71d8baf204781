// Which peers a failed op is about, carried on its absl::Status as a payload,
// so that whoever reports the failure (the flight recorder, a test) can name
// them without parsing the text.
//
// Transports attach it where they know: the shared-memory path names the
// rank whose step never came, the Gloo TCP path the peers whose pairs still
// had a receive pending (no data arrived) or a send the peer never asked for.
//
//   absl::Status s = absl::DeadlineExceededError("...");
//   set_culprits(&s, {CulpritReason::kSilent, {3}});
//   culprits_of(s)->ranks  // {3}
#ifndef DDPX_CORE_CULPRITS_H_
#define DDPX_CORE_CULPRITS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace ddpx {

// Why the named peers are the ones to look at.
enum class CulpritReason {
  kSilent,    // no data / no step from them before the deadline
  kNotReceiving,  // this rank's data for them waited for a receive they never posted
  kExited,    // their process is gone or closed its connection
  kGaveUp,    // they failed themselves first (and named someone else)
  kMismatch,  // they run another op (other op, size or root)
};

inline const char* culprit_reason_name(CulpritReason r) {
  switch (r) {
    case CulpritReason::kSilent: return "silent";
    case CulpritReason::kNotReceiving: return "not_receiving";
    case CulpritReason::kExited: return "exited";
    case CulpritReason::kGaveUp: return "gave_up";
    case CulpritReason::kMismatch: return "mismatch";
  }
  return "silent";
}

struct Culprits {
  CulpritReason reason = CulpritReason::kSilent;
  std::vector<int> ranks;  // group ranks, ascending
};

inline constexpr char kCulpritsPayload[] = "type.ddpx/culprits";

// Replaces any earlier culprits of `status` (which must not be OK).
inline void set_culprits(absl::Status* status, const Culprits& c) {
  if (status->ok() || c.ranks.empty()) return;
  status->SetPayload(kCulpritsPayload,
                     absl::Cord(absl::StrCat(culprit_reason_name(c.reason), ":",
                                             absl::StrJoin(c.ranks, ","))));
}

inline std::optional<Culprits> culprits_of(const absl::Status& status) {
  auto payload = status.GetPayload(kCulpritsPayload);  // absl::optional<absl::Cord>
  if (!payload.has_value()) return std::nullopt;
  const std::string text(*payload);
  const size_t colon = text.find(':');
  if (colon == std::string::npos) return std::nullopt;
  Culprits c;
  const std::string reason = text.substr(0, colon);
  for (CulpritReason r : {CulpritReason::kSilent, CulpritReason::kNotReceiving, CulpritReason::kExited,
                          CulpritReason::kGaveUp, CulpritReason::kMismatch}) {
    if (reason == culprit_reason_name(r)) c.reason = r;
  }
  for (absl::string_view part : absl::StrSplit(text.substr(colon + 1), ',', absl::SkipEmpty())) {
    int rank = 0;
    if (absl::SimpleAtoi(part, &rank)) c.ranks.push_back(rank);
  }
  if (c.ranks.empty()) return std::nullopt;
  return c;
}

}  // namespace ddpx

#endif  // DDPX_CORE_CULPRITS_H_
