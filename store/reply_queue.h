// The replies a server connection owes its client, sent with gathered
// writes (sendmsg): small replies are bytes in a buffer, large values are
// references to the stored value, sent straight from it with no copy.
#ifndef DDPX_STORE_REPLY_QUEUE_H_
#define DDPX_STORE_REPLY_QUEUE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "store/stored_value.h"

namespace ddpx {

class ReplyQueue {
 public:
  // Values shorter than this are copied into the byte buffer: a reference
  // (and its iovec) costs more than copying them.
  static constexpr size_t kReferenceAtLeast = 1024;

  explicit ReplyQueue(MemoryMeter* meter = nullptr) : meter_(meter) {}
  ~ReplyQueue() { clear(); }
  ReplyQueue(const ReplyQueue&) = delete;
  ReplyQueue& operator=(const ReplyQueue&) = delete;

  void u8(uint8_t v) { append(absl::string_view(reinterpret_cast<const char*>(&v), 1)); }
  void u32(uint32_t v);
  void u64(uint64_t v);
  // uint64 length + bytes, copied.
  void bytes(absl::string_view v);
  // uint64 length + the value, by reference when it is large.
  void value(const ValueRef& v);
  // Moves everything `other` holds to the end of this queue.
  void splice(ReplyQueue* other);

  // Bytes queued and not yet accepted by the kernel.
  uint64_t owed() const { return owed_; }
  bool empty() const { return owed_ == 0; }
  void clear();

  // Sends as much as the socket takes. 0, or the errno of a failed send
  // (EAGAIN when the socket is full).
  int send_to(int fd);

 private:
  // A run of copied bytes, or one referenced value.
  struct Piece {
    std::string bytes;
    ValueRef value;
    absl::string_view view() const { return value ? value->bytes() : absl::string_view(bytes); }
  };

  void append(absl::string_view bytes);
  void count(int64_t inline_bytes);
  void consume(size_t n);
  void compact();

  MemoryMeter* meter_;
  // Replies go to head_ while no piece is queued (the common case: small
  // replies, one buffer, no allocation once it has grown).
  std::string head_;
  size_t head_sent_ = 0;
  std::vector<Piece> pieces_;
  size_t first_ = 0;         // first unsent piece
  size_t first_sent_ = 0;    // bytes of it already sent
  uint64_t owed_ = 0;
  uint64_t counted_ = 0;     // inline bytes and piece bookkeeping in the meter
};

}  // namespace ddpx

#endif  // DDPX_STORE_REPLY_QUEUE_H_
