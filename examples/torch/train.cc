// examples/torch:train: data-parallel training of a libtorch model (the
// residual CNN of cnn.h) on Fashion-MNIST with ddpx::torch::DistributedDataParallel.
//
//   bazel run //examples/torch:train -- --nproc=2 --model=cnn --hook=powersgd:rank=2,start_iter=10
//   srun -n 4 .bazel/bin/examples/torch/train --init=env://
//   torchrun --no-python --nproc-per-node=2 .bazel/bin/examples/torch/train --init=env://
//
// The training loop (examples/trainer/trainer.h: epochs, checkpoints as one
// atomic unit across ranks, progress lines and metrics JSON lines), the
// flags (examples/trainer/flags.h), the launch (--nproc, or a launcher's
// environment) and rendezvous (env://, tcp://, file://, SLURM, torchrun) are
// examples:train's; this file is the model's TrainStep. The model and its
// optimizer (torch::optim::SGD with momentum) are libtorch's; DDP is ddpx's,
// with any registry hook (--hook) over any ddpx backend (--backend).
#include <cblas.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>
#include <torch/serialize/archive.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "core/little_endian.h"
#include "examples/data/fashion_mnist.h"
#include "examples/torch/cnn.h"
#include "examples/trainer/checkpoint.h"
#include "examples/trainer/crc32c.h"
#include "examples/trainer/elastic_join.h"
#include "examples/trainer/elastic_membership.h"
#include "examples/trainer/flags.h"
#include "examples/trainer/train_step.h"
#include "process_group/rendezvous/init.h"
#include "reducer/torch/distributed_data_parallel.h"

// This model's flags; the rest are examples/trainer/flags.h's.
ABSL_FLAG(std::string, model, "cnn", "Model: cnn (the residual CNN of examples/torch/cnn.h).");
ABSL_FLAG(int64_t, width, 16, "Channels of the CNN's first stage (the second has twice as many).");

namespace {

void put_bytes(std::ostream& out, const std::string& bytes) {
  const uint64_t n = bytes.size();
  ddpx::little_endian::put_u64(out, n);
  out.write(bytes.data(), static_cast<std::streamsize>(n));
}

absl::StatusOr<std::string> get_bytes(std::istream& in, const char* what) {
  uint64_t n = 0;
  if (!ddpx::little_endian::get_u64(in, &n)) {
    return absl::DataLossError(absl::StrCat(what, ": length missing"));
  }
  if (n > (uint64_t{1} << 34)) return absl::DataLossError(absl::StrCat(what, ": length ", n));
  std::string bytes(n, '\0');
  if (!in.read(bytes.data(), static_cast<std::streamsize>(n))) {
    return absl::DataLossError(absl::StrCat(what, ": ", n, " bytes announced, fewer follow"));
  }
  return bytes;
}

// The model and optimizer in state.bin: each a libtorch archive (zip),
// length-prefixed. Loading copies into the existing parameters (an archive
// loaded into a module directly would swap their storage, which the DDP
// wrapping them reports as a module changed after wrapping).
class TorchTrainState : public ddpx::trainer::TrainState {
 public:
  TorchTrainState(ddpx::examples::ResidualCnn model, torch::optim::Optimizer& optimizer,
                  int64_t width)
      : model_(std::move(model)), optimizer_(optimizer), width_(width) {}

