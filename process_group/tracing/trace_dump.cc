#include "process_group/tracing/trace_dump.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace ddpx {
namespace {

int64_t clock_ns(clockid_t clock) {
  timespec ts;
  clock_gettime(clock, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "";
  return buf;
}

const char* reduce_op_text(int8_t op) {
  return op < 0 ? "" : reduce_op_name(static_cast<ReduceOp>(op));
}

void append_op(std::string* out, const TraceEntry& e) {
  std::vector<std::string> dtypes, numel;
  const int shown = std::min<int>(e.args.ntensors, TraceOp::kMaxTensors);
  for (int i = 0; i < shown; ++i) {
    dtypes.push_back(json_string(dtype_name(e.args.dtypes[i])));
    numel.push_back(absl::StrCat(e.args.numel[i]));
  }
  absl::StrAppend(out, "{\"type\":\"op\",\"id\":", e.id, ",\"group\":", e.group,
                  ",\"seq\":", e.seq, ",\"p2p\":", e.p2p ? "true" : "false",
                  ",\"op\":", json_string(op_type_name(e.op)),
                  ",\"state\":", json_string(trace_state_name(e.state)),
                  ",\"ntensors\":", e.args.ntensors, ",\"dtypes\":[", absl::StrJoin(dtypes, ","),
                  "],\"numel\":[", absl::StrJoin(numel, ","), "],\"total_numel\":",
                  e.args.total_numel, ",\"root\":", e.args.root, ",\"peer\":", e.args.peer,
                  ",\"tag\":", e.args.tag, ",\"reduce_op\":", json_string(reduce_op_text(e.args.reduce_op)),
                  ",\"timeout_ms\":", e.timeout_ms, ",\"site\":", json_string(e.site),
                  ",\"bucket\":", e.site_bucket, ",\"step\":", e.site_step,
                  ",\"enqueued_ns\":", e.enqueued_ns, ",\"started_ns\":", e.started_ns,
                  ",\"ended_ns\":", e.ended_ns, "}\n");
}

}  // namespace

std::string json_string(absl::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += absl::StrFormat("\\u%04x", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
  return out;
}

std::string format_dump(const FlightRecorder::Snapshot& s, const DumpInfo& info) {
  std::string out;
  out.reserve(512 + s.entries.size() * 420);
  const int64_t realtime = clock_ns(CLOCK_REALTIME);
  const int64_t monotonic = clock_ns(CLOCK_MONOTONIC);
  absl::StrAppend(&out, "{\"type\":\"header\",\"format\":\"ddpx-flight-recorder\",\"version\":",
                  kDumpFormatVersion, ",\"reason\":", json_string(info.reason),
                  ",\"host\":", json_string(host_name()), ",\"pid\":", getpid(),
                  ",\"rank\":", info.rank, ",\"world_size\":", info.world_size,
                  ",\"time_realtime_ns\":", realtime, ",\"time_monotonic_ns\":", monotonic,
                  ",\"capacity\":", s.capacity, ",\"recorded\":", s.recorded,
                  ",\"entries\":", s.entries.size(), "}\n");
  for (const TraceGroupInfo& g : s.groups) {
    absl::StrAppend(&out, "{\"type\":\"group\",\"group\":", g.index, ",\"name\":", json_string(g.name),
                    ",\"rank\":", g.rank, ",\"size\":", g.size, ",\"ranks\":[",
                    absl::StrJoin(g.ranks, ","), "],\"backend\":", json_string(g.backend),
                    ",\"alive\":", g.alive ? "true" : "false", ",\"next_seq\":", g.next_seq,
                    ",\"next_p2p_seq\":", g.next_p2p_seq, "}\n");
  }
  for (const TraceEntry& e : s.entries) append_op(&out, e);
  for (const TraceError& e : s.errors) {
    std::vector<std::string> states;
    for (const std::string& line : e.peer_states) states.push_back(json_string(line));
    absl::StrAppend(&out, "{\"type\":\"error\",\"id\":", e.id, ",\"group\":", e.group,
                    ",\"seq\":", e.seq, ",\"op\":", json_string(op_type_name(e.op)),
                    ",\"message\":", json_string(e.message), ",\"culprit_reason\":",
                    json_string(e.culprits.has_value() ? culprit_reason_name(e.culprits->reason) : ""),
                    ",\"culprits\":[",
                    e.culprits.has_value() ? absl::StrJoin(e.culprits->ranks, ",") : "",
                    "],\"peer_states\":[", absl::StrJoin(states, ","), "]}\n");
  }
  absl::StrAppend(&out, "{\"type\":\"end\",\"ops\":", s.entries.size(), ",\"groups\":",
                  s.groups.size(), ",\"errors\":", s.errors.size(), "}\n");
  return out;
}

absl::Status write_file_atomically(const std::string& path, const std::string& contents) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  const std::string tmp = absl::StrCat(dir, "/.", name, ".", getpid(), ".tmp");
  auto fail = [&](const std::string& what, int err) {
    unlink(tmp.c_str());
    return absl::UnavailableError(absl::StrCat("cannot ", what, ": ", strerror(err)));
  };
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("cannot create ", tmp, ": ", strerror(errno)));
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;
      close(fd);
      return fail("write " + tmp, err);
    }
    done += static_cast<size_t>(n);
  }
  if (fdatasync(fd) != 0 && errno != EINVAL && errno != EROFS) {
    const int err = errno;
    close(fd);
    return fail("write " + tmp, err);
  }
  if (close(fd) != 0) return fail("write " + tmp, errno);
  if (rename(tmp.c_str(), path.c_str()) != 0) return fail("rename " + tmp + " to " + path, errno);
  return absl::OkStatus();
}

}  // namespace ddpx
