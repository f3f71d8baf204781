#include "examples/nn/serialize.h"

#include <istream>
#include <ostream>

namespace ddpx::nn {

void write_u64(std::ostream& out, uint64_t v) {
  unsigned char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));
  out.write(reinterpret_cast<const char*>(b), 8);
}

bool read_u64(std::istream& in, uint64_t* v) {
  unsigned char b[8];
  if (!in.read(reinterpret_cast<char*>(b), 8)) return false;
  *v = 0;
  for (int i = 0; i < 8; ++i) *v |= static_cast<uint64_t>(b[i]) << (8 * i);
  return true;
}

void write_string(std::ostream& out, const std::string& s) {
  write_u64(out, s.size());
  out.write(s.data(), static_cast<std::streamsize>(s.size()));
}

bool read_string(std::istream& in, std::string* s) {
  uint64_t n = 0;
  if (!read_u64(in, &n) || n > (1u << 20)) return false;
  s->resize(n);
  return static_cast<bool>(in.read(&(*s)[0], static_cast<std::streamsize>(n)));
}

void write_tensor(std::ostream& out, const std::string& name, const Tensor& t) {
  write_string(out, name);
  write_u64(out, t.shape().size());
  for (int64_t d : t.shape()) write_u64(out, static_cast<uint64_t>(d));
  out.write(static_cast<const char*>(t.data()), static_cast<std::streamsize>(t.nbytes()));
}

absl::Status read_tensor_into(std::istream& in, const std::string& name,
                              const Tensor& t) {
  std::string found;
  if (!read_string(in, &found))
    return absl::DataLossError("checkpoint ends before tensor '" + name + "'");
  if (found != name) {
    return absl::InvalidArgumentError("checkpoint holds tensor '" + found +
                                      "' where '" + name + "' was expected");
  }
  uint64_t dims = 0;
  if (!read_u64(in, &dims) || dims > 8)
    return absl::DataLossError("checkpoint: bad shape for '" + name + "'");
  Shape shape(dims);
  for (auto& d : shape) {
    uint64_t v = 0;
    if (!read_u64(in, &v)) return absl::DataLossError("checkpoint: truncated shape of '" + name + "'");
    d = static_cast<int64_t>(v);
  }
  if (shape != t.shape()) {
    return absl::InvalidArgumentError("checkpoint tensor '" + name + "' has shape " +
                                      shape_str(shape) + ", expected " +
                                      shape_str(t.shape()));
  }
  if (!in.read(static_cast<char*>(t.data()), static_cast<std::streamsize>(t.nbytes())))
    return absl::DataLossError("checkpoint: truncated data of '" + name + "'");
  return absl::OkStatus();
}

}  // namespace ddpx::nn
