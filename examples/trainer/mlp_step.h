// examples:train's model behind the training loop (train_step.h): an MLP
// (examples/nn) on Fashion-MNIST's flattened images, SGD, and a
// GradientSync (DDP + hook, or the per-parameter baseline) that the model's
// backward feeds gradient by gradient.
#ifndef DDPX_EXAMPLES_TRAINER_MLP_STEP_H_
#define DDPX_EXAMPLES_TRAINER_MLP_STEP_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "examples/data/fashion_mnist.h"
#include "examples/nn/mlp.h"
#include "examples/nn/sgd.h"
#include "examples/trainer/train_step.h"
#include "process_group/front_end/process_group.h"

namespace ddpx::trainer {

// Builds the gradient synchronization for the model once it exists.
using SyncFactory = std::function<absl::StatusOr<std::unique_ptr<GradientSync>>(
    nn::Mlp& model, std::shared_ptr<ProcessGroup> pg)>;

struct MlpOptions {
  std::string data_dir;
  int64_t train_limit = -1;  // use only the first N training samples (-1: all)
  std::vector<int64_t> hidden = {2048, 2048};
  uint64_t seed = 0;         // the weights' initialization
  float lr = 0.05f;          // the optimizer's initial rate (the loop sets each step's)
  float momentum = 0.9f;
  float weight_decay = 0.0f;
};

class MlpStep : public TrainStep {
 public:
  // Loads the data, builds the model, its optimizer and (make_sync) its
  // gradient synchronization; with a null `pg` the synchronization waits
  // for reset_sync (elastic training builds it per generation).
  static absl::StatusOr<std::unique_ptr<MlpStep>> create(const MlpOptions& options,
                                                         std::shared_ptr<ProcessGroup> pg,
                                                         const SyncFactory& make_sync);

  std::string describe() const override;
  int64_t num_parameters() const override { return model_.num_parameters(); }
  int64_t train_size() const override { return train_.size; }
  int64_t test_size() const override { return test_.size; }
  absl::StatusOr<double> step(const int64_t* samples, int64_t batch, float lr) override;
  absl::StatusOr<EvalCounts> evaluate(int64_t begin, int64_t end) override;
  TrainState& state() override { return state_; }
  GradientSync& sync() override { return *sync_; }
  absl::StatusOr<std::unique_ptr<GradientSync>> reset_sync(
      std::shared_ptr<ProcessGroup> pg) override;

 private:
  MlpStep(const MlpOptions& options, data::Dataset train, data::Dataset test);

  data::Dataset train_;
  data::Dataset test_;
  nn::Mlp model_;
  nn::Sgd optimizer_;
  MlpTrainState state_;
  SyncFactory make_sync_;
  std::unique_ptr<GradientSync> sync_;
  std::vector<float> x_;    // the batch's images, gathered
  std::vector<int32_t> y_;  // and labels
};

// "2048,2048" -> {2048, 2048}; "" -> {} (a linear model). Errors name the
// bad element.
absl::StatusOr<std::vector<int64_t>> parse_hidden(const std::string& text);

}  // namespace ddpx::trainer

#endif  // DDPX_EXAMPLES_TRAINER_MLP_STEP_H_
