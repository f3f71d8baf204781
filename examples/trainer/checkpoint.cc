#include "examples/trainer/checkpoint.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "examples/trainer/checkpoint_fault.h"
#include "examples/trainer/checkpoint_lock.h"
#include "examples/trainer/checkpoint_manifest.h"
#include "examples/trainer/crc32c.h"
#include "examples/trainer/durable_file.h"

namespace ddpx::trainer {
namespace {

std::string join(const std::string& dir, const std::string& name) { return dir + "/" + name; }

// "step-00000045" -> 45; false for anything else, including the same step
// spelled with other zero padding (only step_dir_name's spelling is ours).
bool parse_step_dir_name(absl::string_view name, int64_t* step) {
  absl::string_view digits = name;
  if (!absl::ConsumePrefix(&digits, "step-") || digits.size() < 8 || digits.size() > 18)
    return false;
  for (char c : digits)
    if (c < '0' || c > '9') return false;
  return absl::SimpleAtoi(digits, step) && step_dir_name(*step) == name;
}

bool exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// Every step-N folder in `dir`, complete or not.
std::vector<int64_t> all_step_dirs(const std::string& dir) {
  std::vector<int64_t> steps;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return steps;
  while (dirent* e = readdir(d)) {
    int64_t step = 0;
    if (parse_step_dir_name(e->d_name, &step)) steps.push_back(step);
  }
  closedir(d);
  std::sort(steps.rbegin(), steps.rend());
  return steps;
}

// Removes a step folder, MANIFEST first: a crash halfway leaves an
// incomplete folder, never a "complete" one with files missing.
absl::Status remove_step_dir(const std::string& step_dir, const std::function<void()>& after_manifest) {
  if (unlink(join(step_dir, kManifestFile).c_str()) != 0 && errno != ENOENT)
    return absl::UnavailableError(absl::StrCat("unlink(", step_dir, "/MANIFEST): ", strerror(errno)));
  if (absl::Status s = sync_dir(step_dir); !s.ok()) return s;
  after_manifest();
  if (DIR* d = opendir(step_dir.c_str())) {
    std::vector<std::string> names;
    while (dirent* e = readdir(d))
      if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) names.push_back(e->d_name);
    closedir(d);
    for (const std::string& n : names) unlink(join(step_dir, n).c_str());
  }
  if (rmdir(step_dir.c_str()) != 0 && errno != ENOENT)
    return absl::UnavailableError(absl::StrCat("rmdir(", step_dir, "): ", strerror(errno)));
  return absl::OkStatus();
}

// Keeps the `keep` newest complete checkpoints up to `committed`; removes
// older and incomplete folders. A complete checkpoint newer than
// `committed` is never removed (resume sets those aside before the first
// save, so none is expected here).
absl::Status prune(const std::string& dir, int64_t committed, int keep, int64_t step_for_faults) {
  int kept = 0;
  bool first_removal = true;
  for (int64_t step : all_step_dirs(dir)) {
    const std::string step_dir = join(dir, step_dir_name(step));
    const bool complete = exists(join(step_dir, kManifestFile));
    if (complete && step > committed) continue;
    if (step <= committed && complete && kept < keep) {
      ++kept;
      continue;
    }
    absl::Status s = remove_step_dir(step_dir, [&] {
      if (first_removal) checkpoint_stop_point(step_for_faults, 0, "pruning");
      first_removal = false;
    });
    if (!s.ok()) return s;
  }
  return sync_dir(dir);
}

// Rank 0: the step's folder exists and holds no MANIFEST (a checkpoint of
// the same step from an abandoned run may have left one).
absl::Status prepare_step_dir(const std::string& dir, const std::string& step_dir) {
  if (absl::Status s = make_dir(dir); !s.ok()) return s;
  if (absl::Status s = make_dir(step_dir); !s.ok()) return s;
  if (unlink(join(step_dir, kManifestFile).c_str()) != 0 && errno != ENOENT)
    return absl::UnavailableError(absl::StrCat("unlink(", step_dir, "/MANIFEST): ", strerror(errno)));
  if (absl::Status s = sync_dir(step_dir); !s.ok()) return s;
  return sync_dir(dir);
}

absl::StatusOr<ManifestEntry> write_checkpoint_file(const std::string& step_dir,
                                                    const std::string& name,
                                                    absl::StatusOr<std::string> contents,
                                                    int64_t step, int rank,
                                                    const std::string& fault_prefix) {
  if (!contents.ok()) return contents.status();
  absl::Status s = write_file_durably(join(step_dir, name), *contents, [&](const char* point) {
    checkpoint_stop_point(step, rank, fault_prefix + "/" + point);
  });
  if (!s.ok()) return s;
  return ManifestEntry{name, contents->size(), crc32c(*contents)};
}

absl::Status with_context(const std::string& context, const absl::Status& s) {
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat(context, ": ", s.message()));
}

