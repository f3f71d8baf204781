// PowerSGDState (as in PyTorch's "DDP Communication Hooks" documentation):
// PowerSGD's hyperparameters and everything it remembers between iterations,
// for every bucket: the local error (error feedback), the warm-start P and Q
// memories, the iteration counter, the random generator and the compression
// statistics.
//
// One state serves every bucket of a model, as in torch. Buckets run their
// hook chains concurrently (each chain on the thread that completes its
// collectives), so the shared counters are behind a mutex; a bucket's own
// memories are only touched by that bucket's chain, and DDP never runs a
// bucket again before its previous future has completed.
#ifndef DDPX_HOOKS_POWERSGD_STATE_H_
#define DDPX_HOOKS_POWERSGD_STATE_H_

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "hooks/powersgd_random.h"
#include "core/tensor.h"

namespace ddpx {

// The hyperparameters, with torch's names and defaults.
struct PowerSGDOptions {
  int64_t matrix_approximation_rank = 1;
  int64_t start_powerSGD_iter = 1000;
  double min_compression_rate = 2;
  bool use_error_feedback = true;
  bool warm_start = true;
  float orthogonalization_epsilon = 0;
  uint64_t random_seed = 0;
  int64_t compression_stats_logging_frequency = 10000;
  bool batch_tensors_with_same_shape = false;

  // Rank >= 1, rate > 0, epsilon >= 0, and start_powerSGD_iter >= 2 when
  // error feedback or warm start is on: DDP rebuilds its buckets after
  // iteration 1, and memories keyed by a bucket index before then would
  // belong to a different bucket afterwards.
  absl::Status validate() const;
};

// (rows + cols) * rank * min_compression_rate < rows * cols: compressing the
// rows x cols matrix to rank-`rank` factors saves enough bandwidth.
bool should_compress(int64_t rows, int64_t cols, int64_t rank,
                     double min_compression_rate);

struct CompressionStats {
  // numel_before / numel_after, or 0 before anything was compressed.
  double compress_rate = 0;
  int64_t numel_before = 0;
  int64_t numel_after = 0;
};

// What PowerSGD keeps for one bucket index.
struct PowerSGDBucketMemory {
  // The local error (input minus what was applied) of the last compressed
  // step; empty until the first one.
  std::vector<float> error;
  // Warm-start factors: every compressed matrix's P (rows x rank) and
  // Q (cols x rank), row-major, back to back; empty when not warm.
  std::vector<float> p_memory;
  std::vector<float> q_memory;
  // Whether P/Q memory was set up (by a warm-start step or a checkpoint);
  // a bucket that compresses nothing has it set with empty vectors.
  bool low_rank_initialized = false;
  // Scratch for the batched hook's zero-padded square matrix (not state).
  std::vector<float> padded;

  // A bucket on a device (hooks/powersgd_step.h) keeps the same three
  // memories on its device. Where one of these is defined it holds the
  // truth and its host vector above is empty; save() copies it to the host,
  // load() drops it (the next device step uploads the loaded vector).
  Tensor device_error;
  Tensor device_p_memory;
  Tensor device_q_memory;
  Tensor device_padded;  // the batched hook's square, on the device (scratch)
};

class PowerSGDState {
 public:
  // Fails with the reason if `options` are invalid.
  static absl::StatusOr<std::shared_ptr<PowerSGDState>> create(
      const PowerSGDOptions& options);

  const PowerSGDOptions& options() const { return options_; }
  int64_t iter() const;
  // Whether this iteration compresses (iter >= start_powerSGD_iter).
  bool compressing() const;
  // Called once per bucket per iteration when the bucket's step is done; the
  // iteration advances after the last bucket (torch's maybe_increase_iter).
  void maybe_increase_iter(bool bucket_is_last);

  // Adds one bucket's element counts to the statistics; on the last bucket
  // of an iteration at or past the next report, logs them and schedules the
  // next report compression_stats_logging_frequency iterations later.
  void record_compression(int64_t numel_before, int64_t numel_after,
                          bool bucket_is_last);
  CompressionStats compression_stats() const;
  // Where statistics and notices go (default: one line on stderr).
  void set_log_sink(std::function<void(const std::string&)> sink);

  // The seed for one (re)initialization of a bucket's Qs; the same sequence
  // on every rank.
  uint64_t next_random_seed();

  // The memory of bucket `index`, created empty on first use. The reference
  // stays valid for the state's lifetime.
  PowerSGDBucketMemory& bucket_memory(size_t index);
  // Indices that have memory, ascending.
  std::vector<size_t> bucket_indices() const;

  // Checkpoint: a versioned binary image of the hyperparameters, iteration,
  // statistics, generator and every bucket's error and P/Q memories (no
  // process group). load() replaces this state's contents with the image's,
  // hyperparameters included (as torch's __setstate__ does), and fails
  // naming the problem on a bad magic, unknown version or truncated stream.
  absl::Status save(std::ostream& out) const;
  absl::Status load(std::istream& in);
  // Empties every bucket's error (this rank's residual; the next
  // compressed step starts it at zero), keeping the rest.
  void drop_error_feedback();

  void log(const std::string& line) const;

 private:
  explicit PowerSGDState(const PowerSGDOptions& options);

  PowerSGDOptions options_;
  mutable std::mutex mu_;
  int64_t iter_ = 0;
  int64_t numel_before_ = 0;
  int64_t numel_after_ = 0;
  int64_t next_stats_report_ = 0;
  SplitMix64 rng_;
  std::map<size_t, std::unique_ptr<PowerSGDBucketMemory>> buckets_;
  std::function<void(const std::string&)> log_sink_;
};

}  // namespace ddpx

#endif  // DDPX_HOOKS_POWERSGD_STATE_H_
