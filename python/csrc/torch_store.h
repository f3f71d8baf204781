// ddpx::Store over the c10d::Store torch hands a backend.
//
// torch gives each group's backend a PrefixStore ("<group>/<device>/") over
// the job's store, which may be a TCPStore, a FileStore, a HashStore or the
// torchrun agent's store. Calling that store, rather than connecting ddpx's
// own TCPStore client to the same server, works with every kind, keeps
// torch's key prefix, and needs no second connection per group. ddpx uses
// the store at rendezvous (addresses, host identities) and for its flight
// recorder's peer exchange, not per op, so the extra virtual call costs
// nothing that matters.
//
// Exceptions from torch's store become statuses: a wait that expires is
// DeadlineExceeded naming the keys and the timeout (wait_timeout_error), a
// lost connection Unavailable.
#ifndef DDPX_PYTHON_CSRC_TORCH_STORE_H_
#define DDPX_PYTHON_CSRC_TORCH_STORE_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "store/store.h"

namespace ddpx_torch {

class TorchStore : public ddpx::Store {
 public:
  explicit TorchStore(c10::intrusive_ptr<c10d::Store> store);

  absl::Status set(const std::string& key, const ddpx::Bytes& value) override;
  absl::StatusOr<ddpx::Bytes> get(const std::string& key,
                                  std::chrono::milliseconds timeout) override;
  absl::StatusOr<int64_t> add(const std::string& key, int64_t delta) override;
  absl::StatusOr<ddpx::Bytes> compare_set(const std::string& key, const ddpx::Bytes& expected,
                                          const ddpx::Bytes& desired) override;
  absl::Status wait(const std::vector<std::string>& keys,
                    std::chrono::milliseconds timeout) override;
  absl::StatusOr<bool> check(const std::vector<std::string>& keys) override;
  absl::StatusOr<bool> delete_key(const std::string& key) override;
  absl::StatusOr<int64_t> num_keys() override;
  absl::StatusOr<std::vector<ddpx::Bytes>> multi_get(const std::vector<std::string>& keys,
                                                     std::chrono::milliseconds timeout) override;
  absl::Status multi_set(const std::vector<std::string>& keys,
                         const std::vector<ddpx::Bytes>& values) override;
  absl::Status append(const std::string& key, const ddpx::Bytes& value) override;
  absl::StatusOr<std::unique_ptr<ddpx::Store>> clone() override;

  using ddpx::Store::get;
  using ddpx::Store::multi_get;
  using ddpx::Store::set;
  using ddpx::Store::wait;

 private:
  c10::intrusive_ptr<c10d::Store> store_;
};

}  // namespace ddpx_torch

#endif  // DDPX_PYTHON_CSRC_TORCH_STORE_H_
