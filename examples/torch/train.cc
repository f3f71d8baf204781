// examples/torch:train: data-parallel training of a libtorch model (the
// residual CNN of cnn.h) on Fashion-MNIST with ddpx::torch::DistributedDataParallel.
//
//   bazel run //examples/torch:train -- --nproc=2 --model=cnn --hook=powersgd:rank=2,start_iter=10
//   srun -n 4 .bazel/bin/examples/torch/train --init=env://
//   torchrun --no-python --nproc-per-node=2 .bazel/bin/examples/torch/train --init=env://
//
// The same launch (--nproc, or a launcher's environment), rendezvous
// (env://, tcp://, file://, SLURM, torchrun), checkpoints (one atomic unit
// across ranks, examples/trainer/checkpoint.h), metrics JSON lines and
// progress lines as examples:train (the MLP trainer). The model and its
// optimizer (torch::optim::SGD with momentum) are libtorch's; DDP is ddpx's,
// with any registry hook (--hook) over any ddpx backend (--backend).
#include <cblas.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>
#include <torch/serialize/archive.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "examples/data/fashion_mnist.h"
#include "examples/data/sampler.h"
#include "examples/torch/cnn.h"
#include "examples/trainer/checkpoint.h"
#include "examples/trainer/cli.h"
#include "examples/trainer/launch_flags.h"
#include "examples/trainer/lr_schedule.h"
#include "examples/trainer/metrics.h"
#include "process_group/rendezvous/init.h"
#include "reducer/torch/distributed_data_parallel.h"

ABSL_FLAG(std::string, model, "cnn", "Model: cnn (the residual CNN of examples/torch/cnn.h).");
ABSL_FLAG(int64_t, width, 16, "Channels of the CNN's first stage (the second has twice as many).");
ABSL_FLAG(int64_t, epochs, 5,
          "Epochs over the training set (5: 91% test accuracy with the default cosine "
          "schedule, a full point above 90%; 3 gives 90.1-90.4%).");
ABSL_FLAG(int64_t, batch_size, 64, "Samples per rank per step.");
ABSL_FLAG(double, lr, 0.02,
          "SGD learning rate (0.05 makes the flattened head blow up in the first steps).");
ABSL_FLAG(std::string, lr_schedule, "cosine",
          "cosine: lr decays per step to 0 at the end of --epochs (or --max_steps); "
          "constant.");
ABSL_FLAG(double, momentum, 0.9, "SGD momentum.");
ABSL_FLAG(double, weight_decay, 0.0, "SGD weight decay (L2).");
ABSL_FLAG(double, bucket_cap_mb, 25.0, "DDP bucket size cap in MiB.");
ABSL_FLAG(double, first_bucket_cap_mb, 1.0, "Cap of DDP's first bucket in MiB.");
ABSL_FLAG(bool, gradient_as_bucket_view, false,
          "Gradients live inside DDP's bucket buffers (torch's option of the same name).");
ABSL_FLAG(uint64_t, seed, 0, "Seed for initialization and data order.");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "Save model, optimizer and DDP/hook state here each epoch and at the end; "
          "resume from it when it holds a checkpoint.");
ABSL_FLAG(int64_t, checkpoint_every, 0, "Also checkpoint every N steps (0: off).");
ABSL_FLAG(int, keep_checkpoints, 2, "Complete checkpoints kept in --checkpoint_dir.");
ABSL_FLAG(std::string, resume, "latest",
          "latest: resume from the checkpoint --checkpoint_dir/latest names; auto: fall back "
          "to the newest older complete checkpoint that validates.");
ABSL_FLAG(bool, reset_hook_state, false,
          "Resume without the checkpoint's hook state (needed to resume with another --hook).");
ABSL_FLAG(std::string, metrics_out, "", "Append JSON lines (per step, per epoch) here.");
ABSL_FLAG(int64_t, max_steps, -1, "Stop after this many steps in all (-1: no limit).");
ABSL_FLAG(int64_t, train_limit, -1, "Train on the first N images only (-1: all).");
ABSL_FLAG(int64_t, log_every, 50, "Progress line every N steps.");
ABSL_FLAG(int64_t, eval_every, 0,
          "Also measure test accuracy every N steps (0: at the end of each epoch only).");
