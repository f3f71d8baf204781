#include "store/reply_queue.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>

#include "core/little_endian.h"

namespace ddpx {

namespace {

// iovecs per sendmsg: enough to fill a socket buffer with small pieces.
constexpr int kMaxIovecs = 64;

}  // namespace

void ReplyQueue::count(int64_t inline_bytes) {
  if (meter_ == nullptr) return;
  meter_->change(&counted_, counted_ + static_cast<uint64_t>(inline_bytes));
}

void ReplyQueue::append(absl::string_view b) {
  if (b.empty()) return;
  if (first_ == pieces_.size()) {
    head_.append(b.data(), b.size());
  } else if (!pieces_.back().value) {
    pieces_.back().bytes.append(b.data(), b.size());
  } else {
    pieces_.push_back(Piece{std::string(b), nullptr});
  }
  owed_ += b.size();
  count(static_cast<int64_t>(b.size()));
}

void ReplyQueue::u32(uint32_t v) {
  char b[4];
  little_endian::write_u32(v, b);
  append(absl::string_view(b, 4));
}

void ReplyQueue::u64(uint64_t v) {
  char b[8];
  little_endian::write_u64(v, b);
  append(absl::string_view(b, 8));
}

void ReplyQueue::bytes(absl::string_view v) {
  u64(v.size());
  append(v);
}

void ReplyQueue::value(const ValueRef& v) {
  if (v->size() < kReferenceAtLeast) {
    bytes(v->bytes());
    return;
  }
  u64(v->size());
  pieces_.push_back(Piece{std::string(), v});
  owed_ += v->size();
  count(sizeof(Piece));
}

void ReplyQueue::splice(ReplyQueue* other) {
  if (other == this || other->empty()) return;
  // The other queue's head first, then its pieces, in order.
  append(absl::string_view(other->head_).substr(other->head_sent_));
  for (size_t i = other->first_; i < other->pieces_.size(); ++i) {
    Piece& p = other->pieces_[i];
    absl::string_view rest = p.view();
    if (i == other->first_) rest.remove_prefix(other->first_sent_);
    if (p.value && rest.size() == p.view().size()) {
      pieces_.push_back(Piece{std::string(), std::move(p.value)});
      owed_ += rest.size();
      count(sizeof(Piece));
    } else {
      append(rest);
    }
  }
  other->clear();
}

void ReplyQueue::clear() {
  std::string().swap(head_);
  head_sent_ = 0;
  std::vector<Piece>().swap(pieces_);
  first_ = 0;
  first_sent_ = 0;
  owed_ = 0;
  if (meter_ != nullptr) meter_->change(&counted_, 0);
}

void ReplyQueue::consume(size_t n) {
  owed_ -= n;
  const size_t from_head = std::min(n, head_.size() - head_sent_);
  head_sent_ += from_head;
  count(-static_cast<int64_t>(from_head));
  n -= from_head;
  while (n > 0) {
    Piece& p = pieces_[first_];
    const size_t left = p.view().size() - first_sent_;
    if (n < left) {
      first_sent_ += n;
      if (!p.value) count(-static_cast<int64_t>(n));
      return;
    }
    n -= left;
    count(-static_cast<int64_t>(p.value ? sizeof(Piece) : left));
    p = Piece();  // drops the reference as soon as it is sent
    ++first_;
    first_sent_ = 0;
  }
}

void ReplyQueue::compact() {
  if (owed_ == 0) {
    // Keep a small head buffer: the next reply needs no allocation.
    if (head_.capacity() > 4096) {
      std::string().swap(head_);
    } else {
      head_.clear();
    }
    head_sent_ = 0;
    std::vector<Piece>().swap(pieces_);
    first_ = 0;
    first_sent_ = 0;
    if (meter_ != nullptr) meter_->change(&counted_, 0);
    return;
  }
  if (head_sent_ == head_.size() && head_sent_ > 0) {
    std::string().swap(head_);
    head_sent_ = 0;
  }
  if (first_ > 1024 && first_ * 2 > pieces_.size()) {
    pieces_.erase(pieces_.begin(), pieces_.begin() + static_cast<long>(first_));
    first_ = 0;
  }
}

int ReplyQueue::send_to(int fd) {
  int result = 0;
  while (owed_ > 0) {
    if (first_ == pieces_.size()) {
      // Only small replies (the common case): one plain send.
      ssize_t sent = send(fd, &head_[head_sent_], head_.size() - head_sent_, MSG_NOSIGNAL);
      if (sent < 0) {
        if (errno == EINTR) continue;
        result = errno;
        break;
      }
      consume(static_cast<size_t>(sent));
      continue;
    }
    iovec iov[kMaxIovecs];
    int n = 0;
    if (head_sent_ < head_.size()) {
      iov[n].iov_base = &head_[head_sent_];
      iov[n].iov_len = head_.size() - head_sent_;
      ++n;
    }
    for (size_t i = first_; i < pieces_.size() && n < kMaxIovecs; ++i) {
      absl::string_view v = pieces_[i].view();
      if (i == first_) v.remove_prefix(first_sent_);
      if (v.empty()) continue;
      iov[n].iov_base = const_cast<char*>(v.data());
      iov[n].iov_len = v.size();
      ++n;
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(n);
    ssize_t sent = sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (sent < 0) {
      if (errno == EINTR) continue;
      result = errno;
      break;
    }
    consume(static_cast<size_t>(sent));
  }
  compact();
  return result;
}

}  // namespace ddpx
