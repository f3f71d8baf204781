#include "examples/trainer/metrics.h"

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace ddpx::trainer {

void JsonLine::key(const std::string& k) {
  if (!body_.empty()) body_ += ",";
  body_ += "\"" + k + "\":";
}

JsonLine& JsonLine::add(const std::string& k, double value) {
  key(k);
  if (!std::isfinite(value)) {
    body_ += "null";  // JSON has no NaN/Inf
  } else {
    char buf[32];
    snprintf(buf, sizeof(buf), "%.9g", value);
    body_ += buf;
  }
  return *this;
}

JsonLine& JsonLine::add(const std::string& k, int64_t value) {
  key(k);
  body_ += std::to_string(value);
  return *this;
}

JsonLine& JsonLine::add(const std::string& k, const std::string& value) {
  key(k);
  body_ += "\"";
  for (char c : value) {
    if (c == '"' || c == '\\') body_ += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    body_ += c;
  }
  body_ += "\"";
  return *this;
}

MetricsWriter::~MetricsWriter() {
  if (file_ != nullptr) fclose(file_);
}

absl::Status MetricsWriter::open(const std::string& path) {
  if (path.empty()) return absl::OkStatus();
  file_ = fopen(path.c_str(), "a");
  if (file_ == nullptr) {
    return absl::UnavailableError("--metrics_out " + path + ": cannot open: " + strerror(errno));
  }
  return absl::OkStatus();
}

void MetricsWriter::write(const JsonLine& line) {
  if (file_ == nullptr) return;
  fprintf(file_, "%s\n", line.str().c_str());
  fflush(file_);  // readable while the run goes on (plots, tail -f)
}

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  int u = 0;
  while (bytes >= 1000.0 && u < 4) bytes /= 1000.0, ++u;
  char buf[32];
  snprintf(buf, sizeof(buf), u == 0 ? "%.0f %s" : "%.3g %s", bytes, units[u]);
  return buf;
}

LiveLine::LiveLine() : tty_(isatty(STDOUT_FILENO) != 0) {}

void LiveLine::update(const std::string& text) {
  if (tty_) {
    printf("\r\033[K%s", text.c_str());
    open_ = true;
  } else {
    printf("%s\n", text.c_str());
  }
  fflush(stdout);
}

void LiveLine::finish() {
  if (open_) printf("\n");
  open_ = false;
  fflush(stdout);
}

JsonLine step_json(const StepReport& step) {
  return JsonLine()
      .add("type", std::string("step"))
      .add("epoch", step.epoch + 1)
      .add("step", step.global_step)
      .add("loss", step.loss)
      .add("step_time_s", step.step_time_s)
      .add("comm_wait_s", step.comm_wait_s)
      .add("samples_per_s", step.world_size * step.batch / step.step_time_s)
      .add("bytes_sent", static_cast<int64_t>(step.bytes_sent))
      .add("gradient_bytes", static_cast<int64_t>(step.gradient_bytes))
      .add("compression_ratio", step.compression_ratio)
      .add("lr", step.lr)
      .add("wall_s", step.wall_s);
}

JsonLine report_epoch(const EpochReport& e) {
  printf("epoch %lld%s: train loss %.4f | test loss %.4f | test accuracy %.2f%% | "
         "%.1f s | wall %.1f s\n",
         static_cast<long long>(e.epoch) + 1, e.stopped ? " (stopped at --max_steps)" : "",
         e.train_loss, e.test_loss, 100 * e.test_acc, e.epoch_time_s, e.wall_s);
  fflush(stdout);
  return JsonLine()
      .add("type", std::string("epoch"))
      .add("epoch", e.epoch + 1)
      .add("step", e.global_step)
      .add("complete", static_cast<int64_t>(!e.stopped))
      .add("train_loss", e.train_loss)
      .add("test_loss", e.test_loss)
      .add("test_acc", e.test_acc)
      .add("epoch_time_s", e.epoch_time_s)
      .add("wall_s", e.wall_s);
}

JsonLine report_membership(const MembershipReport& c) {
  const std::string members = absl::StrJoin(c.members, ",");
  const std::string left = absl::StrJoin(c.left, ",");
  const std::string joined = absl::StrJoin(c.joined, ",");
  printf("membership: generation %lld, %d ranks (members %s)%s%s, at step %lld, "
         "recovered in %.3f s, %lld step%s lost%s%s\n",
         (long long)c.generation, c.world_size, members.c_str(),
         left.empty() ? "" : ("; left: " + left).c_str(),
         joined.empty() ? "" : ("; joined: " + joined).c_str(), (long long)c.global_step,
         c.recovery_s, (long long)c.steps_lost, c.steps_lost == 1 ? "" : "s",
         c.cause.empty() ? "" : "; cause: ", c.cause.c_str());
  fflush(stdout);
  return JsonLine()
      .add("type", std::string("membership"))
      .add("generation", c.generation)
      .add("world_size", static_cast<int64_t>(c.world_size))
      .add("members", members)
      .add("left", left)
      .add("joined", joined)
      .add("step", c.global_step)
      .add("recovery_s", c.recovery_s)
      .add("steps_lost", c.steps_lost)
      .add("cause", c.cause.empty() ? std::string("admission") : c.cause)
      .add("failed_starts", c.failed_starts)
      .add("wall_s", c.wall_s)
      .add("unix_ms", unix_ms());
}

int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void StepLog::write(const StepReport& step, const JsonLine& line) {
  metrics_.write(line);
  window_time_ += step.step_time_s;
  window_wait_ += step.comm_wait_s;
  ++window_steps_;
  if (window_steps_ < log_every_ && step.step_in_epoch + 1 != step.steps_per_epoch) return;
  // No ratio where nothing was sent (a hierarchical hook whose ranks all
  // share one host counts only bytes between hosts): "0.0x" would read as
  // a compression that loses everything.
  const std::string ratio = step.bytes_sent > 0 && step.compression_ratio > 0
                                ? absl::StrFormat("%.1fx", step.compression_ratio)
                                : std::string("-");
  live_.update(absl::StrFormat(
      "epoch %lld/%lld step %lld/%lld | %.0f samples/s | loss %.4f | "
      "sent %s/step | ratio %s | comm wait %.1f ms/step",
      (long long)step.epoch + 1, (long long)step.epochs, (long long)step.step_in_epoch + 1,
      (long long)step.steps_per_epoch,
      step.world_size * step.batch_size * window_steps_ / window_time_, step.loss,
      human_bytes(double(step.bytes_sent)), ratio, 1000 * window_wait_ / window_steps_));
  restart_window();
}

}  // namespace ddpx::trainer