// The candidates to resume from, in order: the one `latest` names (or the
// newest complete one when there is no `latest`), then with kAuto every
// older complete one. Problems with `latest` itself refuse in kLatest mode
// and are warnings in kAuto mode.
absl::StatusOr<std::vector<int64_t>> resume_candidates(const CheckpointOptions& o, bool warn) {
  const std::vector<int64_t> complete = complete_checkpoint_steps(o.dir);
  const std::string latest_path = join(o.dir, kLatestFile);
  absl::StatusOr<std::string> latest = read_whole_file(latest_path);
  absl::Status problem;
  int64_t first = -1;
  if (latest.ok()) {
    absl::string_view name = *latest;
    int64_t step = 0;
    if (!absl::ConsumeSuffix(&name, "\n") || !parse_step_dir_name(name, &step)) {
      problem = absl::DataLossError(absl::StrCat(
          latest_path, ": field step: '", absl::CHexEscape(*latest),
          "' is not a checkpoint folder name (step-NNNNNNNN and a newline)"));
    } else if (std::find(complete.begin(), complete.end(), step) == complete.end()) {
      problem = absl::DataLossError(absl::StrCat(latest_path, ": field step: names ",
                                                 std::string(name),
                                                 ", which has no MANIFEST (incomplete or removed)"));
    } else {
      first = step;
    }
  } else if (!absl::IsNotFound(latest.status())) {
    // Not proof of damage: the pointer may be fine once the storage is.
    return with_context("resume: reading the `latest` pointer (an I/O error: not falling back)",
                        latest.status());
  } else if (!complete.empty()) {
    first = complete.front();
  }
  if (!problem.ok()) {
    if (o.resume == ResumeMode::kLatest) return problem;
    if (warn) fprintf(stderr, "warning: resume: %s; trying older checkpoints\n",
                      std::string(problem.message()).c_str());
  }
  std::vector<int64_t> out;
  if (first >= 0) out.push_back(first);
  if (o.resume == ResumeMode::kAuto) {
    for (int64_t step : complete)
      if (first < 0 || step < first) out.push_back(step);
  }
  return out;
}

// Sums one double per rank over the group: every rank learns every slot.
absl::StatusOr<std::vector<double>> gather_by_sum(ProcessGroup& pg, std::vector<double> mine) {
  Tensor t = Tensor::from_vector<double>(mine);
  if (absl::Status s = pg.allreduce({t})->wait(); !s.ok()) return s;
  std::vector<double> out(mine.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = t.item(static_cast<int64_t>(i));
  return out;
}

// Rank 0's outcome of a step only it takes, for every rank: rank 0 gets its
// own status back, the others an error saying rank 0 failed at `what`.
absl::Status agree_on_rank0(ProcessGroup& pg, const absl::Status& rank0, const std::string& what) {
  const double failed = pg.rank() == 0 && !rank0.ok() ? 1.0 : 0.0;
  absl::StatusOr<std::vector<double>> all = gather_by_sum(pg, {failed});
  if (!all.ok()) return with_context(what + ": agreeing with rank 0", all.status());
  if (pg.rank() == 0) return with_context(what, rank0);
  if ((*all)[0] != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, ": rank 0 failed (its message says why)"));
  }
  return absl::OkStatus();
}

// Proof that a checkpoint is damaged, rather than unreadable for now or
// unusable by this run: a size or checksum mismatch (DataLoss), a file the
// manifest lists that is missing (NotFound), a header or manifest that does
// not parse or does not match its place (InvalidArgument). Only these make
// --resume=auto fall back; anything else (an I/O error such as EIO, EACCES
// or ENOSPC, a checkpoint of another world size or hook) stops the resume
// with its own message, since an older step would only hide it.
bool proves_damage(const absl::Status& s) {
  return absl::IsDataLoss(s) || absl::IsNotFound(s) || absl::IsInvalidArgument(s);
}

