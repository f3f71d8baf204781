// float16 reductions with the CPU's F16C conversions, eight elements at a
// time: the portable Half conversions (half.h) branch per element and
// made a float16 allreduce several times slower than the float32 one of
// twice the bytes. The same bits as reduce3<Half, Op> for every input that
// is not a NaN (a NaN stays a NaN; its payload bits may differ).
#ifndef DDPX_PROCESS_GROUP_GLOO_HALF_REDUCE_H_
#define DDPX_PROCESS_GROUP_GLOO_HALF_REDUCE_H_

#include "process_group/gloo/reduce_kernels.h"

namespace ddpx {

// Whether this CPU has F16C (and AVX); the functions below need it.
bool cpu_has_f16c();

// out[i] = a[i] op b[i] for float16, op one of SUM (also AVG's sum),
// PRODUCT, MIN, MAX; null for the others.
UntypedReduceFn half_reduce_f16c(ReduceOp op);

}  // namespace ddpx

#endif  // DDPX_PROCESS_GROUP_GLOO_HALF_REDUCE_H_
