/* tidlx deploy folder, LLVM targets (x86, arm): a deploy_lib.so built by TVM's LLVM backend calls
 * the runtime through function-pointer slots named "__<function>" that a loader fills in; this
 * fills them with driver/tidlx_runtime.c's functions. A slot the library does not have stays an
 * unresolved weak reference (NULL) and is skipped. */
#include <stdint.h>

#include "tvm/ffi/c_api.h"
#include "tvm/runtime/c_backend_api.h"
#include "tidlx_runtime.h"

typedef void* (*tidlx_alloc_fn)(int, int, uint64_t, int, int);
typedef int (*tidlx_free_fn)(int, int, void*);
typedef int (*tidlx_launch_fn)(FTVMParallelLambda, void*, int);
typedef int (*tidlx_barrier_fn)(int, TVMParallelGroupEnv*);
typedef void (*tidlx_error_fn)(const char*, const char*);

extern tidlx_alloc_fn __TVMBackendAllocWorkspace __attribute__((weak));
extern tidlx_free_fn __TVMBackendFreeWorkspace __attribute__((weak));
extern tidlx_launch_fn __TVMBackendParallelLaunch __attribute__((weak));
extern tidlx_barrier_fn __TVMBackendParallelBarrier __attribute__((weak));
extern tidlx_error_fn __TVMFFIErrorSetRaisedFromCStr __attribute__((weak));

void tidlx_bind_kernel_library(void) {
  if (&__TVMBackendAllocWorkspace != 0) __TVMBackendAllocWorkspace = TVMBackendAllocWorkspace;
  if (&__TVMBackendFreeWorkspace != 0) __TVMBackendFreeWorkspace = TVMBackendFreeWorkspace;
  if (&__TVMBackendParallelLaunch != 0) __TVMBackendParallelLaunch = TVMBackendParallelLaunch;
  if (&__TVMBackendParallelBarrier != 0) __TVMBackendParallelBarrier = TVMBackendParallelBarrier;
  if (&__TVMFFIErrorSetRaisedFromCStr != 0) __TVMFFIErrorSetRaisedFromCStr = TVMFFIErrorSetRaisedFromCStr;
}
