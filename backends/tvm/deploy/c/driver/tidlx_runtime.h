/* tidlx deploy folder: what the driver reads of the runtime (driver/tidlx_runtime.c). */
#ifndef TIDLX_RUNTIME_H_
#define TIDLX_RUNTIME_H_

#ifdef __cplusplus
extern "C" {
#endif

/* The message of the last failing kernel or TIDL subgraph call ("" when none). */
const char* tidlx_last_error(void);
/* Sets that message (a TIDL subgraph implementation reports its failure with it). */
void tidlx_set_error(const char* message);

#ifdef __cplusplus
}
#endif
#endif
