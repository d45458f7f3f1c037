/* tidlx deploy folder, checks only: the pipe bridge behind tidl_subgraph_<N>_process. A request
 * is "TIDL", int32 N, int32 number of inputs, then per input uint64 byte count and the bytes (all
 * little-endian, as the three targets are); the reply is "OKAY" and each output's bytes, or "FAIL". */
#include <stdio.h>
#include <string.h>

#include "tidl_pipe.h"
#include "tidlx_runtime.h"

int tidlx_pipe_read(void* data, size_t nbytes) {
  return nbytes == 0 || fread(data, 1, nbytes, stdin) == nbytes ? 0 : -1;
}

int tidlx_pipe_write(const void* data, size_t nbytes) {
  return nbytes == 0 || fwrite(data, 1, nbytes, stdout) == nbytes ? 0 : -1;
}

static uint64_t tensor_bytes(const DLTensor* t) {
  uint64_t n = ((uint64_t)t->dtype.bits * t->dtype.lanes + 7) / 8;
  int32_t i;
  for (i = 0; i < t->ndim; ++i) n *= (uint64_t)t->shape[i];
  return n;
}

int32_t tidlx_pipe_subgraph(int32_t subgraph, const DLTensor* inputs, int32_t num_inputs, DLTensor* outputs,
                            int32_t num_outputs) {
  char reply[4];
  int32_t i;
  int failed = tidlx_pipe_write("TIDL", 4) || tidlx_pipe_write(&subgraph, 4) || tidlx_pipe_write(&num_inputs, 4);
  for (i = 0; i < num_inputs && !failed; ++i) {
    uint64_t n = tensor_bytes(&inputs[i]);
    failed = tidlx_pipe_write(&n, 8) || tidlx_pipe_write((const char*)inputs[i].data + inputs[i].byte_offset, (size_t)n);
  }
  if (failed || fflush(stdout) != 0) {
    tidlx_set_error("TIDL subgraph bridge: writing the request failed");
    return -1;
  }
  if (tidlx_pipe_read(reply, 4) != 0 || memcmp(reply, "OKAY", 4) != 0) {
    tidlx_set_error("TIDL subgraph bridge: the parent did not run the subgraph");
    return -1;
  }
  for (i = 0; i < num_outputs; ++i) {
    if (tidlx_pipe_read((char*)outputs[i].data + outputs[i].byte_offset, (size_t)tensor_bytes(&outputs[i])) != 0) {
      tidlx_set_error("TIDL subgraph bridge: reading the outputs failed");
      return -1;
    }
  }
  return 0;
}
