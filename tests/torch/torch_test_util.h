// Shared by the libtorch DDP tests: ranks as threads of the test (each with
// a Gloo group, tests/rank_threads.h), one torch thread per rank,
// and the deterministic weights and batches of
// tests/reference/torch_ddp_goldens.py.
#ifndef DDPX_TESTS_TORCH_TORCH_TEST_UTIL_H_
#define DDPX_TESTS_TORCH_TORCH_TEST_UTIL_H_

#include <torch/nn/module.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "process_group/front_end/process_group.h"
#include "tests/rank_threads.h"

namespace ddpx::torch_testing {

// body(rank's group) on `world` threads; each uses one torch thread, so
// results do not depend on how many the machine has.
inline void run_ranks(int world, const std::function<void(std::shared_ptr<ProcessGroup>)>& body) {
  rank_threads::run_groups(world, [&](int, std::shared_ptr<ProcessGroup> pg) {
    at::set_num_threads(1);
    body(std::move(pg));
  });
}

// tests/reference/deterministic_init.py's init_value: element i of parameter k.
inline double init_value(int64_t k, int64_t i, const std::string& name,
                         const std::vector<int64_t>& shape) {
  const double v = static_cast<double>((i * 37 + k * 11) % 29 - 14) / 14.0;
  if (shape.size() > 1) {
    int64_t numel = 1;
    for (int64_t d : shape) numel *= d;
    return v / std::sqrt(static_cast<double>(numel / shape[0]));
  }
  if (name.size() >= 6 && name.compare(name.size() - 6, 6, "weight") == 0) return 1.0 + 0.1 * v;
  return 0.1 * v;
}

// Sets every parameter of `module` by init_value (named_parameters order).
inline void init_parameters(::torch::nn::Module& module) {
  ::torch::NoGradGuard no_grad;
  int64_t k = 0;
  for (const auto& item : module.named_parameters()) {
    at::Tensor p = item.value();
    std::vector<int64_t> shape = p.sizes().vec();
    at::Tensor v = at::empty({p.numel()}, at::kDouble);
    double* d = v.data_ptr<double>();
    for (int64_t i = 0; i < p.numel(); ++i) d[i] = init_value(k, i, item.key(), shape);
    p.copy_(v.to(at::kFloat).view(p.sizes()));
    ++k;
  }
}

// torch_ddp_goldens.py's batch(step, rank): [batch, 1, side, side] images
// and labels.
inline std::pair<at::Tensor, at::Tensor> golden_batch(int64_t batch, int64_t side, int64_t step,
                                                      int rank) {
  const int64_t n = batch * side * side;
  at::Tensor x = at::empty({n}, at::kDouble);
  double* d = x.data_ptr<double>();
  for (int64_t j = 0; j < n; ++j) d[j] = static_cast<double>((j * 13 + step * 7 + rank * 5) % 23 - 11) / 11.0;
  at::Tensor y = at::empty({batch}, at::kLong);
  for (int64_t b = 0; b < batch; ++b) y.data_ptr<int64_t>()[b] = (b * 3 + step + 2 * rank) % 10;
  return {x.to(at::kFloat).view({batch, 1, side, side}), y};
}

// Every parameter's gradient flattened, in named_parameters order (copied
// to the host for a CUDA module).
inline std::vector<float> flat_grads(::torch::nn::Module& module) {
  std::vector<float> out;
  for (const at::Tensor& p : module.parameters()) {
    at::Tensor g = (p.grad().defined() ? p.grad() : at::zeros_like(p)).to(at::kCPU).contiguous();
    const float* f = g.data_ptr<float>();
    out.insert(out.end(), f, f + g.numel());
  }
  return out;
}

// Every buffer as float (int64 counters included), in named_buffers order.
inline std::vector<float> flat_buffers(::torch::nn::Module& module) {
  std::vector<float> out;
  for (const at::Tensor& b : module.buffers()) {
    at::Tensor c = b.detach().to(at::kFloat).contiguous();
    out.insert(out.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
  }
  return out;
}

// Every parameter, then every buffer (flat_buffers).
inline std::vector<float> flat_parameters(::torch::nn::Module& module) {
  std::vector<float> out;
  for (const at::Tensor& p : module.parameters()) {
    at::Tensor c = p.detach().contiguous();
    out.insert(out.end(), c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
  }
  const std::vector<float> buffers = flat_buffers(module);
  out.insert(out.end(), buffers.begin(), buffers.end());
  return out;
}

// Runs `python3 <script> --out <dir>` (python3, or $PYTHON: it needs torch,
// which tools/setup installs) and returns <dir>, a folder under
// $TEST_TMPDIR named `name`; "" after a test failure that shows the
// script's output. The reference is torch's DDP run here, so its kernels
// are the ones this machine's libtorch runs too. A second try only for a
// run that failed outright (torch's own multiprocessing, not a result).
inline std::string run_torch_script(const std::string& script, const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string out = std::string(tmp ? tmp : "/tmp") + "/" + name;
  const char* python = std::getenv("PYTHON");
  const std::string command =
      std::string(python ? python : "python3") + " " + script + " --out " + out + " 2>&1";
  int rc = -1;
  for (int attempt = 1; attempt <= 2 && rc != 0; ++attempt) {
    FILE* p = popen(command.c_str(), "r");
    if (p == nullptr) {
      ADD_FAILURE() << "cannot start: " << command;
      return "";
    }
    std::string log;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) log.append(buf, n);
    rc = pclose(p);
    if (rc != 0) {
      std::fprintf(stderr, "attempt %d: %s failed (status %d):\n%s\n", attempt, command.c_str(),
                   rc, log.c_str());
    }
  }
  if (rc != 0) {
    ADD_FAILURE() << command << " failed twice (output above; torch's DDP must run here: "
                  << "tools/setup installs torch)";
    return "";
  }
  return out;
}

}  // namespace ddpx::torch_testing

#endif  // DDPX_TESTS_TORCH_TORCH_TEST_UTIL_H_
