#include "examples/nn/serialize.h"

#include <istream>
#include <ostream>

#include "core/little_endian.h"

namespace ddpx::nn {

using little_endian::get_u64;
using little_endian::put_u64;

void write_string(std::ostream& out, const std::string& s) {
  put_u64(out, s.size());
  out.write(s.data(), static_cast<std::streamsize>(s.size()));
}

bool read_string(std::istream& in, std::string* s) {
  uint64_t n = 0;
  if (!get_u64(in, &n) || n > (1u << 20)) return false;
  s->resize(n);
  return static_cast<bool>(in.read(&(*s)[0], static_cast<std::streamsize>(n)));
}

void write_tensor(std::ostream& out, const std::string& name, const Tensor& t) {
  write_string(out, name);
  put_u64(out, t.shape().size());
  for (int64_t d : t.shape()) put_u64(out, static_cast<uint64_t>(d));
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
  if (!get_u64(in, &dims) || dims > 8)
    return absl::DataLossError("checkpoint: bad shape for '" + name + "'");
  Shape shape(dims);
  for (auto& d : shape) {
    uint64_t v = 0;
    if (!get_u64(in, &v)) return absl::DataLossError("checkpoint: truncated shape of '" + name + "'");
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