  absl::Status save_model(std::ostream& out) const override {
    return save([&](torch::serialize::OutputArchive& a) { model_->save(a); }, out);
  }
  absl::Status save_optimizer(std::ostream& out) const override {
    return save([&](torch::serialize::OutputArchive& a) { optimizer_.save(a); }, out);
  }
  absl::Status load_model(std::istream& in) override {
    return load(in, "model", [&](torch::serialize::InputArchive& a) {
      ddpx::examples::ResidualCnn loaded(width_);
      loaded->load(a);
      torch::NoGradGuard no_grad;
      auto copy = [](std::vector<at::Tensor> to, std::vector<at::Tensor> from) {
        if (to.size() != from.size()) throw std::runtime_error("model: different tensor count");
        for (size_t i = 0; i < to.size(); ++i) to[i].copy_(from[i]);
      };
      copy(model_->parameters(), loaded->parameters());
      copy(model_->buffers(), loaded->buffers());
    });
  }
  // CRC32C of the parameters' bytes, to compare ranks bit for bit after a
  // membership change (tests/elastic). Not the buffers: BatchNorm's running
  // statistics follow each rank's own batches.
  uint32_t parameters_crc32c() const {
    std::string bytes;
    for (const at::Tensor& p : model_->parameters()) {
      const at::Tensor c = p.detach().contiguous();
      bytes.append(static_cast<const char*>(c.data_ptr()), c.nbytes());
    }
    return ddpx::trainer::crc32c(bytes);
  }
  absl::Status load_optimizer(std::istream& in) override {
    return load(in, "optimizer",
                [&](torch::serialize::InputArchive& a) { optimizer_.load(a); });
  }

 private:
  template <typename F>
  static absl::Status save(F write, std::ostream& out) {
    try {
      torch::serialize::OutputArchive archive;
      write(archive);
      std::ostringstream bytes;
      archive.save_to(bytes);
      put_bytes(out, bytes.str());
      return absl::OkStatus();
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat("saving a libtorch archive: ", e.what()));
    }
  }
  template <typename F>
  static absl::Status load(std::istream& in, const char* what, F read) {
    absl::StatusOr<std::string> bytes = get_bytes(in, what);
    if (!bytes.ok()) return bytes.status();
    try {
      std::istringstream stream(*bytes);
      torch::serialize::InputArchive archive;
      archive.load_from(stream);
      read(archive);
      return absl::OkStatus();
    } catch (const std::exception& e) {
      return absl::InvalidArgumentError(absl::StrCat("loading the ", what, ": ", e.what()));
    }
  }

  ddpx::examples::ResidualCnn model_;
  torch::optim::Optimizer& optimizer_;
  int64_t width_;
};

// The checkpoint code's view of DDP: its state (bucket layout, hook state)
// per rank, and the step's statistics.
class TorchDdpSync : public ddpx::trainer::GradientSync {
 public:
  TorchDdpSync(ddpx::torch::DistributedDataParallel& ddp, std::string hook)
      : ddp_(ddp), hook_(std::move(hook)) {}
  std::string describe() const override { return "ddpx::torch DDP + " + hook_; }
  absl::Status prepare() override { return absl::OkStatus(); }
  void mark_ready(size_t) override {}
  absl::Status finish() override { return absl::OkStatus(); }
  ddpx::trainer::SyncStats last_stats() const override {
    const ddpx::ReducerStats& s = ddp_.stats();
    ddpx::trainer::SyncStats out;
    out.gradient_bytes = s.gradient_bytes;
    out.bytes_communicated = s.bytes_communicated;
    out.compression_ratio = s.compression_ratio;
    out.comm_wait_seconds = s.comm_wait_seconds;
    out.num_buckets = s.num_buckets;
    return out;
  }
  absl::Status save_state(std::ostream& out) const override { return ddp_.save_state(out); }
  absl::Status load_state(std::istream& in) override { return ddp_.load_state(in); }
  int64_t hook_iteration() const override { return ddp_.hook_iteration(); }

 private:
  ddpx::torch::DistributedDataParallel& ddp_;
  std::string hook_;
};

// A Fashion-MNIST split as [n, 1, 28, 28] float images and int64 labels.
absl::StatusOr<std::pair<at::Tensor, at::Tensor>> load_split(const std::string& dir,
                                                             ddpx::data::Split split,
                                                             int64_t limit) {
  absl::StatusOr<ddpx::data::Dataset> d = ddpx::data::load_fashion_mnist(dir, split, limit);
  if (!d.ok()) return d.status();
  at::Tensor images =
      at::from_blob(d->images.data(), {d->size, 1, 28, 28}, at::kFloat).clone();
  at::Tensor labels = at::from_blob(d->labels.data(), {d->size}, at::kInt).to(at::kLong);
  return std::make_pair(images, labels);
}

