#include "hooks/int8_pipeline.h"

#include <cstring>
#include <utility>
#include <vector>

#include "hooks/bytegrad.h"
#include "hooks/kernels/cpu_kernels.h"
#include "process_group/piece_layout.h"
#include "process_group/work.h"

namespace ddpx {
namespace {

constexpr char kAlgorithm[] = "int8 hook";

// One piece of a bucket and its buffers.
struct Piece {
  Tensor whole;  // the piece in the bucket (or its padded copy): L slices
  Tensor mine;   // this rank's slice: the host's sum, then the average
  ChunkLayout layout{0, 1};  // of `mine` over the hosts
  Tensor send, received, own, gathered;  // ByteGrad's records
  std::shared_ptr<Work> scattered, exchanged, shared, gathered_locally;
};

}  // namespace

Int8Pipeline::Int8Pipeline(std::shared_ptr<ProcessGroup> local,
                           std::shared_ptr<ProcessGroup> cross, HookStatsCounter* counter)
    : local_(std::move(local)), cross_(std::move(cross)), counter_(counter) {
  thread_ = std::thread([this, queue = queue_] { loop(queue); });
}

Int8Pipeline::~Int8Pipeline() {
  std::deque<std::pair<Tensor, std::shared_ptr<Future<Tensor>>>> left;
  {
    std::lock_guard<std::mutex> lock(queue_->mu);
    queue_->stopping = true;
    left.swap(queue_->jobs);
  }
  queue_->wake.notify_all();
  for (auto& job : left) {
    job.second->set_error(absl::CancelledError("int8 hook: destroyed before this bucket ran"));
  }
  // A future's callback on the pipeline's own thread may drop the last
  // reference to the hook: that thread then ends by itself.
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();
  } else {
    thread_.join();
  }
}

std::shared_ptr<Future<Tensor>> Int8Pipeline::submit(Tensor data) {
  auto result = Future<Tensor>::create();
  {
    std::lock_guard<std::mutex> lock(queue_->mu);
    if (queue_->stopping) {
      return Future<Tensor>::failed(absl::CancelledError("int8 hook: shut down"));
    }
    queue_->jobs.emplace_back(std::move(data), result);
  }
  queue_->wake.notify_one();
  return result;
}

void Int8Pipeline::loop(const std::shared_ptr<Queue>& queue) {
  for (;;) {
    std::pair<Tensor, std::shared_ptr<Future<Tensor>>> job;
    {
      std::unique_lock<std::mutex> lock(queue->mu);
      queue->wake.wait(lock, [&] { return queue->stopping || !queue->jobs.empty(); });
      // The destructor takes the jobs left when it sets `stopping`.
      if (queue->stopping) return;
      job = std::move(queue->jobs.front());
      queue->jobs.pop_front();
    }
    absl::Status s = average(job.first);
    // The callbacks this runs may destroy the pipeline: from here on only
    // `queue` (shared with this thread) is touched.
    if (s.ok()) {
      job.second->set_value(job.first);
    } else {
      job.second->set_error(s);
    }
  }
}

