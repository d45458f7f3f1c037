/* tidlx deploy folder, checks only: TIDL subgraph calls served by the parent process over the
 * driver's stdin/stdout (the protocol is in docs/tvm.md, "The pipe bridge"). */
#ifndef TIDLX_TIDL_PIPE_H_
#define TIDLX_TIDL_PIPE_H_

#include <stddef.h>
#include <stdint.h>
#include "dlpack/dlpack.h"

/* Sends subgraph N's inputs to the parent, reads its outputs back; 0 on success. */
int32_t tidlx_pipe_subgraph(int32_t subgraph, const DLTensor* inputs, int32_t num_inputs, DLTensor* outputs,
                            int32_t num_outputs);
/* Exact reads and writes of the pipe; 0 on success. */
int tidlx_pipe_read(void* data, size_t nbytes);
int tidlx_pipe_write(const void* data, size_t nbytes);

#endif
