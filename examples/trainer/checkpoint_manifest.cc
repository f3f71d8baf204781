#include "examples/trainer/checkpoint_manifest.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "examples/trainer/crc32c.h"

namespace ddpx::trainer {
namespace {

constexpr char kHeader[] = "ddpx-checkpoint-manifest 1";
constexpr char kCrcKey[] = "manifest_crc32c";
constexpr size_t kMaxFiles = 1 << 16;

std::string hex32(uint32_t v) { return absl::StrFormat("0x%08x", v); }

// "0x" and exactly 8 lowercase hex digits.
bool parse_hex32(absl::string_view s, uint32_t* v) {
  if (s.size() != 10 || s.substr(0, 2) != "0x") return false;
  *v = 0;
  for (char c : s.substr(2)) {
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else return false;
    *v = (*v << 4) | static_cast<uint32_t>(d);
  }
  return true;
}

// Digits only (SimpleAtoi also takes signs and spaces).
bool parse_count(absl::string_view s, uint64_t* v) {
  if (s.empty() || s.size() > 19) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return absl::SimpleAtoi(s, v);
}

bool safe_file_name(absl::string_view s) {
  if (s.empty() || s == "." || s == "..") return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

std::string encode_manifest(const Manifest& m) {
  std::string out = absl::StrCat(kHeader, "\nstep ", m.step, "\nworld_size ", m.world_size, "\n");
  for (const ManifestEntry& f : m.files)
    absl::StrAppend(&out, "file ", f.name, " ", f.size, " ", hex32(f.crc32c), "\n");
  absl::StrAppend(&out, kCrcKey, " ", hex32(crc32c(out)), "\n");
  return out;
}

absl::StatusOr<Manifest> parse_manifest(const std::string& path, absl::string_view text) {
  auto bad = [&](size_t line, const std::string& field, const std::string& what) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": line ", line, ": field ", field, ": ", what));
  };
  // The checksum line first: nothing else is trusted before it matches.
  const size_t crc_at = text.rfind(absl::StrCat("\n", kCrcKey, " "));
  if (text.empty() || text.back() != '\n' || crc_at == absl::string_view::npos) {
    return absl::DataLossError(absl::StrCat(path, ": field ", kCrcKey,
                                            ": missing (the manifest is truncated)"));
  }
  const absl::string_view covered = text.substr(0, crc_at + 1);
  absl::string_view crc_text = text.substr(crc_at + 1 + sizeof(kCrcKey));
  crc_text.remove_suffix(1);
  uint32_t stated = 0;
  if (!parse_hex32(crc_text, &stated)) {
    return absl::DataLossError(absl::StrCat(path, ": field ", kCrcKey, " = '", crc_text,
                                            "' is not 0x followed by 8 hex digits"));
  }
  if (stated != crc32c(covered)) {
    return absl::DataLossError(absl::StrCat(path, ": field ", kCrcKey, " = ", hex32(stated),
                                            ", but the manifest's bytes have ",
                                            hex32(crc32c(covered)),
                                            " (the manifest was changed or damaged)"));
  }

  std::vector<absl::string_view> lines = absl::StrSplit(covered, '\n');
  lines.pop_back();  // after the last '\n'
  if (lines.size() < 3 || lines[0] != kHeader) {
    return bad(1, "header", absl::StrCat("expected '", kHeader, "'"));
  }
  Manifest m;
  uint64_t v = 0;
  auto keyed = [&](size_t i, absl::string_view key, int64_t* out) -> absl::Status {
    std::vector<absl::string_view> t = absl::StrSplit(lines[i], ' ');
    if (t.size() != 2 || t[0] != key || !parse_count(t[1], &v) || v > (uint64_t{1} << 62)) {
      return bad(i + 1, std::string(key), absl::StrCat("expected '", key, " <number>', got '",
                                                       lines[i], "'"));
    }
    *out = static_cast<int64_t>(v);
    return absl::OkStatus();
  };
  if (absl::Status s = keyed(1, "step", &m.step); !s.ok()) return s;
  if (absl::Status s = keyed(2, "world_size", &m.world_size); !s.ok()) return s;
  if (lines.size() - 3 > kMaxFiles) return bad(3, "file", "too many files");
  for (size_t i = 3; i < lines.size(); ++i) {
    std::vector<absl::string_view> t = absl::StrSplit(lines[i], ' ');
    ManifestEntry f;
    if (t.size() != 4 || t[0] != "file" || !safe_file_name(t[1]) || !parse_count(t[2], &f.size) ||
        !parse_hex32(t[3], &f.crc32c)) {
      return bad(i + 1, "file",
                 absl::StrCat("expected 'file <name> <size> 0x<crc32c>', got '", lines[i], "'"));
    }
    f.name = std::string(t[1]);
    m.files.push_back(std::move(f));
  }
  return m;
}

absl::Status check_against_manifest(const std::string& path, absl::string_view contents,
                                    const ManifestEntry& entry) {
  if (contents.size() != entry.size) {
    return absl::DataLossError(absl::StrCat(path, ": field size = ", contents.size(),
                                            " bytes, the manifest says ", entry.size,
                                            " (truncated or replaced)"));
  }
  const uint32_t crc = crc32c(contents);
  if (crc != entry.crc32c) {
    return absl::DataLossError(absl::StrCat(path, ": field crc32c = ", hex32(crc),
                                            ", the manifest says ", hex32(entry.crc32c),
                                            " (the file was changed or damaged)"));
  }
  return absl::OkStatus();
}

}  // namespace ddpx::trainer
