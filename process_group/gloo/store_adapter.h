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
// Every key is put under `prefix`, so several Gloo contexts can rendezvous
// on one store.
class GlooStoreAdapter : public gloo::rendezvous::Store {
 public:
  GlooStoreAdapter(ddpx::Store& store, std::string prefix)
      : store_(store), prefix_(std::move(prefix)) {}

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  std::vector<std::string> prefixed(const std::vector<std::string>& keys) const;

  ddpx::Store& store_;
  const std::string prefix_;
};

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_GLOO_STORE_ADAPTER_H_
