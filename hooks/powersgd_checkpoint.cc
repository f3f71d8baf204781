// PowerSGDState::save / load: the checkpoint format.
//
//   "DDPXPSGD" (8 bytes) | u32 version (1)
//   options: i64 rank | i64 start_iter | f64 min_rate | u8 error_feedback |
//            u8 warm_start | f32 epsilon | u64 seed | i64 stats_frequency |
//            u8 batch_same_shape
//   i64 iter | i64 numel_before | i64 numel_after | i64 next_stats_report |
//   u64 rng_state
//   u64 bucket count, then per bucket (ascending index):
//     u64 index | u8 low_rank_initialized | 3 x (u64 length | length f32): error, p_memory, q_memory
//     (for a bucket on a device, its device memories copied to the host: the
//     format does not say where a bucket lived, so a checkpoint taken on a
//     GPU resumes on the CPU and back)
//   "END!"
//
// Integers and floats are written in the host's byte order, which on every
// machine this project targets (x86-64, aarch64) is little-endian.
#include <cstring>
#include <istream>
#include <ostream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "hooks/powersgd_state.h"

namespace ddpx {
namespace {

constexpr char kMagic[8] = {'D', 'D', 'P', 'X', 'P', 'S', 'G', 'D'};
constexpr char kEnd[4] = {'E', 'N', 'D', '!'};
constexpr uint32_t kVersion = 1;
// No bucket holds more elements than this; a larger length means corruption.
constexpr uint64_t kMaxVectorLength = uint64_t{1} << 40;

template <typename T>
void put(std::ostream& out, T value) {
  out.write(reinterpret_cast<const char*>(&value), sizeof(T));
}

void put_vector(std::ostream& out, const std::vector<float>& v) {
  put<uint64_t>(out, v.size());
  out.write(reinterpret_cast<const char*>(v.data()),
            static_cast<std::streamsize>(v.size() * sizeof(float)));
}

// A memory as it is written: its host vector, or (a bucket on a device) a
// host copy of its device tensor, which then holds the truth.
absl::StatusOr<std::vector<float>> host_values(const std::vector<float>& host,
                                               const Tensor& device) {
  if (!device.defined()) return host;
  Tensor copy = Tensor::zeros({device.numel()}, DType::kFloat32);
  if (absl::Status s = copy.copy_from(device.flatten()); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("PowerSGD checkpoint: copying a memory from ",
                                               device.str(), " to the host: ", s.message()));
  }
  const float* values = copy.data_as<float>();
  return std::vector<float>(values, values + copy.numel());
}

class Reader {
 public:
  explicit Reader(std::istream& in) : in_(in) {}

  template <typename T>
  absl::Status get(T* value, const char* what) {
    in_.read(reinterpret_cast<char*>(value), sizeof(T));
    if (!in_) return truncated(what);
    return absl::OkStatus();
  }

  absl::Status get_vector(std::vector<float>* v, const char* what) {
    uint64_t length = 0;
    absl::Status s = get(&length, what);
    if (!s.ok()) return s;
    if (length > kMaxVectorLength) {
      return absl::DataLossError(absl::StrCat(
          "PowerSGD checkpoint: ", what, " claims ", length,
          " elements; the file is corrupt"));
    }
    v->resize(length);
    in_.read(reinterpret_cast<char*>(v->data()),
             static_cast<std::streamsize>(length * sizeof(float)));
    if (!in_) return truncated(what);
    return absl::OkStatus();
  }

  absl::Status bytes(char* out, size_t n, const char* what) {
    in_.read(out, static_cast<std::streamsize>(n));
    if (!in_) return truncated(what);
    return absl::OkStatus();
  }

 private:
  static absl::Status truncated(const char* what) {
    return absl::DataLossError(absl::StrCat(
        "PowerSGD checkpoint: stream ended while reading ", what));
  }
  std::istream& in_;
};

#define DDPX_RETURN_IF_ERROR(expr)     \
  do {                                 \
    absl::Status _status = (expr);     \
    if (!_status.ok()) return _status; \
  } while (0)

}  // namespace

absl::Status PowerSGDState::save(std::ostream& out) const {
  std::lock_guard<std::mutex> lock(mu_);
  out.write(kMagic, sizeof(kMagic));
  put<uint32_t>(out, kVersion);
  put<int64_t>(out, options_.matrix_approximation_rank);
  put<int64_t>(out, options_.start_powerSGD_iter);
  put<double>(out, options_.min_compression_rate);
  put<uint8_t>(out, options_.use_error_feedback);
  put<uint8_t>(out, options_.warm_start);
  put<float>(out, options_.orthogonalization_epsilon);
  put<uint64_t>(out, options_.random_seed);
  put<int64_t>(out, options_.compression_stats_logging_frequency);
  put<uint8_t>(out, options_.batch_tensors_with_same_shape);
  put<int64_t>(out, iter_);
  put<int64_t>(out, numel_before_);
  put<int64_t>(out, numel_after_);
  put<int64_t>(out, next_stats_report_);
  put<uint64_t>(out, rng_.state());
  put<uint64_t>(out, buckets_.size());
  for (const auto& [index, memory] : buckets_) {
    put<uint64_t>(out, index);
    put<uint8_t>(out, memory->low_rank_initialized);
    for (auto [host, device] : {std::pair(&memory->error, &memory->device_error),
                                std::pair(&memory->p_memory, &memory->device_p_memory),
                                std::pair(&memory->q_memory, &memory->device_q_memory)}) {
      if (!device->defined()) {
        put_vector(out, *host);
        continue;
      }
      absl::StatusOr<std::vector<float>> values = host_values(*host, *device);
      if (!values.ok()) return values.status();
      put_vector(out, *values);
    }
  }
  out.write(kEnd, sizeof(kEnd));
  out.flush();
  if (!out) return absl::DataLossError("PowerSGD checkpoint: write failed");
  return absl::OkStatus();
}

