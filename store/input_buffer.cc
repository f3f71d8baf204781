#include "store/input_buffer.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

namespace ddpx {

namespace {

// From this size on a buffer gets its own mapping.
constexpr size_t kMappedFrom = 1 << 20;
constexpr size_t kPage = 4096;

size_t round_to_pages(size_t n) { return (n + kPage - 1) / kPage * kPage; }

}  // namespace

void InputBuffer::grow(size_t at_least) {
  size_t want = std::max(at_least, capacity_ * 2);
  if (want < kMappedFrom) {
    want = std::max<size_t>(want, 256);
    void* p = std::realloc(data_, want);
    if (p == nullptr) throw std::bad_alloc();
    data_ = static_cast<char*>(p);
    capacity_ = want;
    return;
  }
  want = round_to_pages(want);
  void* p;
  if (mapped_) {
    p = mremap(data_, capacity_, want, MREMAP_MAYMOVE);
  } else {
    p = mmap(nullptr, want, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p != MAP_FAILED && size_ > 0) std::memcpy(p, data_, size_);
  }
  if (p == MAP_FAILED) throw std::bad_alloc();
  if (!mapped_) std::free(data_);
  data_ = static_cast<char*>(p);
  capacity_ = want;
  mapped_ = true;
}

void InputBuffer::append(const char* bytes, size_t n) {
  if (n == 0) return;
  if (size_ + n > capacity_) grow(size_ + n);
  std::memcpy(data_ + size_, bytes, n);
  size_ += n;
}

void InputBuffer::assign(const char* bytes, size_t n) {
  size_ = 0;
  append(bytes, n);
}

void InputBuffer::erase_front(size_t n) {
  n = std::min(n, size_);
  std::memmove(data_, data_ + n, size_ - n);
  size_ -= n;
}

void InputBuffer::release() {
  if (mapped_) {
    munmap(data_, capacity_);
  } else {
    std::free(data_);
  }
  data_ = nullptr;
  size_ = capacity_ = 0;
  mapped_ = false;
}

}  // namespace ddpx
