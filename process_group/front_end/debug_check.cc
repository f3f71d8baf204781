#include "process_group/front_end/debug_check.h"

#include <algorithm>
#include <cstdlib>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace ddpx {

bool debug_detail_from_env() {
  const char* value = std::getenv("DDPX_DISTRIBUTED_DEBUG");
  return value != nullptr && absl::AsciiStrToUpper(value) == "DETAIL";
}

namespace {

std::string bracketed(const std::vector<std::string>& items) {
  return absl::StrCat("[", absl::StrJoin(items, ", "), "]");
}

}  // namespace

CollectiveFingerprint::CollectiveFingerprint(OpType op) : op_(op) { add("op", Source::kOp); }

CollectiveFingerprint& CollectiveFingerprint::tensors(
    const std::vector<Tensor>& tensors) {
  const bool first = !traced_tensors_;
  dtypes(tensors);
  bool fits = first && tensors.size() <= TraceOp::kMaxTensors;
  for (size_t i = 0; fits && i < tensors.size(); ++i) {
    const Shape& shape = tensors[i].shape();
    fits = shape.size() <= kMaxInlineDims;
    if (!fits) break;
    ndims_[i] = static_cast<int8_t>(shape.size());
    std::copy(shape.begin(), shape.end(), dims_[i]);
  }
  if (fits) {
    add("shapes", Source::kShapes);
    return *this;
  }
  std::vector<std::string> shapes;
  for (const Tensor& t : tensors) shapes.push_back(shape_str(t.shape()));
  add("shapes", Source::kText, bracketed(shapes));
  return *this;
}

CollectiveFingerprint& CollectiveFingerprint::dtypes(
    const std::vector<Tensor>& tensors) {
  const bool first = !traced_tensors_;
  if (first) {
    trace_.add(tensors);
    traced_tensors_ = true;
  }
  if (first && tensors.size() <= TraceOp::kMaxTensors) {
    add("dtypes", Source::kDtypes);
    return *this;
  }
  std::vector<std::string> names;
  for (const Tensor& t : tensors) names.push_back(dtype_name(t.dtype()));
  add("dtypes", Source::kText, bracketed(names));
  return *this;
}

CollectiveFingerprint& CollectiveFingerprint::root(int root_rank) {
  trace_.root = root_rank;
  add("root", Source::kText, absl::StrCat(root_rank));  // short: no allocation
  return *this;
}

CollectiveFingerprint& CollectiveFingerprint::reduce_op(ReduceOp op) {
  trace_.reduce_op = static_cast<int8_t>(op);
  add("reduce_op", Source::kText, reduce_op_name(op));  // short: no allocation
  return *this;
}

CollectiveFingerprint& CollectiveFingerprint::peer(int rank, int tag) {
  trace_.peer = rank;
  trace_.tag = tag;
  return *this;
}

std::string CollectiveFingerprint::value_of(const Field& field) const {
  switch (field.source) {
    case Source::kText:
      return field.text;
    case Source::kOp:
      return op_type_name(op_);
    case Source::kDtypes: {
      std::vector<std::string> names;
      for (int i = 0; i < trace_.ntensors; ++i) names.push_back(dtype_name(trace_.dtypes[i]));
      return bracketed(names);
    }
    case Source::kShapes: {
      std::vector<std::string> shapes;
      for (int i = 0; i < trace_.ntensors; ++i) {
        shapes.push_back(shape_str(Shape(dims_[i], dims_[i] + ndims_[i])));
      }
      return bracketed(shapes);
    }
  }
  return field.text;
}

std::vector<std::pair<std::string, std::string>> CollectiveFingerprint::fields() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const Field& f : fields_) out.emplace_back(f.name, value_of(f));
  return out;
}

std::string CollectiveFingerprint::encode() const {
  std::string out;
  for (const Field& f : fields_) absl::StrAppend(&out, f.name, "=", value_of(f), "\n");
  return out;
}

std::vector<std::pair<std::string, std::string>> CollectiveFingerprint::decode(
    const std::string& text) {
  std::vector<std::pair<std::string, std::string>> fields;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv =
        absl::StrSplit(line, absl::MaxSplits('=', 1));
    fields.push_back(std::move(kv));
  }
  return fields;
}

