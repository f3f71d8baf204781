// Little-endian binary records for checkpoints: named float32 tensors
// (integers by core/little_endian.h).
#ifndef DDPX_EXAMPLES_NN_SERIALIZE_H_
#define DDPX_EXAMPLES_NN_SERIALIZE_H_

#include <cstdint>
#include <iosfwd>
#include <string>

#include "absl/status/status.h"
#include "core/tensor.h"

namespace ddpx::nn {

void write_string(std::ostream& out, const std::string& s);
bool read_string(std::istream& in, std::string* s);

// name, shape, raw bytes.
void write_tensor(std::ostream& out, const std::string& name, const Tensor& t);
// Reads a record into `t`; errors name the expected and found name/shape.
absl::Status read_tensor_into(std::istream& in, const std::string& name,
                              const Tensor& t);

}  // namespace ddpx::nn

#endif  // DDPX_EXAMPLES_NN_SERIALIZE_H_
