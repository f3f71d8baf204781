// GlooBackend's point-to-point ops (on their own Gloo context, the user's tag
// as slot) and monitored_barrier (through the store, so it can say which
// ranks never arrived). Peers come checked by the front end
// (validate::send_recv): in range, not this rank, at least one.
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gloo/context.h"
#include "gloo/transport/unbound_buffer.h"
#include "gloo/types.h"
#include "process_group/tracing/flight_recorder.h"
#include "process_group/gloo/gloo_backend.h"
#include "process_group/gloo/gloo_internal.h"

namespace ddpx {
namespace {

// Point-to-point slots live apart from the collectives' (prefixes 0x01-0x08).
constexpr uint8_t kP2PSlotPrefix = 0x40;

}  // namespace

std::shared_ptr<Work> GlooBackend::start_p2p(OpType op,
                                             const TensorList& tensors,
                                             std::vector<int> peers, int tag,
                                             const OpTimeout& op_timeout_or_unset) {
  const std::chrono::milliseconds timeout = op_timeout(op_timeout_or_unset);
  const auto started = std::chrono::steady_clock::now();
  auto work = std::make_shared<FutureWork>(op);
  // The flight recorder's entry: posted (started) now, completed by the
  // waiter before the caller can see it.
  const TraceHandle trace = CurrentTrace::claim();
  trace.started();
  auto pending = std::make_shared<P2PWaiters::Pending>();
  pending->is_recv = op != OpType::kSend;
  const uint64_t slot = gloo::Slot::build(kP2PSlotPrefix, static_cast<uint32_t>(tag));
  const std::string what = describe(tensors);
  try {
    // Posted now, on the caller's thread: matching follows issue order.
    for (const Tensor& t : tensors) {
      if (t.nbytes() == 0) continue;
      pending->buffers.push_back(p2p_context_->createUnboundBuffer(t.data(), t.nbytes()));
      auto& buffer = pending->buffers.back();
      if (op == OpType::kSend) {
        buffer->send(peers[0], slot);
      } else if (peers.size() == 1) {
        buffer->recv(peers[0], slot);
      } else {
        buffer->recv(peers, slot);
      }
    }
  } catch (const std::exception& e) {
    work->fail(trace.failed(op_error(op, what, timeout, started, e.what())));
    return work;
  }
  if (pending->buffers.empty()) {
    trace.completed();
    work->finish(tensors, peers.size() == 1 ? peers[0] : -1);
    return work;
  }
  p2p_waiters_->start(pending, [this, work, op, what, tensors, timeout, started, trace](
                                   P2PWaiters::Pending& p) {
    int source = -1;
    try {
      for (auto& buffer : p.buffers) {
        const bool completed = p.is_recv ? buffer->waitRecv(&source, timeout)
                                         : buffer->waitSend(timeout);
        if (!completed) {
          work->fail(trace.failed(absl::CancelledError(absl::StrCat(
              op_type_name(op), " of ", what,
              ": aborted because the gloo backend was destroyed"))));
          return;
        }
      }
    } catch (const std::exception& e) {
      work->fail(trace.failed(op_error(op, what, timeout, started, e.what())));
      return;
    }
    trace.completed();
    work->finish(tensors, p.is_recv ? source : -1);
  });
  return work;
}

std::shared_ptr<Work> GlooBackend::send(const TensorList& tensors, int dst_rank,
                                        const SendRecvOptions& opts) {
  return start_p2p(OpType::kSend, tensors, {dst_rank}, opts.tag, opts.timeout);
}

std::shared_ptr<Work> GlooBackend::recv(const TensorList& tensors, int src_rank,
                                        const SendRecvOptions& opts) {
  return start_p2p(OpType::kRecv, tensors, {src_rank}, opts.tag, opts.timeout);
}

std::shared_ptr<Work> GlooBackend::recv_anysource(const TensorList& tensors,
                                                  const SendRecvOptions& opts) {
  std::vector<int> others;
  for (int r = 0; r < size(); ++r) {
    if (r != rank()) others.push_back(r);
  }
  return start_p2p(OpType::kRecvAnysource, tensors, others, opts.tag,
                   opts.timeout);
}

std::shared_ptr<Work> GlooBackend::monitored_barrier(const BarrierOptions& opts,
                                                     bool wait_all_ranks) {
  return enqueue(OpType::kMonitoredBarrier, TensorSummary(), opts.timeout,
                 [this, wait_all_ranks](const OpContext& c) {
                   return monitored_barrier_on_worker(c, wait_all_ranks);
                 });
}

// Every rank checks in under a key of its own; rank 0 waits for them (all,
// or in rank order up to the first missing one) and publishes the verdict
// that the other ranks wait for.
absl::StatusOr<TensorList> GlooBackend::monitored_barrier_on_worker(
    const OpContext& c, bool wait_all_ranks) const {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + c.timeout;
  const std::string base = absl::StrCat(key_prefix_, "monitored_barrier/", c.seq, "/");
  const std::string verdict_key = base + "verdict";
  auto arrive_key = [&](int r) { return absl::StrCat(base, "arrived/", r); };
  auto remaining = [&] {
    return std::max(std::chrono::milliseconds(1),
                    std::chrono::duration_cast<std::chrono::milliseconds>(
                        deadline - Clock::now()));
  };
  Store& store = *c.store;

  if (rank() != 0) {
    absl::Status s = store.set(arrive_key(rank()), "1");
    if (!s.ok()) return s;
    // Rank 0 may use its whole timeout before it can name the missing
    // ranks; wait a little longer for that verdict.
    const auto grace = std::max(std::chrono::milliseconds(200), c.timeout / 10);
    s = store.wait({verdict_key}, remaining() + grace);
    if (!s.ok()) {
      return absl::DeadlineExceededError(absl::StrCat(
          "monitored_barrier on rank ", rank(), " timed out after ",
          c.timeout.count(), " ms waiting for rank 0's verdict: ", s.message()));
    }
    absl::StatusOr<std::string> verdict = store.get_string(verdict_key);
    if (!verdict.ok()) return verdict.status();
    if (*verdict != "ok") {
      return absl::DeadlineExceededError(absl::StrCat(
          "monitored_barrier on rank ", rank(), " failed: rank 0 reports ",
          *verdict));
    }
    return TensorList{};
  }

  std::vector<int> missing;
  if (wait_all_ranks) {
    std::vector<std::string> keys;
    for (int r = 1; r < size(); ++r) keys.push_back(arrive_key(r));
    if (!store.wait(keys, remaining()).ok()) {
      for (int r = 1; r < size(); ++r) {
        absl::StatusOr<bool> there = store.check({arrive_key(r)});
        if (!there.ok() || !*there) missing.push_back(r);
      }
    }
  } else {
    for (int r = 1; r < size(); ++r) {
      if (!store.wait({arrive_key(r)}, remaining()).ok()) {
        missing.push_back(r);
        break;
      }
    }
  }
  std::string verdict = "ok";
  if (!missing.empty()) {
    verdict = absl::StrCat(missing.size() == 1 ? "rank " : "ranks ",
                           absl::StrJoin(missing, ", "),
                           missing.size() == 1 ? " has" : " have",
                           " not arrived at monitored_barrier within ",
                           c.timeout.count(), " ms");
  }
  absl::Status s = store.set(verdict_key, verdict);
  if (!s.ok()) return s;
  if (!missing.empty()) {
    return absl::DeadlineExceededError("monitored_barrier on rank 0: " + verdict);
  }
  return TensorList{};
}

}  // namespace ddpx
