// The store keys of an elastic job (docs/elastic.md, "Protocol"), in one
// place. All are under the job's store as ElasticOptions gives it.
#ifndef DDPX_ELASTIC_MEMBERSHIP_KEYS_H_
#define DDPX_ELASTIC_MEMBERSHIP_KEYS_H_

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"

namespace ddpx::elastic::keys {

inline constexpr char kNextId[] = "next_id";          // counter: member ids
inline constexpr char kGeneration[] = "generation";   // the last generation formed
inline constexpr char kPendingCount[] = "pending/n";  // counter: processes asking to join
inline constexpr char kFinished[] = "finished";       // the job ended (newcomers give up)

inline std::string member(int64_t id) { return absl::StrCat("member/", id); }  // "host:pid"
inline std::string pending(int64_t k) { return absl::StrCat("pending/", k); }  // a member id
// Set by a launcher when a process it started ended ("host:pid").
inline std::string gone(const std::string& host_pid) { return absl::StrCat("gone/", host_pid); }
inline std::string gen(int64_t g) { return absl::StrCat("gen/", g); }
inline std::string joined(int64_t g) { return gen(g) + "/joined"; }   // appended "id,"
inline std::string leader(int64_t g) { return gen(g) + "/leader"; }   // compare_set
inline std::string members(int64_t g) { return gen(g) + "/members"; }
inline std::string group_prefix(int64_t g) { return gen(g) + "/pg"; }
inline std::string votes(int64_t g, int64_t step) {
  return absl::StrCat(gen(g), "/step/", step, "/ok");
}
inline std::string decision(int64_t g, int64_t step) {
  return absl::StrCat(gen(g), "/step/", step, "/decision");
}

}  // namespace ddpx::elastic::keys

#endif  // DDPX_ELASTIC_MEMBERSHIP_KEYS_H_
