#include "hooks/powersgd_hook.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "hooks/batched_powersgd_hook.h"
#include "hooks/powersgd_plan.h"
#include "hooks/powersgd_step.h"
#include "hooks/powersgd_work_buffer.h"

namespace ddpx {

std::shared_ptr<Future<Tensor>> PowerSGDHook::run_compressed(GradBucket& bucket) {
  const Tensor buffer = bucket.buffer();
  absl::StatusOr<CompressionPlan> plan = plan_layerwise(
      bucket.offsets(), bucket.shapes(), buffer.numel(), state().options());
  if (!plan.ok()) return Future<Tensor>::failed(plan.status());
  // A float32 bucket is worked on in place; a float16/bfloat16 one through a
  // float32 copy whose result is narrowed back into it, on its device.
  DeviceKernels* k = &kernels_of(bucket);
  absl::StatusOr<Tensor> work = float32_work(buffer, *k, "PowerSGD");
  if (!work.ok()) return Future<Tensor>::failed(work.status());
  const Tensor result = *work;
  return start_step(bucket, result, *std::move(plan),
                    [buffer, result, k]() -> absl::StatusOr<Tensor> {
                      if (absl::Status s = store_result(result, buffer, *k); !s.ok()) {
                        return s;
                      }
                      return buffer;
                    });
}

namespace {

absl::Status bad_value(const std::string& key, const std::string& value,
                       const char* expected) {
  return absl::InvalidArgumentError(absl::StrCat(
      "powersgd option ", key, "=", value, ": expected ", expected));
}

absl::Status parse_bool(const std::string& key, const std::string& value,
                        bool* out) {
  if (value == "1" || value == "true") {
    *out = true;
  } else if (value == "0" || value == "false") {
    *out = false;
  } else {
    return bad_value(key, value, "0, 1, true or false");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PowerSGDOptions> parse_powersgd_options(
    const std::map<std::string, std::string>& options) {
  static const char* const kKeys[] = {
      "rank", "start_iter", "min_compression_rate", "use_error_feedback",
      "warm_start", "epsilon", "seed", "stats_frequency", "batch_same_shape"};
  PowerSGDOptions o;
  for (const auto& [key, value] : options) {
    absl::Status s;
    if (key == "rank") {
      if (!absl::SimpleAtoi(value, &o.matrix_approximation_rank))
        s = bad_value(key, value, "an integer >= 1");
    } else if (key == "start_iter") {
      if (!absl::SimpleAtoi(value, &o.start_powerSGD_iter))
        s = bad_value(key, value, "an integer >= 0");
    } else if (key == "min_compression_rate") {
      if (!absl::SimpleAtod(value, &o.min_compression_rate))
        s = bad_value(key, value, "a number > 0");
    } else if (key == "use_error_feedback") {
      s = parse_bool(key, value, &o.use_error_feedback);
    } else if (key == "warm_start") {
      s = parse_bool(key, value, &o.warm_start);
    } else if (key == "epsilon") {
      if (!absl::SimpleAtof(value, &o.orthogonalization_epsilon))
        s = bad_value(key, value, "a number >= 0");
    } else if (key == "seed") {
      if (!absl::SimpleAtoi(value, &o.random_seed))
        s = bad_value(key, value, "an unsigned 64-bit integer");
    } else if (key == "stats_frequency") {
      if (!absl::SimpleAtoi(value, &o.compression_stats_logging_frequency))
        s = bad_value(key, value, "an integer");
    } else if (key == "batch_same_shape") {
      s = parse_bool(key, value, &o.batch_tensors_with_same_shape);
    } else {
      s = absl::InvalidArgumentError(
          absl::StrCat("powersgd: unknown option '", key,
                       "'; known: ", absl::StrJoin(kKeys, ", ")));
    }
    if (!s.ok()) return s;
  }
  absl::Status valid = o.validate();
  if (!valid.ok()) return valid;
  return o;
}

absl::StatusOr<std::unique_ptr<CommHook>> make_powersgd_hook(
    std::shared_ptr<ProcessGroup> pg,
    const std::map<std::string, std::string>& options, bool batched) {
  if (!pg) return absl::InvalidArgumentError("powersgd: no process group");
  absl::StatusOr<PowerSGDOptions> parsed = parse_powersgd_options(options);
  if (!parsed.ok()) return parsed.status();
  absl::StatusOr<std::shared_ptr<PowerSGDState>> state =
      PowerSGDState::create(*parsed);
  if (!state.ok()) return state.status();
  if (batched) {
    return std::unique_ptr<CommHook>(
        new BatchedPowerSGDHook(std::move(pg), *std::move(state)));
  }
  return std::unique_ptr<CommHook>(new PowerSGDHook(std::move(pg), *std::move(state)));
}

}  // namespace ddpx