// Rank 0, after every rank resumed from `resumed`: each complete
// checkpoint newer than it (one that was refused as damaged, or one written
// after `latest` by a run that crashed) is renamed out of the step folders'
// namespace, to step-N.not-resumed, so neither pruning nor this run's own
// saves of the same steps ever remove or overwrite it.
absl::Status set_aside_newer(const std::string& dir, int64_t resumed) {
  bool moved = false;
  for (int64_t step : complete_checkpoint_steps(dir)) {
    if (step <= resumed) continue;
    const std::string from = join(dir, step_dir_name(step));
    std::string to = from + ".not-resumed";
    for (int n = 2; exists(to); ++n) to = absl::StrCat(from, ".not-resumed-", n);
    if (rename(from.c_str(), to.c_str()) != 0) {
      return absl::UnavailableError(
          absl::StrCat("rename(", from, ", ", to, "): ", strerror(errno)));
    }
    moved = true;
    printf("%s is newer than %s, which this run resumed from: kept as %s (never pruned)\n",
           from.c_str(), step_dir_name(resumed).c_str(), to.c_str());
  }
  return moved ? sync_dir(dir) : absl::OkStatus();
}

// The end of every checkpoint once its files are written: the MANIFEST that
// makes the step folder complete, then `latest`, then pruning the older
// steps; each a fault (and kill) point of rank `rank`.
absl::Status publish_checkpoint(const CheckpointOptions& o, const std::string& step_dir,
                                const Manifest& m, int rank) {
  auto observer = [&](const char* prefix) {
    return [&, prefix](const char* point) {
      checkpoint_stop_point(m.step, rank, absl::StrCat(prefix, "/", point));
    };
  };
  absl::Status s =
      write_file_durably(join(step_dir, kManifestFile), encode_manifest(m), observer("manifest"));
  if (s.ok()) {
    s = write_file_durably(join(o.dir, kLatestFile), step_dir_name(m.step) + "\n",
                           observer("latest"));
  }
  if (s.ok()) s = prune(o.dir, m.step, std::max(1, o.keep), m.step);
  checkpoint_stop_point(m.step, rank, "done");
  return with_context("checkpoint of step " + std::to_string(m.step), s);
}

}  // namespace

absl::StatusOr<ResumeMode> parse_resume_mode(const std::string& text) {
  if (text == "latest") return ResumeMode::kLatest;
  if (text == "auto") return ResumeMode::kAuto;
  return absl::InvalidArgumentError("--resume=" + text + ": expected latest or auto");
}

std::string step_dir_name(int64_t step) { return absl::StrFormat("step-%08d", step); }

std::vector<int64_t> complete_checkpoint_steps(const std::string& dir) {
  std::vector<int64_t> out;
  for (int64_t step : all_step_dirs(dir))
    if (exists(join(join(dir, step_dir_name(step)), kManifestFile))) out.push_back(step);
  return out;
}

absl::Status save_checkpoint(const CheckpointOptions& o, ProcessGroup& pg, const Progress& p,
                             const nn::Mlp& model, const nn::Sgd& optimizer,
                             const GradientSync& sync) {
  return save_checkpoint(o, pg, p, MlpTrainState(model, optimizer), sync);
}

absl::StatusOr<Progress> load_rank_checkpoint(const CheckpointOptions& o,
                                              const std::string& step_dir, int rank,
                                              int world_size, nn::Mlp& model,
                                              nn::Sgd& optimizer, GradientSync& sync) {
  MlpTrainState state(model, optimizer);
  return load_rank_checkpoint(o, step_dir, rank, world_size, state, sync);
}

absl::StatusOr<std::optional<Progress>> resume_from_checkpoint(
    const CheckpointOptions& o, ProcessGroup& pg, nn::Mlp& model, nn::Sgd& optimizer,
    GradientSync& sync) {
  MlpTrainState state(model, optimizer);
  return resume_from_checkpoint(o, pg, state, sync);
}

