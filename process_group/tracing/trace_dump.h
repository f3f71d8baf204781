// The flight recorder's dump: JSON lines, one file per rank, written
// atomically (a temporary file in the same folder, then a rename).
//
//   {"type":"header","format":"ddpx-flight-recorder","version":1,"reason":"...",
//    "host":"node3","pid":4242,"rank":2,"world_size":4,
//    "time_realtime_ns":...,"time_monotonic_ns":...,"capacity":2000,"recorded":1234,...}
//   {"type":"group","group":0,"name":"default_pg","rank":2,"size":4,"ranks":[0,1,2,3],...}
//   {"type":"op","id":1201,"group":0,"seq":1200,"op":"allreduce","state":"completed",
//    "dtypes":["float32"],"numel":[8],"total_numel":8,"root":-1,"peer":-1,...,
//    "site":"ddp:allreduce","bucket":0,"step":37,"enqueued_ns":...,"started_ns":...,"ended_ns":...}
//   {"type":"error","id":1234,"group":0,"seq":1233,"op":"allreduce","message":"...",
//    "culprit_reason":"silent","culprits":[3],"peer_states":["rank 3: ..."]}
//   {"type":"end","ops":...,"groups":...,"errors":...}
//
// Times are CLOCK_MONOTONIC nanoseconds (0: not happened); the header's
// time_realtime_ns and time_monotonic_ns were read together, so a reader
// turns them into wall-clock time. A file without its "end" line was cut
// short. tools/trace_analyze reads every rank's file.
#ifndef DDPX_PROCESS_GROUP_TRACING_TRACE_DUMP_H_
#define DDPX_PROCESS_GROUP_TRACING_TRACE_DUMP_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "process_group/tracing/flight_recorder.h"

namespace ddpx {

struct DumpInfo {
  std::string reason;  // "SIGUSR1", "allreduce #12 of group default_pg failed", ...
  int rank = -1;       // in the default group, -1 if unknown
  int world_size = -1;
};

inline constexpr int kDumpFormatVersion = 1;

std::string format_dump(const FlightRecorder::Snapshot& snapshot, const DumpInfo& info);

// `contents` to `path`, through `path`'s folder's ".<name>.<pid>.tmp" and a
// rename: readers see the old file or the whole new one. The error names
// the path and the system's reason (a full disk among them); nothing is
// left behind on failure.
absl::Status write_file_atomically(const std::string& path, const std::string& contents);

// A JSON string literal.
std::string json_string(absl::string_view text);

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_TRACING_TRACE_DUMP_H_
