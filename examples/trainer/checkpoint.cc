#include "examples/trainer/checkpoint.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "examples/nn/serialize.h"

namespace ddpx::trainer {
namespace {

constexpr char kMagic[] = "ddpx-train-checkpoint-v1";

std::string state_path(const std::string& dir) { return dir + "/state.bin"; }
std::string hook_path(const std::string& dir, int rank) {
  return dir + "/hook_rank" + std::to_string(rank) + ".bin";
}

template <typename WriteFn>
absl::Status write_atomically(const std::string& path, WriteFn write) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return absl::UnavailableError("checkpoint: cannot create " + tmp + ": " + strerror(errno));
    absl::Status s = write(out);
    if (!s.ok()) return s;
    out.flush();
    if (!out) return absl::DataLossError("checkpoint: writing " + tmp + " failed");
  }
  if (rename(tmp.c_str(), path.c_str()) != 0)
    return absl::UnavailableError("checkpoint: cannot rename " + tmp + ": " + strerror(errno));
  return absl::OkStatus();
}

absl::Status prefix(const std::string& path, const absl::Status& s) {
  if (s.ok()) return s;
  return absl::Status(s.code(), path + ": " + std::string(s.message()));
}

}  // namespace

absl::Status save_checkpoint(const std::string& dir, int rank, const Progress& p,
                             const nn::Mlp& model, const nn::Sgd& optimizer,
                             const GradientSync& sync) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    return absl::UnavailableError("checkpoint: cannot create " + dir + ": " + strerror(errno));
  if (rank == 0) {
    absl::Status s = write_atomically(state_path(dir), [&](std::ostream& out) {
      nn::write_string(out, kMagic);
      for (int64_t v : {p.epoch, p.step_in_epoch, p.global_step, p.world_size})
        nn::write_u64(out, static_cast<uint64_t>(v));
      nn::write_string(out, std::to_string(p.wall_seconds));
      absl::Status ms = model.save(out);
      return ms.ok() ? optimizer.save_state(out) : ms;
    });
    if (!s.ok()) return s;
  }
  return write_atomically(hook_path(dir, rank),
                          [&](std::ostream& out) { return sync.save_state(out); });
}

absl::StatusOr<Progress> load_checkpoint(const std::string& dir, int rank, int world_size,
                                         nn::Mlp& model, nn::Sgd& optimizer,
                                         GradientSync& sync) {
  const std::string path = state_path(dir);
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError("no checkpoint at " + path);
  std::string magic;
  if (!nn::read_string(in, &magic) || magic != kMagic)
    return absl::InvalidArgumentError(path + ": not a ddpx trainer checkpoint");
  Progress p;
  uint64_t v[4];
  for (uint64_t& x : v)
    if (!nn::read_u64(in, &x)) return absl::DataLossError(path + ": truncated header");
  p.epoch = static_cast<int64_t>(v[0]);
  p.step_in_epoch = static_cast<int64_t>(v[1]);
  p.global_step = static_cast<int64_t>(v[2]);
  p.world_size = static_cast<int64_t>(v[3]);
  std::string wall;
  if (!nn::read_string(in, &wall)) return absl::DataLossError(path + ": truncated header");
  p.wall_seconds = std::stod(wall);
  if (p.world_size != world_size) {
    return absl::FailedPreconditionError(
        path + " was written by a job of " + std::to_string(p.world_size) +
        " ranks; this job has " + std::to_string(world_size) +
        " (the data order and hook state depend on it)");
  }
  absl::Status s = prefix(path, model.load(in));
  if (!s.ok()) return s;
  s = prefix(path, optimizer.load_state(in));
  if (!s.ok()) return s;
  const std::string hook_file = hook_path(dir, rank);
  std::ifstream hook_in(hook_file, std::ios::binary);
  if (!hook_in) return absl::NotFoundError(hook_file + " is missing (checkpoint incomplete)");
  s = prefix(hook_file, sync.load_state(hook_in));
  if (!s.ok()) return s;
  return p;
}

}  // namespace ddpx::trainer
