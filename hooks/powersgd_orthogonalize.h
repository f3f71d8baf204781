// Orthogonalization of PowerSGD's low-rank factors P (rows x rank) and
// Q (cols x rank), stored row-major.
#ifndef DDPX_HOOKS_POWERSGD_ORTHOGONALIZE_H_
#define DDPX_HOOKS_POWERSGD_ORTHOGONALIZE_H_

#include <cstdint>

namespace ddpx {

// Makes the `cols` columns of the row-major `rows` x `cols` matrix `m`
// orthonormal in place by modified Gram-Schmidt, in the order torch's
// _orthogonalize_gram_schmidt uses: normalize column i (dividing by
// norm + epsilon), then remove its projection from every later column.
//
// With epsilon == 0 a column whose norm is 0 cannot be normalized; torch then
// produces NaNs (its ZeroDivisionError branch never fires on tensors). We do
// what torch's comment says it means to do: the column becomes all zeros.
// Returns the number of such zero columns (0 when all went well).
//
// torch switches to Householder QR for rank > 2; for full-rank input both give
// the same orthonormal basis up to the sign of each column, and the sign
// cancels in PowerSGD's product P Q^T, so Gram-Schmidt is used for every rank
// (it also honours epsilon, which QR ignores).
int orthogonalize_columns(float* m, int64_t rows, int64_t cols, float epsilon);

}  // namespace ddpx

#endif  // DDPX_HOOKS_POWERSGD_ORTHOGONALIZE_H_
