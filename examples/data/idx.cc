#include "examples/data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

namespace ddpx::data {
namespace {

constexpr uint8_t kTypeU8 = 0x08;

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};

// Reads exactly n bytes or reports how many came.
absl::Status read_exact(gzFile f, void* dst, size_t n, const std::string& path,
                        const char* what) {
  size_t done = 0;
  auto* out = static_cast<unsigned char*>(dst);
  while (done < n) {
    const unsigned chunk = static_cast<unsigned>(std::min<size_t>(n - done, 1u << 30));
    const int got = gzread(f, out + done, chunk);
    if (got < 0) {
      int err = 0;
      return absl::DataLossError(path + ": cannot read " + what + ": " + gzerror(f, &err));
    }
    if (got == 0) {
      return absl::DataLossError(path + ": file ends after " + std::to_string(done) +
                                 " of " + std::to_string(n) + " bytes of " + what);
    }
    done += static_cast<size_t>(got);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<IdxArray> read_idx_u8(const std::string& path, int64_t max_items) {
  std::unique_ptr<gzFile_s, GzCloser> f(gzopen(path.c_str(), "rb"));
  if (!f) {
    return absl::NotFoundError(path + ": cannot open: " + strerror(errno));
  }
  unsigned char header[4];
  absl::Status s = read_exact(f.get(), header, 4, path, "the IDX header");
  if (!s.ok()) return s;
  if (header[0] != 0 || header[1] != 0) {
    char got[16];
    snprintf(got, sizeof(got), "%02x %02x", header[0], header[1]);
    return absl::InvalidArgumentError(path + ": not an IDX file (magic starts " +
                                      got + ", expected 00 00)");
  }
  if (header[2] != kTypeU8) {
    return absl::InvalidArgumentError(path + ": IDX element type 0x" +
                                      std::to_string(header[2]) +
                                      " is not supported (only unsigned bytes, 0x08)");
  }
  const int ndims = header[3];
  if (ndims < 1 || ndims > 4) {
    return absl::InvalidArgumentError(path + ": IDX file has " +
                                      std::to_string(ndims) + " dimensions (1 to 4 supported)");
  }
  IdxArray array;
  int64_t total = 1;
  for (int d = 0; d < ndims; ++d) {
    unsigned char b[4];
    s = read_exact(f.get(), b, 4, path, "the IDX dimensions");
    if (!s.ok()) return s;
    const int64_t dim = (int64_t{b[0]} << 24) | (b[1] << 16) | (b[2] << 8) | b[3];
    array.dims.push_back(dim);
    total *= dim;
    if (total > (int64_t{1} << 34)) {
      return absl::InvalidArgumentError(path + ": IDX dimensions are implausibly large");
    }
  }
  if (max_items >= 0 && max_items < array.dims[0]) {
    total = total / std::max<int64_t>(array.dims[0], 1) * max_items;
    array.dims[0] = max_items;
  }
  array.bytes.resize(static_cast<size_t>(total));
  s = read_exact(f.get(), array.bytes.data(), array.bytes.size(), path, "the IDX data");
  if (!s.ok()) return s;
  return array;
}

absl::Status write_idx_u8(const std::string& path, const IdxArray& array) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(fopen(path.c_str(), "wb"), fclose);
  if (!f) return absl::UnavailableError(path + ": cannot create: " + strerror(errno));
  unsigned char header[4] = {0, 0, kTypeU8, static_cast<unsigned char>(array.dims.size())};
  fwrite(header, 1, 4, f.get());
  for (int64_t dim : array.dims) {
    unsigned char b[4] = {static_cast<unsigned char>(dim >> 24),
                          static_cast<unsigned char>(dim >> 16),
                          static_cast<unsigned char>(dim >> 8),
                          static_cast<unsigned char>(dim)};
    fwrite(b, 1, 4, f.get());
  }
  if (fwrite(array.bytes.data(), 1, array.bytes.size(), f.get()) != array.bytes.size())
    return absl::DataLossError(path + ": short write");
  return absl::OkStatus();
}

}  // namespace ddpx::data
