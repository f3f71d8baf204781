#include "examples/trainer/timed_backend.h"

#include "examples/trainer/timed_hook.h"

namespace ddpx::trainer {

TimedBackend::TimedBackend(std::shared_ptr<Backend> inner)
    : Backend(inner->rank(), inner->size()), inner_(std::move(inner)) {}

std::shared_ptr<ProcessGroup> TimedBackend::wrap(const ProcessGroup& pg,
                                                 std::shared_ptr<TimedBackend>* timed) {
  *timed = std::make_shared<TimedBackend>(pg.backend());
  return std::make_shared<ProcessGroup>(*timed, pg.store(), pg.timeout());
}

std::vector<CommSpan> TimedBackend::take_spans() {
  std::lock_guard<std::mutex> lock(stamps_->mu);
  std::vector<CommSpan> out;
  out.swap(stamps_->spans);
  ++stamps_->generation;
  return out;
}

template <typename Call>
std::shared_ptr<Work> TimedBackend::stamped(Call call) {
  const int64_t enter = TimedCommHook::now_ns();
  std::shared_ptr<Work> work = call();
  size_t slot;
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(stamps_->mu);
    slot = stamps_->spans.size();
    generation = stamps_->generation;
    stamps_->spans.push_back({slot, enter, 0});
  }
  // Registered before the caller can chain on the future, so the stamp is
  // taken before anyone waiting on this collective is woken.
  work->get_future()->add_callback(
      [stamps = stamps_, slot, generation](Future<TensorList>&) {
        const int64_t done = TimedCommHook::now_ns();
        std::lock_guard<std::mutex> lock(stamps->mu);
        if (stamps->generation == generation) stamps->spans[slot].done_ns = done;
      });
  return work;
}

std::shared_ptr<Work> TimedBackend::allreduce(const TensorList& t, const AllreduceOptions& o) {
  return stamped([&] { return inner_->allreduce(t, o); });
}
std::shared_ptr<Work> TimedBackend::allreduce_coalesced(const TensorList& t,
                                                        const AllreduceOptions& o) {
  return stamped([&] { return inner_->allreduce_coalesced(t, o); });
}
std::shared_ptr<Work> TimedBackend::broadcast(const TensorList& t, const BroadcastOptions& o) {
  return stamped([&] { return inner_->broadcast(t, o); });
}
std::shared_ptr<Work> TimedBackend::reduce(const TensorList& t, const ReduceOptions& o) {
  return stamped([&] { return inner_->reduce(t, o); });
}
std::shared_ptr<Work> TimedBackend::allgather(const std::vector<TensorList>& out,
                                              const TensorList& in, const AllgatherOptions& o) {
  return stamped([&] { return inner_->allgather(out, in, o); });
}
std::shared_ptr<Work> TimedBackend::allgather_into_tensor(const Tensor& out, const Tensor& in,
                                                          const AllgatherOptions& o) {
  return stamped([&] { return inner_->allgather_into_tensor(out, in, o); });
}
std::shared_ptr<Work> TimedBackend::reduce_scatter(const TensorList& out,
                                                   const std::vector<TensorList>& in,
                                                   const ReduceScatterOptions& o) {
  return stamped([&] { return inner_->reduce_scatter(out, in, o); });
}
std::shared_ptr<Work> TimedBackend::reduce_scatter_tensor(const Tensor& out, const Tensor& in,
                                                          const ReduceScatterOptions& o) {
  return stamped([&] { return inner_->reduce_scatter_tensor(out, in, o); });
}
std::shared_ptr<Work> TimedBackend::gather(const std::vector<TensorList>& out,
                                           const TensorList& in, const GatherOptions& o) {
  return stamped([&] { return inner_->gather(out, in, o); });
}
std::shared_ptr<Work> TimedBackend::scatter(const TensorList& out,
                                            const std::vector<TensorList>& in,
                                            const ScatterOptions& o) {
  return stamped([&] { return inner_->scatter(out, in, o); });
}
std::shared_ptr<Work> TimedBackend::alltoall(const TensorList& out, const TensorList& in,
                                             const AllToAllOptions& o) {
  return stamped([&] { return inner_->alltoall(out, in, o); });
}
std::shared_ptr<Work> TimedBackend::alltoall_base(const Tensor& out, const Tensor& in,
                                                  const std::vector<int64_t>& out_splits,
                                                  const std::vector<int64_t>& in_splits,
                                                  const AllToAllOptions& o) {
  return stamped([&] { return inner_->alltoall_base(out, in, out_splits, in_splits, o); });
}
std::shared_ptr<Work> TimedBackend::barrier(const BarrierOptions& o) {
  return stamped([&] { return inner_->barrier(o); });
}
std::shared_ptr<Work> TimedBackend::monitored_barrier(const BarrierOptions& o, bool wait_all) {
  return stamped([&] { return inner_->monitored_barrier(o, wait_all); });
}

}  // namespace ddpx::trainer
