#include "store/wait_registry.h"

#include <cstring>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"

namespace ddpx {

WaitRegistry::WaitRegistry(MemoryMeter* meter)
    : meter_(meter), registrations_(ByKey{this}) {}

absl::string_view WaitRegistry::key_of(Registration r) const {
  const std::string& keys = slots_[r >> 32]->keys;
  const char* at = keys.data() + static_cast<uint32_t>(r);
  uint32_t length;
  std::memcpy(&length, at, sizeof(length));
  return absl::string_view(at + sizeof(length), length);
}

bool WaitRegistry::ByKey::operator()(Registration a, Registration b) const {
  const int c = registry->key_of(a).compare(registry->key_of(b));
  return c < 0 || (c == 0 && a < b);
}

bool WaitRegistry::ByKey::operator()(Registration a, absl::string_view b) const {
  return registry->key_of(a) < b;
}

bool WaitRegistry::ByKey::operator()(absl::string_view a, Registration b) const {
  return a < registry->key_of(b);
}

WaitRegistry::Wait* WaitRegistry::find(ClientId client) {
  auto it = by_client_.find(client);
  return it == by_client_.end() ? nullptr : slots_[it->second].get();
}

void WaitRegistry::recount(Wait* w) {
  meter_->change(&w->counted,
                 kWaitBytes + w->keys.capacity() + w->missing * kRegistrationBytes);
}

void WaitRegistry::begin(ClientId client) {
  uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  slots_[slot] = std::make_unique<Wait>();
  slots_[slot]->client = client;
  recount(slots_[slot].get());
  by_client_.emplace(client, slot);
}

absl::Status WaitRegistry::add(ClientId client, absl::string_view key,
                               uint64_t list_bytes_left) {
  const uint32_t slot = by_client_.find(client)->second;
  Wait& w = *slots_[slot];
  // Named again right after itself: one registration covers both.
  if (w.last != kNone && key_of((Registration{slot} << 32) | w.last) == key) {
    return absl::OkStatus();
  }
  const uint64_t packed = sizeof(uint32_t) + key.size();
  uint64_t more = kRegistrationBytes;
  uint64_t reserve = 0;
  if (w.keys.capacity() - w.keys.size() < packed) {
    // Once for the rest of the list (each entry is 8 bytes of length and the
    // key there, 4 and the key here), so the string never grows twice.
    reserve = w.keys.size() + std::max(list_bytes_left, packed);
    more += reserve - w.keys.capacity();
  }
  if (w.keys.size() + packed > UINT32_MAX || !meter_->fits(more)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "WAIT refused: registering on ", more, " more bytes of keys would pass the "
        "server's memory limit of ", meter_->limit(), " bytes (", meter_->used(),
        " in use)"));
  }
  if (reserve > 0) w.keys.reserve(reserve);
  const uint32_t offset = static_cast<uint32_t>(w.keys.size());
  const uint32_t length = static_cast<uint32_t>(key.size());
  w.keys.append(reinterpret_cast<const char*>(&length), sizeof(length));
  w.keys.append(key.data(), key.size());
  registrations_.insert((Registration{slot} << 32) | offset);
  w.last = offset;
  ++w.missing;
  recount(&w);
  return absl::OkStatus();
}

bool WaitRegistry::finish_registering(ClientId client) {
  auto it = by_client_.find(client);
  Wait& w = *slots_[it->second];
  w.registering = false;
  if (w.missing == 0) {
    end(it->second);
    return true;
  }
  // The reservation covered every key of the list; keep only what is used.
  if (w.keys.capacity() > w.keys.size() + w.keys.size() / 4 + 4096) {
    w.keys.shrink_to_fit();
    recount(&w);
  }
  return false;
}

void WaitRegistry::key_created(absl::string_view key,
                               const std::function<void(ClientId)>& wake) {
  if (registrations_.empty()) return;
  auto first = registrations_.lower_bound(key);
  auto last = registrations_.upper_bound(key);
  if (first == last) return;
  absl::InlinedVector<uint32_t, 8> counted_off;
  for (auto it = first; it != last; ++it) counted_off.push_back(static_cast<uint32_t>(*it >> 32));
  registrations_.erase(first, last);
  for (uint32_t slot : counted_off) {
    Wait* w = slots_[slot].get();
    if (w == nullptr) continue;  // a wait on this key twice, ended below already
    --w->missing;
    recount(w);
    if (w->missing == 0 && !w->registering) {
      const ClientId client = w->client;
      end(slot);
      wake(client);
    }
  }
}

void WaitRegistry::unregister(uint32_t slot) {
  const Wait& w = *slots_[slot];
  if (w.missing == 0) return;
  if (w.missing * 4 < registrations_.size()) {
    // A few among many: take them out one by one.
    for (size_t off = 0; off < w.keys.size();) {
      registrations_.erase((Registration{slot} << 32) | off);
      uint32_t length;
      std::memcpy(&length, w.keys.data() + off, sizeof(length));
      off += sizeof(length) + length;
    }
    return;
  }
  // Most of the set: rebuild it from the rest, in order (linear, where
  // erasing millions one by one would hold the loop for seconds).
  absl::btree_set<Registration, ByKey> kept(ByKey{this});
  for (Registration r : registrations_) {
    if ((r >> 32) != slot) kept.insert(kept.end(), r);
  }
  registrations_.swap(kept);
}

void WaitRegistry::cancel(ClientId client) {
  auto it = by_client_.find(client);
  if (it == by_client_.end()) return;
  unregister(it->second);
  end(it->second);
}

void WaitRegistry::end(uint32_t slot) {
  Wait& w = *slots_[slot];
  meter_->change(&w.counted, 0);
  by_client_.erase(w.client);
  slots_[slot].reset();
  free_slots_.push_back(slot);
}

}  // namespace ddpx
