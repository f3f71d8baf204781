#include "hooks/powersgd_state.h"

#include <cstdio>

#include "absl/strings/str_cat.h"

namespace ddpx {

absl::Status PowerSGDOptions::validate() const {
  if (matrix_approximation_rank < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PowerSGD: matrix_approximation_rank must be >= 1, got ",
        matrix_approximation_rank));
  }
  if (!(min_compression_rate > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PowerSGD: min_compression_rate must be > 0, got ", min_compression_rate));
  }
  if (!(orthogonalization_epsilon >= 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("PowerSGD: orthogonalization_epsilon must be >= 0, got ",
                     orthogonalization_epsilon));
  }
  if (start_powerSGD_iter < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PowerSGD: start_powerSGD_iter must be >= 0, got ", start_powerSGD_iter));
  }
  if ((use_error_feedback || warm_start) && start_powerSGD_iter <= 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PowerSGD: start_powerSGD_iter must be >= 2 when use_error_feedback or "
        "warm_start is on (got ", start_powerSGD_iter,
        "): DDP rebuilds its buckets after iteration 1, so error and P/Q "
        "memories keyed by bucket index are only valid from iteration 2"));
  }
  return absl::OkStatus();
}

bool should_compress(int64_t rows, int64_t cols, int64_t rank,
                     double min_compression_rate) {
  const double compressed = static_cast<double>(rows + cols) * rank;
  return compressed * min_compression_rate < static_cast<double>(rows) * cols;
}

absl::StatusOr<std::shared_ptr<PowerSGDState>> PowerSGDState::create(
    const PowerSGDOptions& options) {
  absl::Status valid = options.validate();
  if (!valid.ok()) return valid;
  return std::shared_ptr<PowerSGDState>(new PowerSGDState(options));
}

PowerSGDState::PowerSGDState(const PowerSGDOptions& options)
    : options_(options), rng_(options.random_seed) {
  // torch: "we always report compression stats at least once".
  if (options_.compression_stats_logging_frequency < 1)
    options_.compression_stats_logging_frequency = 1;
}

int64_t PowerSGDState::iter() const {
  std::lock_guard<std::mutex> lock(mu_);
  return iter_;
}

bool PowerSGDState::compressing() const {
  std::lock_guard<std::mutex> lock(mu_);
  return iter_ >= options_.start_powerSGD_iter;
}

void PowerSGDState::maybe_increase_iter(bool bucket_is_last) {
  bool started = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (bucket_is_last) {
      ++iter_;
      started = iter_ == options_.start_powerSGD_iter;
    }
  }
  if (started) {
    log(absl::StrCat("PowerSGD: start to apply PowerSGD after ",
                     options_.start_powerSGD_iter, " iterations"));
  }
}

void PowerSGDState::record_compression(int64_t numel_before,
                                       int64_t numel_after,
                                       bool bucket_is_last) {
  std::string report;
  {
    std::lock_guard<std::mutex> lock(mu_);
    numel_before_ += numel_before;
    numel_after_ += numel_after;
    if (bucket_is_last && iter_ >= next_stats_report_) {
      const double rate = numel_after_ > 0
                              ? static_cast<double>(numel_before_) / numel_after_
                              : 0.0;
      report = absl::StrCat("PowerSGD compression stats: iter ", iter_,
                            ", total before compression ", numel_before_,
                            ", total after compression ", numel_after_,
                            ", rate ", rate);
      next_stats_report_ = iter_ + options_.compression_stats_logging_frequency;
    }
  }
  if (!report.empty()) log(report);
}

CompressionStats PowerSGDState::compression_stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  CompressionStats s;
  s.numel_before = numel_before_;
  s.numel_after = numel_after_;
  s.compress_rate =
      numel_after_ > 0 ? static_cast<double>(numel_before_) / numel_after_ : 0.0;
  return s;
}

void PowerSGDState::set_log_sink(std::function<void(const std::string&)> sink) {
  std::lock_guard<std::mutex> lock(mu_);
  log_sink_ = std::move(sink);
}

void PowerSGDState::log(const std::string& line) const {
  std::function<void(const std::string&)> sink;
  {
    std::lock_guard<std::mutex> lock(mu_);
    sink = log_sink_;
  }
  if (sink) {
    sink(line);
  } else {
    fprintf(stderr, "%s\n", line.c_str());
  }
}

uint64_t PowerSGDState::next_random_seed() {
  std::lock_guard<std::mutex> lock(mu_);
  return rng_.next();
}

PowerSGDBucketMemory& PowerSGDState::bucket_memory(size_t index) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = buckets_[index];
  if (!slot) slot = std::make_unique<PowerSGDBucketMemory>();
  return *slot;
}

void PowerSGDState::drop_error_feedback() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [index, memory] : buckets_) {
    memory->error.clear();
    memory->device_error = Tensor();
  }
}

std::vector<size_t> PowerSGDState::bucket_indices() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<size_t> out;
  for (const auto& kv : buckets_) out.push_back(kv.first);
  return out;
}

}  // namespace ddpx