// The residual CNN behind the training loop (examples/trainer/train_step.h):
// a batch is gathered from the training tensors by index; DDP averages the
// gradients during backward (its autograd hooks), so the GradientSync is
// only the checkpoints' and statistics' view of it. libtorch's exceptions
// become errors naming the rank.
class CnnStep : public ddpx::trainer::TrainStep {
 public:
  static absl::StatusOr<std::unique_ptr<CnnStep>> create(
      const ddpx::trainer::TrainerFlags& flags, int64_t width,
      std::shared_ptr<ddpx::ProcessGroup> pg) {
    auto train = load_split(flags.data_dir, ddpx::data::Split::kTrain,
                            flags.train_limit > 0 ? flags.train_limit : -1);
    if (!train.ok()) return train.status();
    auto test = load_split(flags.data_dir, ddpx::data::Split::kTest, -1);
    if (!test.ok()) return test.status();
    torch::manual_seed(flags.seed);
    ddpx::examples::ResidualCnn model(width);
    std::unique_ptr<CnnStep> step(new CnnStep(flags, width, std::move(model),
                                              *std::move(train), *std::move(test)));
    if (pg != nullptr) {
      absl::StatusOr<std::unique_ptr<ddpx::trainer::GradientSync>> old =
          step->reset_sync(std::move(pg));
      if (!old.ok()) return old.status();
    }
    return step;
  }

  // DDP over `pg` (collective). The DDP it replaces goes first, here: its
  // autograd hooks must not fire in the next backward.
  absl::StatusOr<std::unique_ptr<ddpx::trainer::GradientSync>> reset_sync(
      std::shared_ptr<ddpx::ProcessGroup> pg) override {
    sync_.reset();
    ddp_.reset();
    rank_ = pg->rank();
    auto ddp = ddpx::torch::DistributedDataParallel::create(model_, std::move(pg), ddp_options_);
    if (!ddp.ok()) {
      return absl::Status(ddp.status().code(),
                          absl::StrCat("rank ", rank_, ": ", ddp.status().message()));
    }
    ddp_ = *std::move(ddp);
    sync_ = std::make_unique<TorchDdpSync>(*ddp_, hook_);
    return std::unique_ptr<ddpx::trainer::GradientSync>();
  }

  std::string describe() const override {
    return absl::StrCat("ResidualCNN(width ", width_, ")");
  }
  int64_t num_parameters() const override {
    int64_t n = 0;
    for (const at::Tensor& p : model_->parameters()) n += p.numel();
    return n;
  }
  int64_t train_size() const override { return train_images_.size(0); }
  int64_t test_size() const override { return test_images_.size(0); }

