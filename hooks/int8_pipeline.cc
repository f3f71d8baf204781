#include "hooks/int8_pipeline.h"

#include <cstring>
#include <utility>
#include <vector>

#include "core/piece_layout.h"
#include "core/work.h"
#include "hooks/bytegrad.h"

namespace ddpx {
namespace {

constexpr char kAlgorithm[] = "int8 hook";

// One piece of a bucket (PieceLayout's) and its buffers.
struct Piece {
  Tensor whole;  // the piece in the bucket (or its padded copy): L slices
  Tensor mine;   // this rank's slice: the host's sum (quantized as its average)
  ChunkLayout layout{0, 1};  // of `mine` over the hosts
  Tensor send, received, own, gathered;  // ByteGrad's records
  Tensor host_records;  // hierarchical: every local rank's `gathered`, in local rank order
  std::shared_ptr<Work> scattered, exchanged, shared, gathered_locally;
};

}  // namespace

std::vector<int64_t> Int8Pipeline::piece_lengths(int64_t numel, int64_t local_size) {
  auto aligned = [&](int64_t elements) {
    return std::max<int64_t>(local_size, elements / local_size * local_size);
  };
  const int64_t full = aligned(kPieceBytes / 4);
  // Pieces doubling from kEndPieceBytes at both ends, smallest outermost:
  // the first piece's local steps and the last one's run while the link is
  // idle.
  std::vector<int64_t> ends;
  int64_t rest = numel;
  for (int64_t bytes = kEndPieceBytes; bytes < kPieceBytes; bytes *= 2) {
    const int64_t r = aligned(bytes / 4);
    if (rest < 2 * r + full) break;  // room for it at both ends and a full piece between
    ends.push_back(r);
    rest -= 2 * r;
  }
  std::vector<int64_t> lengths(ends.begin(), ends.end());
  // The middle in equal pieces of at most `full` elements.
  const int64_t middle = std::max<int64_t>(1, (rest + full - 1) / full);
  const int64_t each = aligned(rest / middle);
  for (int64_t i = 0; i < middle; ++i) lengths.push_back(each);
  lengths.insert(lengths.end(), ends.rbegin(), ends.rend());
  // The last piece takes what the aligned ones leave (it may be shorter or
  // longer than its nominal size, and need not split into L equal slices).
  int64_t others = 0;
  for (size_t i = 0; i + 1 < lengths.size(); ++i) others += lengths[i];
  lengths.back() = numel - others;
  return lengths;
}

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
  const int64_t local_rank = local_ != nullptr ? local_->rank() : 0;
  const int hosts = cross_->size();
  const int host = cross_->rank();
  const PieceLayout layout(piece_lengths(data.numel(), local_size),
                           static_cast<int64_t>(sizeof(float)), local_size);
  const int64_t pieces = layout.pieces();
  // This rank's slices (hierarchical) and the padded last piece share the
  // scratch; the padding is summed with zeros only, never decoded into the
  // bucket.
  const std::vector<PieceLayout::Piece> placed =
      layout.place(data, scratch_, /*own_slices=*/local_ != nullptr);
  std::vector<Piece> piece(pieces);
  for (int64_t p = 0; p < pieces; ++p) {
    piece[p].whole = placed[p].whole;
    piece[p].mine = placed[p].mine;
    piece[p].layout = ChunkLayout(layout.slice(p), hosts);
  }
  if (local_ != nullptr && counter_ != nullptr) {  // float32 reduce-scatter inside the host
    counter_->add_traffic(data.nbytes(), data.nbytes() * (local_size - 1) / local_size);
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
    }
    // `mine` holds the host's sum; its records are of the average.
    absl::StatusOr<Tensor> send =
        bytegrad_quantize(q.mine, q.layout, static_cast<float>(local_size));
    if (!send.ok()) return send.status();
    q.send = *send;
    q.received = Tensor::uninitialized({q.send.numel()}, DType::kUInt8);
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
    absl::StatusOr<Tensor> own = bytegrad_average_own_chunk(q.received, q.layout, host);
    if (!own.ok()) return own.status();
    q.own = *own;
    q.gathered = Tensor::uninitialized({q.send.numel()}, DType::kUInt8);
    if (hosts == 1) {
      memcpy(q.gathered.data(), q.own.data(), q.own.nbytes());
      return absl::OkStatus();
    }
    q.shared = cross_->allgather_into_tensor(q.gathered, q.own);
    return absl::OkStatus();
  };
  // Stage C: the averaged slice's records allgathered inside the host (a
  // quarter of the float32 slice's bytes); flat mode decodes here. While
  // that allgather runs, this rank decodes its own slice from the records
  // it already has, so that only the other slices wait for the allgather
  // (for the last pieces, that is the pipeline's tail after the link is
  // done).
  auto gather_records = [&](Piece& q) -> absl::Status {
    if (q.shared != nullptr) {
      absl::Status s = wait_step(q.shared, kAlgorithm, "allgather across hosts");
      if (!s.ok()) return s;
    }
    if (local_ == nullptr) return bytegrad_decode(q.gathered, q.layout, q.mine);
    q.host_records = Tensor::uninitialized({local_size * q.gathered.numel()}, DType::kUInt8);
    if (counter_ != nullptr) {
      counter_->add_traffic(q.gathered.nbytes(),
                            allgather_wire_bytes(q.gathered.nbytes(), static_cast<int>(local_size)));
    }
    q.gathered_locally = local_->allgather_into_tensor(q.host_records, q.gathered);
    const int64_t slice = q.mine.numel();
    return bytegrad_decode(q.gathered, q.layout, q.whole.view(local_rank * slice, {slice}));
  };
  // Stage D (hierarchical): the other local ranks' slices decoded into the
  // piece; the same bytes decode to the same bits on every rank.
  auto decode_host = [&](Piece& q) -> absl::Status {
    absl::Status s = wait_step(q.gathered_locally, kAlgorithm, "allgather inside the host");
    if (!s.ok()) return s;
    const int64_t slice = q.mine.numel();
    const int64_t records = q.gathered.numel();
    for (int64_t j = 0; j < local_size; ++j) {
      if (j == local_rank) continue;
      absl::Status s = bytegrad_decode(q.host_records.view(j * records, {records}), q.layout,
                                       q.whole.view(j * slice, {slice}));
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  };

  absl::Status status;
  // Pieces whose records were allgathered inside the host are decoded in
  // order as their allgathers complete, without waiting for one: those
  // allgathers queue behind the reduce-scatters on the host's group, and a
  // wait here would hold back the next piece's send across.
  int64_t decoded = 0;
  auto decode_completed = [&](int64_t gathered, bool wait) -> absl::Status {
    for (; local_ != nullptr && decoded < gathered; ++decoded) {
      if (!wait && !piece[decoded].gathered_locally->is_completed()) break;
      if (absl::Status s = decode_host(piece[decoded]); !s.ok()) return s;
    }
    return absl::OkStatus();
  };
  for (int64_t i = 0; i < pieces + 2 && status.ok(); ++i) {
    if (i < pieces) status = quantize_and_send(piece[i]);
    if (status.ok() && i >= 1 && i - 1 < pieces) status = average_and_share(piece[i - 1]);
    if (status.ok() && i >= 2) status = gather_records(piece[i - 2]);
    if (status.ok()) status = decode_completed(std::max<int64_t>(0, i - 1), /*wait=*/false);
  }
  if (status.ok()) status = decode_completed(pieces, /*wait=*/true);
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