DebugChecker::DebugChecker(std::shared_ptr<Store> store, int rank, int size)
    : store_(std::move(store)), rank_(rank), size_(size) {}

std::string DebugChecker::key(uint64_t seq, const std::string& what) const {
  return absl::StrCat("ddpx_debug/", seq, "/", what);
}

absl::Status DebugChecker::check(const CollectiveFingerprint& fingerprint,
                                 std::chrono::milliseconds timeout) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t seq = next_seq_++;
  const std::string what = absl::StrCat(
      "DDPX_DISTRIBUTED_DEBUG=DETAIL: collective #", seq, " (",
      op_type_name(fingerprint.op()), ") on rank ", rank_);

  absl::Status s = store_->set(key(seq, absl::StrCat(rank_)), fingerprint.encode());
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));

  std::vector<std::string> keys;
  for (int r = 0; r < size_; ++r) keys.push_back(key(seq, absl::StrCat(r)));
  s = store_->wait(keys, timeout);
  if (!s.ok()) {
    // Name the ranks that never posted: they hang, died, or issue fewer
    // collectives than this one.
    std::vector<int> missing;
    for (int r = 0; r < size_; ++r) {
      absl::StatusOr<bool> present = store_->check({keys[r]});
      if (present.ok() && !*present) missing.push_back(r);
    }
    return absl::DeadlineExceededError(absl::StrCat(
        what, ": ranks [", absl::StrJoin(missing, ", "),
        "] did not reach this collective within ", timeout.count(),
        " ms (they hang, exited, or called fewer collectives); store said: ",
        s.message()));
  }
  absl::StatusOr<std::vector<Bytes>> all = store_->multi_get(keys);
  if (!all.ok()) {
    return absl::Status(all.status().code(),
                        absl::StrCat(what, ": ", all.status().message()));
  }
  absl::Status verdict = compare(*all);
  cleanup(seq, keys);
  if (!verdict.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", verdict.message()));
  }
  return absl::OkStatus();
}

absl::Status DebugChecker::compare(const std::vector<Bytes>& all) const {
  std::vector<std::vector<std::pair<std::string, std::string>>> per_rank;
  for (const Bytes& b : all) per_rank.push_back(CollectiveFingerprint::decode(to_string(b)));

  // Field names in first-seen order, so the message reads op, dtypes, shapes...
  std::vector<std::string> names;
  for (const auto& fields : per_rank) {
    for (const auto& kv : fields) {
      if (std::find(names.begin(), names.end(), kv.first) == names.end()) {
        names.push_back(kv.first);
      }
    }
  }
  std::vector<std::string> differences;
  for (const std::string& name : names) {
    // value -> ranks holding it, in first-seen order of values.
    std::vector<std::pair<std::string, std::vector<int>>> groups;
    for (int r = 0; r < static_cast<int>(per_rank.size()); ++r) {
      std::string value = "(absent)";
      for (const auto& kv : per_rank[r]) {
        if (kv.first == name) value = kv.second;
      }
      auto it = std::find_if(groups.begin(), groups.end(),
                             [&](const auto& g) { return g.first == value; });
      if (it == groups.end()) {
        groups.push_back({value, {r}});
      } else {
        it->second.push_back(r);
      }
    }
    if (groups.size() < 2) continue;
    std::vector<std::string> parts;
    for (const auto& [value, ranks] : groups) {
      parts.push_back(absl::StrCat(ranks.size() == 1 ? "rank " : "ranks ",
                                   absl::StrJoin(ranks, ","), ": ", value));
    }
    differences.push_back(absl::StrCat(name, " mismatch (", absl::StrJoin(parts, "; "), ")"));
  }
  if (differences.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "ranks disagree on this collective: ", absl::StrJoin(differences, "; ")));
}

void DebugChecker::cleanup(uint64_t seq, const std::vector<std::string>& keys) {
  // The last rank to finish reading removes the keys, keeping the store small
  // over a long job. Failures here only leave garbage behind.
  const std::string readers = key(seq, "read");
  absl::StatusOr<int64_t> done = store_->add(readers, 1);
  if (!done.ok() || *done != size_) return;
  for (const std::string& k : keys) store_->delete_key(k).IgnoreError();
  store_->delete_key(readers).IgnoreError();
}

}  // namespace ddpx