absl::Status PowerSGDState::load(std::istream& in) {
  Reader r(in);
  char magic[sizeof(kMagic)];
  DDPX_RETURN_IF_ERROR(r.bytes(magic, sizeof(magic), "the magic"));
  if (memcmp(magic, kMagic, sizeof(kMagic)) != 0) {
    return absl::InvalidArgumentError(
        "PowerSGD checkpoint: bad magic (not a PowerSGD state file)");
  }
  uint32_t version = 0;
  DDPX_RETURN_IF_ERROR(r.get(&version, "the version"));
  if (version != kVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("PowerSGD checkpoint: version ", version,
                     " is not supported (this build reads version ", kVersion, ")"));
  }
  PowerSGDOptions o;
  uint8_t error_feedback = 0, warm_start = 0, batch = 0;
  DDPX_RETURN_IF_ERROR(r.get(&o.matrix_approximation_rank, "matrix_approximation_rank"));
  DDPX_RETURN_IF_ERROR(r.get(&o.start_powerSGD_iter, "start_powerSGD_iter"));
  DDPX_RETURN_IF_ERROR(r.get(&o.min_compression_rate, "min_compression_rate"));
  DDPX_RETURN_IF_ERROR(r.get(&error_feedback, "use_error_feedback"));
  DDPX_RETURN_IF_ERROR(r.get(&warm_start, "warm_start"));
  DDPX_RETURN_IF_ERROR(r.get(&o.orthogonalization_epsilon, "orthogonalization_epsilon"));
  DDPX_RETURN_IF_ERROR(r.get(&o.random_seed, "random_seed"));
  DDPX_RETURN_IF_ERROR(r.get(&o.compression_stats_logging_frequency,
                             "compression_stats_logging_frequency"));
  DDPX_RETURN_IF_ERROR(r.get(&batch, "batch_tensors_with_same_shape"));
  o.use_error_feedback = error_feedback != 0;
  o.warm_start = warm_start != 0;
  o.batch_tensors_with_same_shape = batch != 0;
  absl::Status valid = o.validate();
  if (!valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "PowerSGD checkpoint holds invalid options: ", valid.message()));
  }
  int64_t iter = 0, before = 0, after = 0, next_report = 0;
  uint64_t rng_state = 0, bucket_count = 0;
  DDPX_RETURN_IF_ERROR(r.get(&iter, "the iteration"));
  DDPX_RETURN_IF_ERROR(r.get(&before, "numel_before"));
  DDPX_RETURN_IF_ERROR(r.get(&after, "numel_after"));
  DDPX_RETURN_IF_ERROR(r.get(&next_report, "next_stats_report"));
  DDPX_RETURN_IF_ERROR(r.get(&rng_state, "the generator state"));
  DDPX_RETURN_IF_ERROR(r.get(&bucket_count, "the bucket count"));
  std::map<size_t, std::unique_ptr<PowerSGDBucketMemory>> buckets;
  for (uint64_t b = 0; b < bucket_count; ++b) {
    uint64_t index = 0;
    DDPX_RETURN_IF_ERROR(r.get(&index, "a bucket index"));
    auto memory = std::make_unique<PowerSGDBucketMemory>();
    uint8_t initialized = 0;
    DDPX_RETURN_IF_ERROR(r.get(&initialized, "a bucket's P/Q flag"));
    memory->low_rank_initialized = initialized != 0;
    DDPX_RETURN_IF_ERROR(r.get_vector(&memory->error, "a bucket's error"));
    DDPX_RETURN_IF_ERROR(r.get_vector(&memory->p_memory, "a bucket's P memory"));
    DDPX_RETURN_IF_ERROR(r.get_vector(&memory->q_memory, "a bucket's Q memory"));
    buckets[index] = std::move(memory);
  }
  char end[sizeof(kEnd)];
  DDPX_RETURN_IF_ERROR(r.bytes(end, sizeof(end), "the end marker"));
  if (memcmp(end, kEnd, sizeof(kEnd)) != 0) {
    return absl::DataLossError("PowerSGD checkpoint: missing end marker");
  }

  std::lock_guard<std::mutex> lock(mu_);
  options_ = o;
  if (options_.compression_stats_logging_frequency < 1)
    options_.compression_stats_logging_frequency = 1;
  iter_ = iter;
  numel_before_ = before;
  numel_after_ = after;
  next_stats_report_ = next_report;
  rng_.set_state(rng_state);
  buckets_ = std::move(buckets);
  return absl::OkStatus();
}

}  // namespace ddpx
