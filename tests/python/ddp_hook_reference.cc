// The C++ side of //tests/python:ddp_hook_test: ddpx's own DDP for libtorch
// modules (reducer/torch) trains the MLP that the Python test trains with
// torch's DDP and ddpx_torch.register_comm_hook, with the same hook spec,
// weights, batches and optimizer, so the two runs of one hook can be
// compared parameter by parameter.
//
//   ddp_hook_reference --dir=DIR --hook=int8 --world=2 --steps=100 --batch=32 --hidden=64
//
// Reads DIR/init.f32 (every parameter of nn.Sequential(Linear(784, H), ReLU,
// Linear(H, 10)) flattened in named_parameters order), DIR/x.f32
// ([steps, world, batch, 784]) and DIR/y.i64 ([steps, world, batch]);
// ranks are threads of this process (tests/rank_threads.h), one torch thread
// each; each step is zero_grad, cross entropy, backward, SGD(lr, momentum).
// Writes DIR/final_rank<r>.f32 (the parameters after the last step) and
// DIR/losses_rank0.txt (one loss per step).
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "reducer/torch/distributed_data_parallel.h"
#include "tests/rank_threads.h"

ABSL_FLAG(std::string, dir, "", "folder with init.f32, x.f32, y.i64; results go there too");
ABSL_FLAG(std::string, hook, "allreduce", "hook spec (hooks/registry.h)");
ABSL_FLAG(int, world, 2, "ranks (threads)");
ABSL_FLAG(int, steps, 100, "training steps");
ABSL_FLAG(int, batch, 32, "batch per rank");
ABSL_FLAG(int, hidden, 64, "hidden width");
ABSL_FLAG(double, lr, 0.05, "SGD learning rate");
ABSL_FLAG(double, momentum, 0.9, "SGD momentum");
ABSL_FLAG(bool, zero_first_step, true,
          "one step with the loss times 0 first (tests/python/ddp_common.py's train)");

namespace {

[[noreturn]] void die(const std::string& message) {
  std::fprintf(stderr, "ddp_hook_reference: %s\n", message.c_str());
  std::exit(1);
}

template <typename T>
std::vector<T> read_file(const std::string& path, size_t count) {
  std::ifstream in(path, std::ios::binary);
  std::vector<T> out(count);
  if (!in.read(reinterpret_cast<char*>(out.data()), count * sizeof(T)) || in.peek() != EOF) {
    die(path + ": expected exactly " + std::to_string(count * sizeof(T)) + " bytes");
  }
  return out;
}

void write_file(const std::string& path, const void* data, size_t bytes) {
  std::ofstream out(path, std::ios::binary);
  if (!out.write(static_cast<const char*>(data), bytes)) die("cannot write " + path);
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string dir = absl::GetFlag(FLAGS_dir);
  const int world = absl::GetFlag(FLAGS_world), steps = absl::GetFlag(FLAGS_steps);
  const int64_t batch = absl::GetFlag(FLAGS_batch), hidden = absl::GetFlag(FLAGS_hidden);
  if (dir.empty()) die("--dir is required");
  const int64_t n_params = 784 * hidden + hidden + hidden * 10 + 10;
  const std::vector<float> init = read_file<float>(dir + "/init.f32", n_params);
  std::vector<float> xs = read_file<float>(dir + "/x.f32", int64_t{steps} * world * batch * 784);
  std::vector<int64_t> ys = read_file<int64_t>(dir + "/y.i64", int64_t{steps} * world * batch);

  ddpx::rank_threads::run_groups(world, [&](int rank, std::shared_ptr<ddpx::ProcessGroup> pg) {
    at::set_num_threads(1);
    torch::nn::Sequential model(torch::nn::Linear(784, hidden), torch::nn::ReLU(),
                                torch::nn::Linear(hidden, 10));
    {
      torch::NoGradGuard no_grad;
      int64_t offset = 0;
      for (auto& p : model->parameters()) {
        p.copy_(torch::from_blob(const_cast<float*>(init.data()) + offset, p.sizes()));
        offset += p.numel();
      }
    }
    ddpx::torch::DDPOptions options;
    options.hook = absl::GetFlag(FLAGS_hook) == "allreduce" ? "" : absl::GetFlag(FLAGS_hook);
    auto ddp = ddpx::torch::DistributedDataParallel::create(model, pg, options);
    if (!ddp.ok()) die("rank " + std::to_string(rank) + ": " + std::string(ddp.status().message()));
    torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(absl::GetFlag(FLAGS_lr))
                                                   .momentum(absl::GetFlag(FLAGS_momentum)));
    std::vector<double> losses;
    if (absl::GetFlag(FLAGS_zero_first_step)) {
      at::Tensor x = torch::from_blob(xs.data() + int64_t{rank} * batch * 784, {batch, 784});
      at::Tensor y = torch::from_blob(ys.data() + int64_t{rank} * batch, {batch}, torch::kLong);
      opt.zero_grad();
      (torch::nn::functional::cross_entropy(model->forward(x), y) * 0).backward();
      opt.step();
    }
    for (int s = 0; s < steps; ++s) {
      const int64_t row = (int64_t{s} * world + rank) * batch;
      at::Tensor x = torch::from_blob(xs.data() + row * 784, {batch, 784});
      at::Tensor y = torch::from_blob(ys.data() + row, {batch}, torch::kLong);
      opt.zero_grad();
      at::Tensor loss = torch::nn::functional::cross_entropy(model->forward(x), y);
      loss.backward();
      opt.step();
      losses.push_back(loss.item<double>());
    }
    std::vector<float> final_params;
    for (auto& p : model->parameters()) {
      at::Tensor flat = p.detach().contiguous().view(-1);
      final_params.insert(final_params.end(), flat.data_ptr<float>(),
                          flat.data_ptr<float>() + flat.numel());
    }
    write_file(dir + "/final_rank" + std::to_string(rank) + ".f32", final_params.data(),
               final_params.size() * sizeof(float));
    if (rank == 0) {
      std::ofstream out(dir + "/losses_rank0.txt");
      out.precision(9);
      for (double l : losses) out << l << "\n";
    }
  });
  return 0;
}