absl::Status Int8Pipeline::average(const Tensor& data) {
  const int64_t local_size = local_ != nullptr ? local_->size() : 1;
  const int hosts = cross_->size();
  const int host = cross_->rank();
  const PieceLayout layout(data.numel(), sizeof(float), kPieceBytes, local_size);
  const int64_t pieces = layout.pieces();
  const std::vector<PieceLayout::Piece> placed =
      layout.place(data, slices_, /*own_slices=*/local_ != nullptr);
  std::vector<Piece> piece(pieces);
  for (int64_t p = 0; p < pieces; ++p) {
    piece[p].whole = placed[p].whole;
    piece[p].mine = placed[p].mine;
    piece[p].layout = ChunkLayout(layout.slice(p), hosts);
  }
  if (local_ != nullptr && counter_ != nullptr) {  // float32 inside the host: reduce-scatter, allgather
    const uint64_t local_wire = data.nbytes() * (local_size - 1) / local_size;
    counter_->add_traffic(2 * data.nbytes(), 2 * local_wire);
  }

  ReduceScatterOptions sum;
  sum.op = ReduceOp::SUM;
  if (local_ != nullptr) {
    for (Piece& q : piece) q.scattered = local_->reduce_scatter_tensor(q.mine, q.whole, sum);
  }

  // Stage A: the host's average of this rank's slice, quantized, sent across.
  auto quantize_and_send = [&](Piece& q) -> absl::Status {
    if (local_ != nullptr) {
      absl::Status s = wait_step(q.scattered, kAlgorithm, "reduce-scatter inside the host");
      if (!s.ok()) return s;
      kernels::divide(q.mine.data_as<float>(), q.mine.numel(), static_cast<float>(local_size));
    }
    q.send = bytegrad_quantize(q.mine, q.layout);
    q.received = Tensor::zeros({q.send.numel()}, DType::kUInt8);
    if (counter_ != nullptr) {
      const uint64_t all = q.send.nbytes(), one = q.layout.record_bytes;
      counter_->add_traffic(all + one, alltoall_wire_bytes(all, hosts) +
                                           allgather_wire_bytes(one, hosts));
    }
    if (hosts == 1) {
      memcpy(q.received.data(), q.send.data(), q.send.nbytes());
      return absl::OkStatus();
    }
    q.exchanged = cross_->alltoall_base(q.received, q.send);
    return absl::OkStatus();
  };
  // Stage B: this rank's chunk averaged over the hosts, shared with them.
  auto average_and_share = [&](Piece& q) -> absl::Status {
    if (q.exchanged != nullptr) {
      absl::Status s = wait_step(q.exchanged, kAlgorithm, "alltoall across hosts");
      if (!s.ok()) return s;
    }
    q.own = bytegrad_average_own_chunk(q.received, q.layout, host);
    q.gathered = Tensor::zeros({q.send.numel()}, DType::kUInt8);
    if (hosts == 1) {
      memcpy(q.gathered.data(), q.own.data(), q.own.nbytes());
      return absl::OkStatus();
    }
    q.shared = cross_->allgather_into_tensor(q.gathered, q.own);
    return absl::OkStatus();
  };
  // Stage C: the averaged slice decoded and allgathered inside the host.
  auto decode_and_gather = [&](Piece& q) -> absl::Status {
    if (q.shared != nullptr) {
      absl::Status s = wait_step(q.shared, kAlgorithm, "allgather across hosts");
      if (!s.ok()) return s;
    }
    bytegrad_decode(q.gathered, q.layout, q.mine);
    if (local_ != nullptr) q.gathered_locally = local_->allgather_into_tensor(q.whole, q.mine);
    return absl::OkStatus();
  };

  absl::Status status;
  for (int64_t i = 0; i < pieces + 2 && status.ok(); ++i) {
    if (i < pieces) status = quantize_and_send(piece[i]);
    if (status.ok() && i >= 1 && i - 1 < pieces) status = average_and_share(piece[i - 1]);
    if (status.ok() && i >= 2) status = decode_and_gather(piece[i - 2]);
  }
  // Everything issued finishes before the buffers go, also after a failure.
  for (Piece& q : piece) {
    const std::pair<const char*, std::shared_ptr<Work>*> steps[] = {
        {"reduce-scatter inside the host", &q.scattered},
        {"alltoall across hosts", &q.exchanged},
        {"allgather across hosts", &q.shared},
        {"allgather inside the host", &q.gathered_locally}};
    for (const auto& [step, work] : steps) {
      if (*work == nullptr) continue;
      absl::Status s = wait_step(*work, kAlgorithm, step);
      if (status.ok()) status = s;
    }
  }
  if (!status.ok()) return status;
  layout.copy_back(data, placed);
  return absl::OkStatus();
}

}  // namespace ddpx