ABSL_FLAG(std::string, data_dir, ddpx::data::kDefaultFashionMnistDir,
          "Folder holding Fashion-MNIST's IDX .gz files.");
ABSL_FLAG(int, threads, 0, "torch (and OpenBLAS) threads per rank (0: cores / local ranks).");

namespace {

using Clock = std::chrono::steady_clock;
using ddpx::trainer::Progress;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

void put_bytes(std::ostream& out, const std::string& bytes) {
  uint64_t n = bytes.size();
  char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>(n >> (8 * i));
  out.write(b, 8);
  out.write(bytes.data(), static_cast<std::streamsize>(n));
}

absl::StatusOr<std::string> get_bytes(std::istream& in, const char* what) {
  unsigned char b[8];
  if (!in.read(reinterpret_cast<char*>(b), 8)) {
    return absl::DataLossError(absl::StrCat(what, ": length missing"));
  }
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t{b[i]} << (8 * i);
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

struct Evaluation {
  double accuracy = 0;
  double loss = 0;
};

// Every rank evaluates a slice of the test set; one allreduce sums the counts.
absl::StatusOr<Evaluation> evaluate(ddpx::examples::ResidualCnn& model, const at::Tensor& images,
                                    const at::Tensor& labels, ddpx::ProcessGroup& pg) {
  const int64_t n = images.size(0);
  const int64_t begin = n * pg.rank() / pg.size();
  const int64_t end = n * (pg.rank() + 1) / pg.size();
  double correct = 0, loss_sum = 0;
  model->eval();
  {
    torch::NoGradGuard no_grad;
    for (int64_t s = begin; s < end; s += 500) {
      const int64_t e = std::min(end, s + 500);
      at::Tensor logits = model->forward(images.slice(0, s, e));
      at::Tensor y = labels.slice(0, s, e);
      correct += logits.argmax(1).eq(y).sum().item<double>();
      loss_sum += torch::nn::functional::cross_entropy(
                      logits, y, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum))
                      .item<double>();
    }
  }
  model->train();
  ddpx::Tensor sums = ddpx::Tensor::from_vector<double>({correct, loss_sum});
  if (absl::Status s = pg.allreduce({sums})->wait(); !s.ok()) return s;
  return Evaluation{sums.item(0) / n, sums.item(1) / n};
}

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

int fail(const std::string& message, int code = 1) {
  fprintf(stderr, "train: %s\n", message.c_str());
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Data-parallel training of a libtorch CNN on Fashion-MNIST with ddpx's DDP.\n"
      "  train --nproc=2 --model=cnn --hook=powersgd:rank=2,start_iter=10");
  absl::ParseCommandLine(argc, argv);
  if (std::optional<int> launched = ddpx::trainer::launch_unless_rank(argc, argv)) {
    return *launched;
  }
  if (absl::GetFlag(FLAGS_model) != "cnn") {
    return fail("--model=" + absl::GetFlag(FLAGS_model) + ": expected cnn", 2);
  }
  int threads = absl::GetFlag(FLAGS_threads);
  if (threads <= 0) {
    threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) /
                              ddpx::trainer::local_world_size());
  }
  torch::set_num_threads(threads);
  openblas_set_num_threads(threads);

  absl::StatusOr<ddpx::InitOptions> init_or = ddpx::trainer::init_options_from_flags();
  if (!init_or.ok()) return fail(std::string(init_or.status().message()), 2);
  ddpx::InitOptions init = *std::move(init_or);
  // What every rank must agree on, refused at rendezvous naming the flag.
  init.job_settings =
      ddpx::trainer::job_settings_from_flags("examples/torch/train", {"model", "width"});
  absl::StatusOr<std::shared_ptr<ddpx::ProcessGroup>> pg_or = ddpx::init_process_group(init);
  if (!pg_or.ok()) {
    return fail(absl::StrCat("init_process_group(", init.backend, ", ", init.init_method,
                             ") failed: ", pg_or.status().ToString()));
  }
  std::shared_ptr<ddpx::ProcessGroup> pg = *pg_or;
  const int rank = pg->rank();
  const int world = pg->size();
  const bool lead = rank == 0;

  const std::string hook = absl::GetFlag(FLAGS_hook);
  absl::StatusOr<std::string> identity = ddpx::trainer::hook_identity("ddp", hook);
  if (!identity.ok()) return fail(std::string(identity.status().message()), 2);
  absl::StatusOr<ddpx::trainer::LrSchedule> schedule =
      ddpx::trainer::parse_lr_schedule(absl::GetFlag(FLAGS_lr_schedule));
  if (!schedule.ok()) return fail(schedule.status().ToString(), 2);
  absl::StatusOr<ddpx::trainer::ResumeMode> resume_mode =
      ddpx::trainer::parse_resume_mode(absl::GetFlag(FLAGS_resume));
  if (!resume_mode.ok()) return fail(std::string(resume_mode.status().message()), 2);
  const int64_t batch_size = absl::GetFlag(FLAGS_batch_size);
  const int64_t epochs = absl::GetFlag(FLAGS_epochs);
  const int64_t max_steps = absl::GetFlag(FLAGS_max_steps);
  const int64_t width = absl::GetFlag(FLAGS_width);
  const float base_lr = static_cast<float>(absl::GetFlag(FLAGS_lr));
  if (batch_size <= 0 || width <= 0) return fail("--batch_size and --width must be positive", 2);

  const std::string data_dir = absl::GetFlag(FLAGS_data_dir);
  const int64_t limit = absl::GetFlag(FLAGS_train_limit);
  auto train_set = load_split(data_dir, ddpx::data::Split::kTrain, limit > 0 ? limit : -1);
  if (!train_set.ok()) return fail(train_set.status().ToString());
  auto test_set = load_split(data_dir, ddpx::data::Split::kTest, -1);
  if (!test_set.ok()) return fail(test_set.status().ToString());
  const at::Tensor& train_images = train_set->first;
  const at::Tensor& train_labels = train_set->second;

  torch::manual_seed(absl::GetFlag(FLAGS_seed));
  ddpx::examples::ResidualCnn model(width);
  ddpx::torch::DDPOptions ddp_options;
  ddp_options.bucket_cap_mb = absl::GetFlag(FLAGS_bucket_cap_mb);
  ddp_options.first_bucket_cap_mb = absl::GetFlag(FLAGS_first_bucket_cap_mb);
  ddp_options.gradient_as_bucket_view = absl::GetFlag(FLAGS_gradient_as_bucket_view);
  ddp_options.hook = hook;
  auto ddp_or = ddpx::torch::DistributedDataParallel::create(model, pg, ddp_options);
  if (!ddp_or.ok()) return fail(absl::StrCat("rank ", rank, ": ", ddp_or.status().ToString()));
  ddpx::torch::DistributedDataParallel& ddp = **ddp_or;
  torch::optim::SGD optimizer(model->parameters(),
                              torch::optim::SGDOptions(base_lr)
                                  .momentum(absl::GetFlag(FLAGS_momentum))
                                  .weight_decay(absl::GetFlag(FLAGS_weight_decay)));
  TorchTrainState train_state(model, optimizer, width);
  TorchDdpSync sync(ddp, hook);

  ddpx::data::DistributedSampler sampler(train_images.size(0), rank, world,
                                         absl::GetFlag(FLAGS_seed));
  const int64_t steps_per_epoch = (sampler.shard_size() + batch_size - 1) / batch_size;
  Progress progress;
  progress.world_size = world;
  progress.steps_per_epoch = steps_per_epoch;
  ddpx::trainer::CheckpointOptions ckpt;
  ckpt.dir = absl::GetFlag(FLAGS_checkpoint_dir);
  ckpt.keep = absl::GetFlag(FLAGS_keep_checkpoints);
  ckpt.resume = *resume_mode;
  ckpt.reset_hook_state = absl::GetFlag(FLAGS_reset_hook_state);
  ckpt.hook = *identity;
  ckpt.job_id = init.job_id;
  ckpt.epochs = epochs;
  ckpt.steps_per_epoch = steps_per_epoch;
  int64_t last_checkpoint_step = -1;
  if (!ckpt.dir.empty()) {
    auto resumed = ddpx::trainer::resume_from_checkpoint(ckpt, *pg, train_state, sync);
    if (!resumed.ok()) return fail(absl::StrCat("rank ", rank, ": ", resumed.status().ToString()));
    if (resumed->has_value()) {
      progress = **resumed;
      last_checkpoint_step = progress.global_step;
      if (lead) {
        printf("resumed from %s/%s: epoch %lld, step %lld%s\n", ckpt.dir.c_str(),
               ddpx::trainer::step_dir_name(progress.global_step).c_str(),
               (long long)progress.epoch + 1, (long long)progress.global_step,
               ckpt.reset_hook_state ? " (hook state reset: --reset_hook_state)" : "");
      }
    }
  }

  ddpx::trainer::MetricsWriter metrics;
  if (lead) {
    if (absl::Status s = metrics.open(absl::GetFlag(FLAGS_metrics_out)); !s.ok()) {
      return fail(s.ToString());
    }
  }
  int64_t total_steps = epochs * steps_per_epoch;
  if (max_steps >= 0) total_steps = std::min(total_steps, max_steps);
  int64_t num_parameters = 0;
  for (const at::Tensor& p : model->parameters()) num_parameters += p.numel();
  if (lead) {
    printf("training ResidualCNN(width %lld) (%lld parameters) on %lld Fashion-MNIST images, "
           "%d ranks x batch %lld, %lld steps/epoch, backend %s, %s, %d threads/rank\n",
           (long long)width, (long long)num_parameters, (long long)train_images.size(0), world,
           (long long)batch_size, (long long)steps_per_epoch, init.backend.c_str(),
           sync.describe().c_str(), threads);
    fflush(stdout);
  }

  const Clock::time_point run_start = Clock::now();
  auto wall = [&] { return progress.wall_seconds + seconds_since(run_start); };
  auto checkpoint = [&]() -> absl::Status {
    if (ckpt.dir.empty() || progress.global_step == last_checkpoint_step) return absl::OkStatus();
    Progress p = progress;
    p.wall_seconds = wall();
    absl::Status s = ddpx::trainer::save_checkpoint(ckpt, *pg, p, train_state, sync);
    if (s.ok()) last_checkpoint_step = progress.global_step;
    return s;
  };
  auto eval = [&]() { return evaluate(model, test_set->first, test_set->second, *pg); };

  ddpx::trainer::LiveLine live;
  ddpx::trainer::StepLog step_log(metrics, live, absl::GetFlag(FLAGS_log_every));
  const int64_t eval_every = absl::GetFlag(FLAGS_eval_every);
  const bool zero_in_place = ddp_options.gradient_as_bucket_view;
  bool stopped = false;
  bool evaluated = false;
  Evaluation last_eval;
  auto reached_max_steps = [&] { return max_steps >= 0 && progress.global_step >= max_steps; };
  try {
    model->train();
    while (progress.epoch < epochs && !reached_max_steps()) {
      const std::vector<int64_t> order = sampler.indices(progress.epoch);
      const at::Tensor order_t =
          at::from_blob(const_cast<int64_t*>(order.data()), {(int64_t)order.size()}, at::kLong);
      const Clock::time_point epoch_start = Clock::now();
      step_log.restart_window();
      for (; progress.step_in_epoch < steps_per_epoch; ++progress.step_in_epoch) {
        if (reached_max_steps()) {
          stopped = true;
          break;
        }
        const Clock::time_point step_start = Clock::now();
        const int64_t first = progress.step_in_epoch * batch_size;
        const int64_t batch = std::min<int64_t>(batch_size, sampler.shard_size() - first);
        const at::Tensor idx = order_t.slice(0, first, first + batch);
        const at::Tensor x = train_images.index_select(0, idx);
        const at::Tensor y = train_labels.index_select(0, idx);
        optimizer.zero_grad(/*set_to_none=*/!zero_in_place);
        at::Tensor loss = torch::nn::functional::cross_entropy(model->forward(x), y);
        loss.backward();  // DDP averages the gradients during backward
        const float lr = ddpx::trainer::learning_rate_at(*schedule, base_lr,
                                                         progress.global_step, total_steps);
        for (auto& group : optimizer.param_groups()) {
          static_cast<torch::optim::SGDOptions&>(group.options()).lr(lr);
        }
        optimizer.step();
        ++progress.global_step;
        const double loss_value = loss.item<double>();
        if (!std::isfinite(loss_value)) {
          return fail(absl::StrFormat("rank %d: loss is %f at step %lld (diverged; lower --lr?)",
                                      rank, loss_value, (long long)progress.global_step));
        }
        const double step_time = seconds_since(step_start);
        const ddpx::ReducerStats& st = ddp.stats();
        progress.epoch_loss_sum += loss_value;
        ++progress.epoch_loss_count;
        if (lead) {
          step_log.write({progress.epoch, epochs, progress.step_in_epoch, steps_per_epoch,
                          progress.global_step, world, batch, batch_size, loss_value, step_time,
                          st.comm_wait_seconds, st.bytes_communicated, st.gradient_bytes,
                          st.compression_ratio, static_cast<double>(lr), wall()});
        }
        if (eval_every > 0 && progress.global_step % eval_every == 0) {
          absl::StatusOr<Evaluation> e = eval();
          if (!e.ok()) return fail(e.status().ToString());
          if (lead) {
            live.finish();
            printf("step %lld: test loss %.4f | test accuracy %.2f%% | wall %.1f s\n",
                   (long long)progress.global_step, e->loss, 100 * e->accuracy, wall());
            metrics.write(ddpx::trainer::JsonLine()
                              .add("type", std::string("eval"))
                              .add("epoch", progress.epoch + 1)
                              .add("step", progress.global_step)
                              .add("test_loss", e->loss)
                              .add("test_acc", e->accuracy)
                              .add("wall_s", wall()));
          }
        }
        const int64_t every = absl::GetFlag(FLAGS_checkpoint_every);
        if (every > 0 && progress.global_step % every == 0 &&
            progress.step_in_epoch + 1 < steps_per_epoch) {
          progress.step_in_epoch += 1;  // the step just taken is part of the checkpoint
          absl::Status s = checkpoint();
          progress.step_in_epoch -= 1;
          if (!s.ok()) return fail(s.ToString());
        }
      }
      absl::StatusOr<Evaluation> e = eval();
      if (!e.ok()) return fail(e.status().ToString());
      last_eval = *e;
      evaluated = true;
      if (lead) {
        live.finish();
        const double epoch_time = seconds_since(epoch_start);
        const double train_loss = progress.epoch_loss_count
                                      ? progress.epoch_loss_sum / progress.epoch_loss_count
                                      : 0.0;
        metrics.write(ddpx::trainer::report_epoch({progress.epoch, progress.global_step, stopped,
                                                   train_loss, last_eval.loss,
                                                   last_eval.accuracy, epoch_time, wall()})
                          .add("hook", hook)
                          .add("backend", init.backend)
                          .add("model", std::string("cnn"))
                          .add("world_size", static_cast<int64_t>(world)));
      }
      if (stopped) break;
      ++progress.epoch;
      progress.step_in_epoch = 0;
      progress.epoch_loss_sum = 0;
      progress.epoch_loss_count = 0;
      if (absl::Status s = checkpoint(); !s.ok()) return fail(s.ToString());
    }
  } catch (const std::exception& e) {
    return fail(absl::StrCat("rank ", rank, ": ", e.what()));
  }
  if (stopped) {
    if (absl::Status s = checkpoint(); !s.ok()) return fail(s.ToString());
  }
  if (!evaluated) {
    absl::StatusOr<Evaluation> e = eval();
    if (!e.ok()) return fail(e.status().ToString());
    last_eval = *e;
    if (lead) printf("test accuracy %.2f%% (nothing left to train)\n", 100 * last_eval.accuracy);
  }
  // Leave together: a rank that exits while a peer still reads its last
  // collective can reset the connection under it.
  if (absl::Status s = pg->barrier()->wait(); !s.ok()) return fail(s.ToString());
  if (lead) {
    printf("done: %lld steps, test accuracy %.2f%%, %.1f s\n", (long long)progress.global_step,
           100 * last_eval.accuracy, wall());
  }
  ddp_or->reset();
  ddpx::destroy_process_group();
  if (rank == 0 && init.init_method.rfind("file://", 0) == 0) {
    unlink(init.init_method.substr(strlen("file://")).c_str());
  }
  return 0;
}