  absl::StatusOr<double> step(const int64_t* samples, int64_t batch, float lr) override {
    try {
      const at::Tensor idx =
          at::from_blob(const_cast<int64_t*>(samples), {batch}, at::kLong);
      const at::Tensor x = train_images_.index_select(0, idx);
      const at::Tensor y = train_labels_.index_select(0, idx);
      optimizer_.zero_grad(/*set_to_none=*/!zero_in_place_);
      at::Tensor loss = torch::nn::functional::cross_entropy(model_->forward(x), y);
      // DDP averages the gradients during backward; a failed collective
      // throws there, and the step is then voted down (elastic mode).
      absl::Status synced;
      try {
        loss.backward();
      } catch (const std::exception& e) {
        synced = absl::UnavailableError(absl::StrCat("rank ", rank_, ": backward: ", e.what()));
      }
      absl::StatusOr<bool> apply = commit(synced);
      if (!apply.ok()) return apply.status();
      if (!*apply) return absl::AbortedError("the step was not committed on every rank");
      for (auto& group : optimizer_.param_groups()) {
        static_cast<torch::optim::SGDOptions&>(group.options()).lr(lr);
      }
      optimizer_.step();
      return loss.item<double>();
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat("rank ", rank_, ": ", e.what()));
    }
  }

  absl::StatusOr<ddpx::trainer::EvalCounts> evaluate(int64_t begin, int64_t end) override {
    ddpx::trainer::EvalCounts counts;
    try {
      model_->eval();
      torch::NoGradGuard no_grad;
      for (int64_t s = begin; s < end; s += 500) {
        const int64_t e = std::min(end, s + 500);
        at::Tensor logits = model_->forward(test_images_.slice(0, s, e));
        at::Tensor y = test_labels_.slice(0, s, e);
        counts.correct += logits.argmax(1).eq(y).sum().item<double>();
        counts.loss_sum +=
            torch::nn::functional::cross_entropy(
                logits, y,
                torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                .item<double>();
      }
      model_->train();
    } catch (const std::exception& e) {
      model_->train();
      return absl::InternalError(absl::StrCat("rank ", rank_, ": evaluation: ", e.what()));
    }
    return counts;
  }

  ddpx::trainer::TrainState& state() override { return state_; }
  ddpx::trainer::GradientSync& sync() override { return *sync_; }

 private:
  CnnStep(const ddpx::trainer::TrainerFlags& flags, int64_t width,
          ddpx::examples::ResidualCnn model, std::pair<at::Tensor, at::Tensor> train,
          std::pair<at::Tensor, at::Tensor> test)
      : width_(width),
        zero_in_place_(flags.gradient_as_bucket_view),
        hook_(flags.loop.hook),
        train_images_(std::move(train.first)),
        train_labels_(std::move(train.second)),
        test_images_(std::move(test.first)),
        test_labels_(std::move(test.second)),
        model_(std::move(model)),
        optimizer_(model_->parameters(), torch::optim::SGDOptions(flags.loop.lr)
                                             .momentum(flags.momentum)
                                             .weight_decay(flags.weight_decay)),
        state_(model_, optimizer_, width) {
    ddp_options_.bucket_cap_mb = flags.bucket_cap_mb;
    ddp_options_.first_bucket_cap_mb = flags.first_bucket_cap_mb;
    ddp_options_.gradient_as_bucket_view = flags.gradient_as_bucket_view;
    ddp_options_.hook = flags.loop.hook;
    model_->train();
  }

  const int64_t width_;
  int rank_ = -1;
  const bool zero_in_place_;  // gradients are bucket views: zero them, keep them
  const std::string hook_;
  ddpx::torch::DDPOptions ddp_options_;
  at::Tensor train_images_, train_labels_, test_images_, test_labels_;
  ddpx::examples::ResidualCnn model_;
  std::unique_ptr<ddpx::torch::DistributedDataParallel> ddp_;
  torch::optim::SGD optimizer_;
  TorchTrainState state_;
  std::unique_ptr<TorchDdpSync> sync_;
};

int fail(const std::string& message, int code = 1) {
  fprintf(stderr, "train: %s\n", message.c_str());
  return code;
}