absl::Status save_checkpoint(const CheckpointOptions& o, ProcessGroup& pg, const Progress& p,
                             const TrainState& train_state, const GradientSync& sync) {
  const int rank = pg.rank();
  const int world = pg.size();
  const int64_t step = p.global_step;
  const std::string step_dir = join(o.dir, step_dir_name(step));
  auto stop = [&](const char* point) { checkpoint_stop_point(step, rank, point); };
  stop("begin");
  absl::Status local;
  if (rank == 0) local = hold_checkpoint_lock(o.dir, o.job_id);
  if (rank == 0 && local.ok()) local = prepare_step_dir(o.dir, step_dir);
  stop("dir_ready");
  // Nobody writes into the folder before rank 0 has made it and removed a
  // stale MANIFEST.
  if (absl::Status s = pg.barrier()->wait(); !s.ok()) return s;

  ManifestEntry state, hook;
  if (local.ok() && rank == 0) {
    absl::StatusOr<ManifestEntry> e = write_checkpoint_file(
        step_dir, kStateFile, encode_state_file(p, train_state), step, rank, "state");
    if (e.ok()) state = *e;
    local = e.status();
  }
  if (local.ok()) {
    absl::StatusOr<ManifestEntry> e = write_checkpoint_file(
        step_dir, hook_file_name(rank), encode_hook_file(p, rank, o.hook, sync), step, rank, "hook");
    if (e.ok()) hook = *e;
    local = e.status();
  }
  stop("files_done");

  // Agreement: every rank's [written, size, crc32c] of its hook file.
  std::vector<double> mine(3 * world, 0.0);
  mine[3 * rank] = local.ok() ? 1 : 0;
  mine[3 * rank + 1] = static_cast<double>(hook.size);
  mine[3 * rank + 2] = static_cast<double>(hook.crc32c);
  absl::StatusOr<std::vector<double>> all = gather_by_sum(pg, mine);
  if (!all.ok()) return with_context("checkpoint: agreeing on the written files", all.status());
  const std::string context = absl::StrCat("checkpoint of step ", step, " not committed");
  if (!local.ok()) return with_context(context, local);
  for (int r = 0; r < world; ++r) {
    if ((*all)[3 * r] != 1) {
      return absl::UnavailableError(absl::StrCat(context, ": rank ", r, " could not write ",
                                                 step_dir, "/", hook_file_name(r),
                                                 " (its own message says why)"));
    }
  }
  stop("agreed");
  if (rank != 0) return absl::OkStatus();

  Manifest m{step, world, {state}};
  for (int r = 0; r < world; ++r) {
    m.files.push_back({hook_file_name(r), static_cast<uint64_t>((*all)[3 * r + 1]),
                       static_cast<uint32_t>((*all)[3 * r + 2])});
  }
  return publish_checkpoint(o, step_dir, m, rank);
}

absl::StatusOr<Progress> load_rank_checkpoint(const CheckpointOptions& o,
                                              const std::string& step_dir, int rank,
                                              int world_size, TrainState& train_state,
                                              GradientSync& sync) {
  const std::string manifest_path = join(step_dir, kManifestFile);
  absl::StatusOr<std::string> text = read_whole_file(manifest_path);
  if (!text.ok()) return text.status();
  absl::StatusOr<Manifest> m = parse_manifest(manifest_path, *text);
  if (!m.ok()) return m.status();
  int64_t dir_step = -1;
  const size_t slash = step_dir.rfind('/');
  parse_step_dir_name(slash == std::string::npos ? step_dir : step_dir.substr(slash + 1), &dir_step);
  if (m->step != dir_step) {
    return absl::InvalidArgumentError(absl::StrCat(manifest_path, ": field step = ", m->step,
                                                   ", but it lies in the folder of step ",
                                                   dir_step));
  }
  if (m->world_size != world_size) {
    return absl::FailedPreconditionError(absl::StrCat(
        manifest_path, ": field world_size = ", m->world_size, ", this job has ", world_size,
        " ranks (data order and hook state depend on it)"));
  }
  std::vector<std::string> expected = {kStateFile};
  for (int r = 0; r < world_size; ++r) expected.push_back(hook_file_name(r));
  bool same = m->files.size() == expected.size();
  for (size_t i = 0; same && i < expected.size(); ++i) same = m->files[i].name == expected[i];
  if (!same) {
    return absl::InvalidArgumentError(absl::StrCat(
        manifest_path, ": field file: expected state.bin and hook_rank0..", world_size - 1,
        ".bin in that order, found ", m->files.size(), " other entries"));
  }
  // Reads the file the manifest lists as entry i, checking size and CRC32C.
  auto read_checked = [&](size_t i) -> absl::StatusOr<std::string> {
    const std::string path = join(step_dir, m->files[i].name);
    absl::StatusOr<std::string> contents = read_whole_file(path);
    if (!contents.ok()) {
      if (absl::IsNotFound(contents.status()))
        return absl::NotFoundError(path + ": field file: missing (the manifest lists it)");
      return contents.status();
    }
    if (absl::Status s = check_against_manifest(path, *contents, m->files[i]); !s.ok()) return s;
    return contents;
  };
  CheckpointExpectations expect{m->step, rank, world_size, o.epochs, o.steps_per_epoch, o.hook};

  absl::StatusOr<std::string> state = read_checked(0);
  if (!state.ok()) return state.status();
  absl::StatusOr<Progress> progress =
      decode_state_file(join(step_dir, kStateFile), *state, expect, train_state);
  if (!progress.ok()) return progress.status();
  if (o.reset_hook_state) {
    progress->hook_start_step = progress->global_step;
    return progress;
  }
  absl::StatusOr<std::string> hook = read_checked(1 + rank);
  if (!hook.ok()) return hook.status();
  absl::StatusOr<HookFileHeader> header =
      decode_hook_file(join(step_dir, hook_file_name(rank)), *hook, expect, sync);
  if (!header.ok()) return header.status();
  progress->hook_start_step = header->hook_start_step;
  return progress;
}

