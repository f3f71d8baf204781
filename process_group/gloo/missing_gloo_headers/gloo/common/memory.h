// Debian's libgloo-dev (0.0~git20220518.5b14351-3) ships
// gloo/transport/tcp/pair.h but not the gloo/common/memory.h it includes.
// This stand-in declares the two pointer boxes pair.h names, with the same
// layout as Gloo's (one std::shared_ptr / std::weak_ptr each), so that
// send_buffer_autotuning.cc can see tcp::Pair's declaration. Nothing of ours
// constructs or uses them; only the members before them are touched.
#pragma once

#include <memory>

namespace gloo {

template <typename T>
class WeakNonOwningPtr;

template <typename T>
class NonOwningPtr final {
 public:
  NonOwningPtr() {}
  explicit NonOwningPtr(const WeakNonOwningPtr<T>& ptr) : ptr_(ptr.ptr_.lock()) {}
  T* operator->() const noexcept { return ptr_.get(); }
  explicit operator bool() const noexcept { return static_cast<bool>(ptr_); }

 private:
  std::shared_ptr<T> ptr_;
};

template <typename T>
class WeakNonOwningPtr final {
 public:
  WeakNonOwningPtr() {}

 protected:
  std::weak_ptr<T> ptr_;
  friend class NonOwningPtr<T>;
};

}  // namespace gloo
