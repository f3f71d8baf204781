// The IDX format of (Fashion-)MNIST: a magic of two zero bytes, a type byte
// and a dimension count, big-endian 32-bit dimensions, then the data.
// Files may be gzip-compressed (zlib reads both forms).
#ifndef DDPX_EXAMPLES_DATA_IDX_H_
#define DDPX_EXAMPLES_DATA_IDX_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ddpx::data {

struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;  // unsigned bytes, row-major
};

// Reads an IDX file of unsigned bytes (type 0x08). Errors name the path and
// what was wrong (missing, bad magic, unsupported type, truncated). With
// max_items >= 0 only the first max_items entries along the first dimension
// are read (and dims[0] says how many): a run on a few images need not
// decompress the whole file.
absl::StatusOr<IdxArray> read_idx_u8(const std::string& path, int64_t max_items = -1);

// Writes an uncompressed IDX file of unsigned bytes (for tests and tools).
absl::Status write_idx_u8(const std::string& path, const IdxArray& array);

}  // namespace ddpx::data

#endif  // DDPX_EXAMPLES_DATA_IDX_H_
