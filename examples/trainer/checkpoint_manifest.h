// A checkpoint's manifest: the last file written into a step's folder, once
// every rank has finished its files. A folder without one is an incomplete
// checkpoint. It lists each file with its size and CRC32C, so a resume
// checks every byte before trusting it. Strict line format, no exceptions:
//
//   ddpx-checkpoint-manifest 1
//   step 45
//   world_size 2
//   file state.bin 862440 0x1a2b3c4d
//   file hook_rank0.bin 2345 0x0badcafe
//   file hook_rank1.bin 2345 0x600dbeef
//   manifest_crc32c 0x89abcdef          (of every byte before this line)
#ifndef DDPX_EXAMPLES_TRAINER_CHECKPOINT_MANIFEST_H_
#define DDPX_EXAMPLES_TRAINER_CHECKPOINT_MANIFEST_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ddpx::trainer {

inline constexpr char kManifestFile[] = "MANIFEST";

struct ManifestEntry {
  std::string name;  // a file name in the step's folder ([A-Za-z0-9_.-]+)
  uint64_t size = 0;
  uint32_t crc32c = 0;
};

struct Manifest {
  int64_t step = 0;
  int64_t world_size = 0;
  std::vector<ManifestEntry> files;
};

std::string encode_manifest(const Manifest& manifest);

// Errors name `path`, the line and the field.
absl::StatusOr<Manifest> parse_manifest(const std::string& path, absl::string_view text);

// `contents` (of the file at `path`) has the entry's size and CRC32C.
absl::Status check_against_manifest(const std::string& path, absl::string_view contents,
                                    const ManifestEntry& entry);

}  // namespace ddpx::trainer

#endif  // DDPX_EXAMPLES_TRAINER_CHECKPOINT_MANIFEST_H_