absl::StatusOr<std::optional<Progress>> resume_from_checkpoint(
    const CheckpointOptions& o, ProcessGroup& pg, TrainState& train_state, GradientSync& sync) {
  const int rank = pg.rank();
  const int world = pg.size();
  if (absl::Status s = agree_on_rank0(
          pg, rank == 0 ? hold_checkpoint_lock(o.dir, o.job_id) : absl::OkStatus(),
          "checkpoint folder lock");
      !s.ok()) {
    return s;
  }
  absl::StatusOr<std::vector<int64_t>> candidates = resume_candidates(o, rank == 0);
  if (!candidates.ok()) return candidates.status();
  if (candidates->empty()) {
    const size_t incomplete = all_step_dirs(o.dir).size();
    if (rank == 0 && incomplete > 0) {
      printf("%s holds no complete checkpoint (%zu incomplete folders); starting from step 0\n",
             o.dir.c_str(), incomplete);
    }
    return std::optional<Progress>();
  }
  std::string refused;
  for (int64_t step : *candidates) {
    const std::string step_dir = join(o.dir, step_dir_name(step));
    absl::StatusOr<Progress> p =
        load_rank_checkpoint(o, step_dir, rank, world, train_state, sync);
    // Every rank must resume from the same step: agree on the outcome, per
    // rank 0 (loaded), 1 (proved damaged) or 2 (any other error).
    const int mine = p.ok() ? 0 : proves_damage(p.status()) ? 1 : 2;
    // A rank that fails whatever the others found says why before the
    // agreement: once rank 0 returns, a launcher may stop the other ranks
    // before they could print.
    const bool fails_anyway = mine == 2 || (mine == 1 && o.resume == ResumeMode::kLatest);
    if (fails_anyway) {
      fprintf(stderr, "error: resume (rank %d): %s\n", rank,
              std::string(p.status().message()).c_str());
    }
    std::vector<double> outcome(world, 0.0);
    outcome[rank] = mine;
    absl::StatusOr<std::vector<double>> all = gather_by_sum(pg, outcome);
    if (!all.ok()) return with_context("resume: agreeing on the checkpoint", all.status());
    std::string refusers, stoppers;
    for (int r = 0; r < world; ++r) {
      if ((*all)[r] == 1) absl::StrAppend(&refusers, refusers.empty() ? "" : ", ", r);
      if ((*all)[r] == 2) absl::StrAppend(&stoppers, stoppers.empty() ? "" : ", ", r);
    }
    if (refusers.empty() && stoppers.empty()) {
      absl::Status aside = agree_on_rank0(
          pg, rank == 0 ? set_aside_newer(o.dir, step) : absl::OkStatus(),
          "resume: keeping the checkpoints newer than " + step_dir_name(step));
      if (!aside.ok()) return aside;
      return std::optional<Progress>(*p);
    }
    if (!stoppers.empty()) {
      if (!p.ok() && !fails_anyway) {
        fprintf(stderr, "error: resume (rank %d): %s\n", rank,
                std::string(p.status().message()).c_str());
      }
      return absl::FailedPreconditionError(absl::StrCat(
          "resume from ", step_dir, " stopped: rank ", stoppers,
          " could not load it (its error above names the file), which is not proof that it is "
          "damaged, so no fallback to an older checkpoint"));
    }
    if (o.resume == ResumeMode::kLatest) {
      return absl::FailedPreconditionError(absl::StrCat(
          step_dir, " was refused by rank ", refusers,
          " (its error above says which file and field)"));
    }
    if (!p.ok()) {
      fprintf(stderr, "warning: resume (rank %d): %s\n", rank,
              std::string(p.status().message()).c_str());
    }
    if (rank == 0) {
      fprintf(stderr, "warning: resume: %s refused by rank %s; falling back to the previous "
              "complete checkpoint\n", step_dir.c_str(), refusers.c_str());
    }
    absl::StrAppend(&refused, refused.empty() ? "" : ", ", step_dir_name(step));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "resume: no usable checkpoint in ", o.dir, " (refused: ", refused,
      "; see the warnings above); remove the folder or choose another --checkpoint_dir "
      "to start afresh"));
}

