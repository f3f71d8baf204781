// Fixed-width little-endian integers in byte buffers and streams, whatever
// the host's byte order: the store's wire protocol and file store, the
// trainers' checkpoints, DDP's saved state. Byte by byte (no memcpy of the host's integer), so the
// bytes are the same on every machine.
#ifndef DDPX_CORE_LITTLE_ENDIAN_H_
#define DDPX_CORE_LITTLE_ENDIAN_H_

#include <cstdint>
#include <istream>
#include <ostream>
#include <string>

namespace ddpx {
namespace little_endian {

// The low `bytes` (1..8) bytes of v, least significant first, at `out`.
inline void write(uint64_t v, int bytes, void* out) {
  auto* b = static_cast<unsigned char*>(out);
  for (int i = 0; i < bytes; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));
}
// The same bytes appended to `out`.
inline void append(uint64_t v, int bytes, std::string* out) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}
// The `bytes` (1..8) bytes at `in` as an unsigned integer.
inline uint64_t read(const void* in, int bytes) {
  const auto* b = static_cast<const unsigned char*>(in);
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= static_cast<uint64_t>(b[i]) << (8 * i);
  return v;
}

inline void write_u32(uint32_t v, void* out) { write(v, 4, out); }
inline void write_u64(uint64_t v, void* out) { write(v, 8, out); }
inline void append_u32(uint32_t v, std::string* out) { append(v, 4, out); }
inline void append_u64(uint64_t v, std::string* out) { append(v, 8, out); }
inline uint32_t read_u32(const void* in) { return static_cast<uint32_t>(read(in, 4)); }
inline uint64_t read_u64(const void* in) { return read(in, 8); }

// The same 8 bytes written to a stream, and read from one: false (and `v`
// untouched) when fewer than 8 bytes follow.
inline void put_u64(std::ostream& out, uint64_t v) {
  char b[8];
  write_u64(v, b);
  out.write(b, 8);
}
inline bool get_u64(std::istream& in, uint64_t* v) {
  char b[8];
  if (!in.read(b, 8)) return false;
  *v = read_u64(b);
  return true;
}

}  // namespace little_endian
}  // namespace ddpx

#endif  // DDPX_CORE_LITTLE_ENDIAN_H_
