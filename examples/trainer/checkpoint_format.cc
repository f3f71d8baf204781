#include "examples/trainer/checkpoint_format.h"

#include <cmath>
#include <cstring>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "core/little_endian.h"

namespace ddpx::trainer {
namespace {

constexpr char kStateMagic[8] = {'D', 'D', 'P', 'X', 'S', 'T', 'A', 'T'};
constexpr char kHookMagic[8] = {'D', 'D', 'P', 'X', 'H', 'O', 'O', 'K'};
constexpr uint32_t kStateVersion = 2;
constexpr uint32_t kHookVersion = 1;
constexpr uint64_t kMaxHookSpecLength = 4096;
// Larger values are not a training run's: corruption or a foreign file.
constexpr double kMaxWallSeconds = 1e9;
constexpr double kMaxLossSum = 1e15;

class Writer {
 public:
  void bytes(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  void u32(uint32_t v) { le(v, 4); }
  void i64(int64_t v) { le(static_cast<uint64_t>(v), 8); }
  void f64(double v) {
    uint64_t bits;
    memcpy(&bits, &v, 8);
    le(bits, 8);
  }
  void str(const std::string& s) {
    le(s.size(), 8);
    out_ += s;
  }
  std::string& out() { return out_; }

 private:
  void le(uint64_t v, int n) { little_endian::append(v, n, &out_); }
  std::string out_;
};

// Reads header fields in order; every error names the file and the field.
class Reader {
 public:
  Reader(const std::string& path, absl::string_view data) : path_(path), data_(data) {}

  absl::Status magic(const char (&expected)[8], const char* what) {
    if (data_.size() < 8 || memcmp(data_.data(), expected, 8) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(path_, ": field magic: not a ", what, " (expected \"",
                       absl::string_view(expected, 8), "\")"));
    }
    data_.remove_prefix(8);
    return absl::OkStatus();
  }
  absl::Status version(uint32_t expected) {
    uint64_t v = 0;
    if (absl::Status s = le(4, "version", &v); !s.ok()) return s;
    if (v != expected) {
      return absl::InvalidArgumentError(absl::StrCat(
          path_, ": field version = ", v, ": this build reads version ", expected));
    }
    return absl::OkStatus();
  }
  absl::Status i64(const char* field, int64_t* v) {
    uint64_t u = 0;
    absl::Status s = le(8, field, &u);
    *v = static_cast<int64_t>(u);
    return s;
  }
  absl::Status f64(const char* field, double* v) {
    uint64_t u = 0;
    absl::Status s = le(8, field, &u);
    memcpy(v, &u, 8);
    return s;
  }
  absl::Status str(const char* field, uint64_t max_length, std::string* v) {
    uint64_t n = 0;
    if (absl::Status s = le(8, field, &n); !s.ok()) return s;
    if (n > max_length) return out_of_range(field, n, absl::StrCat("[0, ", max_length, "]"));
    if (data_.size() < n) return truncated(field);
    v->assign(data_.data(), n);
    data_.remove_prefix(n);
    return absl::OkStatus();
  }
  absl::string_view rest() const { return data_; }

  template <typename T>
  absl::Status out_of_range(const char* field, T value, const std::string& range) const {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": field ", field, " = ", value, " is out of range ", range));
  }
  absl::Status check_range(const char* field, int64_t v, int64_t lo, int64_t hi) const {
    if (v >= lo && v <= hi) return absl::OkStatus();
    return out_of_range(field, v, absl::StrCat("[", lo, ", ", hi, "]"));
  }
  absl::Status check_range(const char* field, double v, double lo, double hi) const {
    if (std::isfinite(v) && v >= lo && v <= hi) return absl::OkStatus();
    return out_of_range(field, v, absl::StrCat("[", lo, ", ", hi, "]"));
  }
  absl::Status check_equal(const char* field, int64_t v, int64_t expected,
                           const std::string& why) const {
    if (v == expected) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": field ", field, " = ", v, ", expected ", expected, " (", why, ")"));
  }

 private:
  absl::Status le(int n, const char* field, uint64_t* v) {
    if (data_.size() < static_cast<size_t>(n)) return truncated(field);
    *v = little_endian::read(data_.data(), n);
    data_.remove_prefix(n);
    return absl::OkStatus();
  }
  absl::Status truncated(const char* field) const {
    return absl::DataLossError(absl::StrCat(path_, ": field ", field, ": file ends before it"));
  }

  const std::string& path_;
  absl::string_view data_;
};

