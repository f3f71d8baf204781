// CRC32C (Castagnoli, the checksum of iSCSI, ext4 and LevelDB), for the
// trainer's checkpoint manifest. Debian's Abseil (20220623) has no absl/crc,
// so this is a plain table-driven implementation: fast enough for
// checkpoints (hundreds of MB/s), and dependency-free.
#ifndef DDPX_EXAMPLES_TRAINER_CRC32C_H_
#define DDPX_EXAMPLES_TRAINER_CRC32C_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace ddpx::trainer {

// The CRC32C of `data` continued from `crc` (the CRC of the bytes before).
uint32_t crc32c_extend(uint32_t crc, const void* data, size_t size);

inline uint32_t crc32c(absl::string_view data) {
  return crc32c_extend(0, data.data(), data.size());
}

}  // namespace ddpx::trainer

#endif  // DDPX_EXAMPLES_TRAINER_CRC32C_H_