// --elastic (docs/elastic.md): the data and model first, then the job; DDP
// is built per generation (examples/trainer/elastic_membership.h).
int run_elastic(const ddpx::InitOptions& init, const ddpx::trainer::TrainerFlags& flags,
                int64_t width) {
  absl::StatusOr<std::unique_ptr<CnnStep>> step = CnnStep::create(flags, width, nullptr);
  if (!step.ok()) return fail(step.status().ToString());
  absl::StatusOr<std::unique_ptr<ddpx::elastic::ElasticGroup>> group =
      ddpx::trainer::join_elastic_job(init);
  if (!group.ok()) {
    return fail(std::string(group.status().message()),
                group.status().code() == absl::StatusCode::kFailedPrecondition ? 3 : 1);
  }
  ddpx::trainer::ElasticMembership world(**group);
  absl::StatusOr<ddpx::trainer::TrainSummary> summary =
      ddpx::trainer::train(flags.loop, world, **step);
  if (!summary.ok()) {
    return fail(absl::StrCat("member ", (*group)->member_id(), ": ", summary.status().message()),
                summary.status().code() == absl::StatusCode::kFailedPrecondition ? 3 : 1);
  }
  printf("member %lld rank %d: parameters crc32c 0x%08x\n", (long long)(*group)->member_id(),
         (*group)->rank(),
         static_cast<TorchTrainState&>((*step)->state()).parameters_crc32c());
  if ((*group)->rank() == 0) {
    printf("done: %lld steps, test accuracy %.2f%%, %.1f s, %d ranks at the end (generation "
           "%lld)\n",
           (long long)summary->steps, 100 * summary->final_test_accuracy, summary->wall_seconds,
           (*group)->size(), (long long)(*group)->generation());
  }
  fflush(stdout);
  (*group)->finish();
  step->reset();  // DDP before its process group
  group->reset();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Data-parallel training of a libtorch CNN on Fashion-MNIST with ddpx's DDP.\n"
      "  train --nproc=2 --model=cnn --hook=powersgd:rank=2,start_iter=10");
  // The CNN needs 5 epochs for 91% test accuracy with the cosine schedule
  // (3 give 90.1-90.4%; an epoch takes far longer than the MLP's), and a
  // learning rate of 0.02: at 0.05 its flattened head blows up in the first
  // steps. Its DDP keeps torch's DistributedDataParallel default
  // (gradient_as_bucket_view off), so a run matches torch's DDP with
  // default options.
  ddpx::trainer::set_model_defaults({/*epochs=*/5, /*lr=*/0.02, /*lr_schedule=*/"cosine",
                                     /*gradient_as_bucket_view=*/false});
  absl::ParseCommandLine(argc, argv);
  if (std::optional<int> launched = ddpx::trainer::launch_elastic_unless_rank(argc, argv)) {
    return *launched;
  }
  if (std::optional<int> launched = ddpx::trainer::launch_unless_rank(argc, argv)) {
    return *launched;
  }
  if (absl::GetFlag(FLAGS_model) != "cnn") {
    return fail("--model=" + absl::GetFlag(FLAGS_model) + ": expected cnn", 2);
  }
  const int64_t width = absl::GetFlag(FLAGS_width);
  if (width <= 0) return fail("--width must be positive", 2);

  absl::StatusOr<ddpx::InitOptions> init_or = ddpx::trainer::init_options_from_flags();
  if (!init_or.ok()) return fail(std::string(init_or.status().message()), 2);
  ddpx::InitOptions init = *std::move(init_or);
  // What every rank must agree on, refused at rendezvous naming the flag.
  init.job_settings =
      ddpx::trainer::job_settings_from_flags("examples/torch/train", {"model", "width"});
  absl::StatusOr<ddpx::trainer::TrainerFlags> flags =
      ddpx::trainer::trainer_flags(init, "ddp", "cnn");
  if (!flags.ok()) return fail(std::string(flags.status().message()), 2);
  torch::set_num_threads(flags->threads);
  openblas_set_num_threads(flags->threads);

  if (ddpx::trainer::elastic_mode()) return run_elastic(init, *flags, width);

  absl::StatusOr<std::shared_ptr<ddpx::ProcessGroup>> pg = ddpx::init_process_group(init);
  if (!pg.ok()) {
    return fail(absl::StrCat("init_process_group(", init.backend, ", ", init.init_method,
                             ") failed: ", pg.status().ToString()));
  }
  const int rank = (*pg)->rank();
  absl::StatusOr<std::unique_ptr<CnnStep>> step = CnnStep::create(*flags, width, *pg);
  if (!step.ok()) return fail(step.status().ToString());
  absl::StatusOr<ddpx::trainer::TrainSummary> summary =
      ddpx::trainer::train(flags->loop, *pg, **step);
  if (!summary.ok()) return fail(summary.status().ToString());
  if (rank == 0) {
    printf("done: %lld steps, test accuracy %.2f%%, %.1f s\n", (long long)summary->steps,
           100 * summary->final_test_accuracy, summary->wall_seconds);
  }
  step->reset();  // DDP before its process group
  ddpx::destroy_process_group();
  if (rank == 0 && init.init_method.rfind("file://", 0) == 0) {
    unlink(init.init_method.substr(strlen("file://")).c_str());
  }
  return 0;
}
