// Our Store seen through gloo::rendezvous::Store, so Gloo's connectFullMesh
// can exchange addresses over whatever store the job uses (TCPStore,
// HashStore, PrefixStore...).
#ifndef DDPX_PROCESS_GROUP_GLOO_STORE_ADAPTER_H_
#define DDPX_PROCESS_GROUP_GLOO_STORE_ADAPTER_H_

#include <chrono>
#include <string>
#include <vector>

#include "gloo/rendezvous/store.h"
#include "store/store.h"

namespace ddpx {

// Gloo's store interface reports failures by throwing; this adapter throws
// gloo::IoException carrying our Status message (key and timeout included).
// To let several Gloo contexts rendezvous on one store, hand it a PrefixStore.
class GlooStoreAdapter : public gloo::rendezvous::Store {
 public:
  explicit GlooStoreAdapter(ddpx::Store& store) : store_(store) {}

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  ddpx::Store& store_;
};

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_GLOO_STORE_ADAPTER_H_