#define RETURN_IF_ERROR(expr)          \
  do {                                 \
    absl::Status _status = (expr);     \
    if (!_status.ok()) return _status; \
  } while (0)

// `s` from loading a section, as "<path>: field <section>: <what>".
absl::Status in_section(const std::string& path, const char* section, const absl::Status& s) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(path, ": field ", section, ": ", s.message()));
}

}  // namespace

std::string hook_file_name(int rank) { return absl::StrCat("hook_rank", rank, ".bin"); }

absl::Status MlpTrainState::load_model(std::istream& in) {
  if (mutable_model_ == nullptr) return absl::InternalError("MlpTrainState: read-only model");
  return mutable_model_->load(in);
}

absl::Status MlpTrainState::load_optimizer(std::istream& in) {
  if (mutable_optimizer_ == nullptr) {
    return absl::InternalError("MlpTrainState: read-only optimizer");
  }
  return mutable_optimizer_->load_state(in);
}

absl::StatusOr<std::string> encode_state_file(const Progress& p, const nn::Mlp& model,
                                              const nn::Sgd& optimizer) {
  return encode_state_file(p, MlpTrainState(model, optimizer));
}

absl::StatusOr<Progress> decode_state_file(const std::string& path, absl::string_view contents,
                                           const CheckpointExpectations& e, nn::Mlp& model,
                                           nn::Sgd& optimizer) {
  MlpTrainState state(model, optimizer);
  return decode_state_file(path, contents, e, state);
}

absl::StatusOr<std::string> encode_state_file(const Progress& p, const TrainState& state) {
  Writer w;
  w.bytes(kStateMagic, 8);
  w.u32(kStateVersion);
  for (int64_t v : {p.global_step, p.epoch, p.step_in_epoch, p.steps_per_epoch, p.world_size})
    w.i64(v);
  w.f64(p.wall_seconds);
  w.f64(p.epoch_loss_sum);
  w.i64(p.epoch_loss_count);
  std::ostringstream body;
  RETURN_IF_ERROR(state.save_model(body));
  RETURN_IF_ERROR(state.save_optimizer(body));
  w.out() += body.str();
  return std::move(w.out());
}

absl::StatusOr<std::string> encode_hook_file(const Progress& p, int rank, const std::string& hook,
                                             const GradientSync& sync) {
  Writer w;
  w.bytes(kHookMagic, 8);
  w.u32(kHookVersion);
  w.i64(p.global_step);
  w.i64(rank);
  w.i64(p.world_size);
  w.str(hook);
  w.i64(p.hook_start_step);
  w.i64(sync.hook_iteration());
  std::ostringstream body;
  RETURN_IF_ERROR(sync.save_state(body));
  w.out() += body.str();
  return std::move(w.out());
}

