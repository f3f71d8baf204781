#include "process_group/gloo/send_buffer_autotuning.h"

#include <cstddef>

#include "gloo/context.h"

#include "process_group/gloo/tcp_pair_access.h"

namespace ddpx {
namespace {

// Gloo's own cap for the SO_SNDBUF it sets (kMaxSendBufferSize in
// gloo/transport/tcp/pair.cc): a message never asks for more.
constexpr size_t kGlooMaxSendBufferBytes = size_t{32} << 20;

}  // namespace

void keep_send_buffer_autotuning(gloo::Context& context) {
  for (int peer = 0; peer < context.size; ++peer) {
    tcp_pair_record_send_buffer(context, peer, kGlooMaxSendBufferBytes);
  }
}

size_t gloo_recorded_send_buffer_bytes(gloo::Context& context, int peer) {
  return tcp_pair_recorded_send_buffer(context, peer);
}

}  // namespace ddpx
