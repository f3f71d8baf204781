// Files that survive a crash at any instant: written under a temporary name,
// flushed to the disk (fsync), renamed over the final name, and the folder
// flushed so the rename itself is on disk. A reader then sees either the old
// file or the whole new one, never a part.
#ifndef DDPX_EXAMPLES_TRAINER_DURABLE_FILE_H_
#define DDPX_EXAMPLES_TRAINER_DURABLE_FILE_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ddpx::trainer {

// Called between the steps of write_file_durably with the step's name
// ("tmp_half", "tmp_written", "tmp_synced", "renamed"): the checkpoint
// kill test stops a rank there (checkpoint_fault.h).
using WriteObserver = std::function<void(const char* point)>;

// Writes `contents` to `path` as described above. Errors name the path and
// the system call that failed.
absl::Status write_file_durably(const std::string& path, absl::string_view contents,
                                const WriteObserver& observe = nullptr);

// fsync of a folder: makes the creation, rename or removal of its entries
// durable.
absl::Status sync_dir(const std::string& dir);

// The whole file; NotFound when it does not exist.
absl::StatusOr<std::string> read_whole_file(const std::string& path);

// Creates `dir` if missing (its parent must exist).
absl::Status make_dir(const std::string& dir);

}  // namespace ddpx::trainer

#endif  // DDPX_EXAMPLES_TRAINER_DURABLE_FILE_H_