absl::Status save_single_writer_checkpoint(const CheckpointOptions& o, int64_t step, int rank,
                                           const std::string& name,
                                           const std::string& contents) {
  const std::string step_dir = join(o.dir, step_dir_name(step));
  auto stop = [&](const std::string& point) { checkpoint_stop_point(step, rank, point); };
  stop("begin");
  if (absl::Status s = hold_checkpoint_lock(o.dir, o.job_id); !s.ok()) return s;
  // Every writer of this job holds the same state at `step`: a complete
  // checkpoint of it is already this one (rewriting it would leave it
  // without a MANIFEST for a while).
  const std::vector<int64_t> complete = complete_checkpoint_steps(o.dir);
  if (std::find(complete.begin(), complete.end(), step) != complete.end()) {
    return absl::OkStatus();
  }
  if (absl::Status s = prepare_step_dir(o.dir, step_dir); !s.ok()) {
    return with_context("checkpoint of step " + std::to_string(step), s);
  }
  stop("dir_ready");
  absl::StatusOr<ManifestEntry> file =
      write_checkpoint_file(step_dir, name, contents, step, rank, "state");
  if (!file.ok()) return with_context("checkpoint of step " + std::to_string(step), file.status());
  stop("files_done");
  return publish_checkpoint(o, step_dir, Manifest{step, 1, {*file}}, rank);
}

absl::StatusOr<std::optional<int64_t>> resume_single_writer_checkpoint(
    const CheckpointOptions& o, const std::string& name,
    const std::function<absl::Status(const std::string& path, const std::string& contents)>&
        load) {
  if (absl::Status s = hold_checkpoint_lock(o.dir, o.job_id); !s.ok()) return s;
  absl::StatusOr<std::vector<int64_t>> candidates = resume_candidates(o, /*warn=*/true);
  if (!candidates.ok()) return candidates.status();
  std::string refused;
  for (int64_t step : *candidates) {
    const std::string step_dir = join(o.dir, step_dir_name(step));
    const std::string manifest_path = join(step_dir, kManifestFile);
    const std::string path = join(step_dir, name);
    absl::Status s = [&]() -> absl::Status {
      absl::StatusOr<std::string> text = read_whole_file(manifest_path);
      if (!text.ok()) return text.status();
      absl::StatusOr<Manifest> m = parse_manifest(manifest_path, *text);
      if (!m.ok()) return m.status();
      if (m->step != step) {
        return absl::InvalidArgumentError(absl::StrCat(
            manifest_path, ": field step = ", m->step, ", but it lies in the folder of step ", step));
      }
      if (m->files.size() != 1 || m->files[0].name != name) {
        return absl::InvalidArgumentError(absl::StrCat(
            manifest_path, ": field file: expected ", name, " alone (a checkpoint one process "
            "wrote), found ", m->files.size(), " entries", m->files.empty() ? "" : " from ",
            m->files.empty() ? "" : m->files[0].name));
      }
      absl::StatusOr<std::string> contents = read_whole_file(path);
      if (!contents.ok()) {
        if (absl::IsNotFound(contents.status()))
          return absl::NotFoundError(path + ": field file: missing (the manifest lists it)");
        return contents.status();
      }
      if (absl::Status c = check_against_manifest(path, *contents, m->files[0]); !c.ok()) return c;
      return load(path, *contents);
    }();
    if (s.ok()) {
      if (absl::Status a = set_aside_newer(o.dir, step); !a.ok()) return a;
      return std::optional<int64_t>(step);
    }
    if (o.resume == ResumeMode::kLatest || !proves_damage(s)) return s;
    fprintf(stderr, "warning: resume: %s; falling back to the previous complete checkpoint\n",
            std::string(s.message()).c_str());
    absl::StrAppend(&refused, refused.empty() ? "" : ", ", step_dir_name(step));
  }
  if (!refused.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "resume: no usable checkpoint in ", o.dir, " (refused: ", refused,
        "; see the warnings above); remove the folder or choose another --checkpoint_dir "
        "to start afresh"));
  }
  return std::optional<int64_t>();
}

}  // namespace ddpx::trainer