absl::StatusOr<Progress> decode_state_file(const std::string& path, absl::string_view contents,
                                           const CheckpointExpectations& e, TrainState& state) {
  Reader r(path, contents);
  Progress p;
  RETURN_IF_ERROR(r.magic(kStateMagic, "ddpx trainer state file"));
  RETURN_IF_ERROR(r.version(kStateVersion));
  RETURN_IF_ERROR(r.i64("global_step", &p.global_step));
  RETURN_IF_ERROR(r.i64("epoch", &p.epoch));
  RETURN_IF_ERROR(r.i64("step_in_epoch", &p.step_in_epoch));
  RETURN_IF_ERROR(r.i64("steps_per_epoch", &p.steps_per_epoch));
  RETURN_IF_ERROR(r.i64("world_size", &p.world_size));
  RETURN_IF_ERROR(r.f64("wall_seconds", &p.wall_seconds));
  RETURN_IF_ERROR(r.f64("epoch_loss_sum", &p.epoch_loss_sum));
  RETURN_IF_ERROR(r.i64("epoch_loss_count", &p.epoch_loss_count));

  RETURN_IF_ERROR(r.check_equal("global_step", p.global_step, e.step, "the manifest's step"));
  RETURN_IF_ERROR(r.check_equal("world_size", p.world_size, e.world_size,
                                "this job's world size; data order and hook state depend on it"));
  RETURN_IF_ERROR(r.check_equal("steps_per_epoch", p.steps_per_epoch, e.steps_per_epoch,
                                "this run's; --batch_size, --train_limit or the world size "
                                "changed"));
  RETURN_IF_ERROR(r.check_range("epoch", p.epoch, 0, e.epochs));
  RETURN_IF_ERROR(r.check_range("step_in_epoch", p.step_in_epoch, 0, p.steps_per_epoch));
  RETURN_IF_ERROR(r.check_equal("global_step", p.global_step,
                                p.epoch * p.steps_per_epoch + p.step_in_epoch,
                                "epoch x steps_per_epoch + step_in_epoch"));
  RETURN_IF_ERROR(r.check_range("wall_seconds", p.wall_seconds, 0.0, kMaxWallSeconds));
  RETURN_IF_ERROR(r.check_range("epoch_loss_sum", p.epoch_loss_sum, 0.0, kMaxLossSum));
  RETURN_IF_ERROR(r.check_range("epoch_loss_count", p.epoch_loss_count, 0, p.step_in_epoch));

  std::istringstream body{std::string(r.rest())};
  RETURN_IF_ERROR(in_section(path, "model", state.load_model(body)));
  RETURN_IF_ERROR(in_section(path, "optimizer", state.load_optimizer(body)));
  if (body.peek() != std::char_traits<char>::eof()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": field optimizer: bytes follow the optimizer state"));
  }
  return p;
}

absl::StatusOr<HookFileHeader> decode_hook_file(const std::string& path,
                                                absl::string_view contents,
                                                const CheckpointExpectations& e,
                                                GradientSync& sync) {
  Reader r(path, contents);
  HookFileHeader h;
  RETURN_IF_ERROR(r.magic(kHookMagic, "ddpx trainer hook-state file"));
  RETURN_IF_ERROR(r.version(kHookVersion));
  RETURN_IF_ERROR(r.i64("step", &h.step));
  RETURN_IF_ERROR(r.i64("rank", &h.rank));
  RETURN_IF_ERROR(r.i64("world_size", &h.world_size));
  RETURN_IF_ERROR(r.str("hook", kMaxHookSpecLength, &h.hook));
  RETURN_IF_ERROR(r.i64("hook_start_step", &h.hook_start_step));
  RETURN_IF_ERROR(r.i64("hook_iteration", &h.hook_iteration));

  RETURN_IF_ERROR(r.check_equal("step", h.step, e.step, "the manifest's step"));
  RETURN_IF_ERROR(r.check_equal("rank", h.rank, e.rank, "the rank reading it"));
  RETURN_IF_ERROR(r.check_equal("world_size", h.world_size, e.world_size,
                                "this job's world size"));
  if (h.hook != e.hook) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, ": field hook = '", h.hook, "', but this run has --hook='", e.hook,
        "'; pass --reset_hook_state to start the new hook from fresh state (the saved "
        "hook state is then dropped)"));
  }
  RETURN_IF_ERROR(r.check_range("hook_start_step", h.hook_start_step, 0, h.step));
  if (h.hook_iteration != -1) {
    RETURN_IF_ERROR(r.check_equal("hook_iteration", h.hook_iteration,
                                  h.step - h.hook_start_step, "step - hook_start_step"));
  }

  std::istringstream body{std::string(r.rest())};
  RETURN_IF_ERROR(in_section(path, "hook state", sync.load_state(body)));
  if (body.peek() != std::char_traits<char>::eof()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": field hook state: bytes follow the hook's state"));
  }
  if (sync.hook_iteration() != h.hook_iteration) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": field hook state: its iteration is ", sync.hook_iteration(),
        ", the header's hook_iteration is ", h.hook_iteration));
  }
  return h;
}

}  // namespace ddpx::trainer
