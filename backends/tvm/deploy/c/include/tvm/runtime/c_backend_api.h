/* tidlx deploy folder: the backend calls of TVM-generated kernels (workspace memory and parallel
 * loops), implemented for the deployed host part by driver/tidlx_runtime.c. */
#ifndef TIDLX_TVM_RUNTIME_C_BACKEND_API_H_
#define TIDLX_TVM_RUNTIME_C_BACKEND_API_H_

#include <stdint.h>
#include "tvm/runtime/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Scratch memory of a kernel, freed in reverse order of allocation before the kernel returns. */
TVM_DLL void* TVMBackendAllocWorkspace(int device_type, int device_id, uint64_t nbytes, int dtype_code_hint,
                                       int dtype_bits_hint);
TVM_DLL int TVMBackendFreeWorkspace(int device_type, int device_id, void* ptr);

/* A parallel loop: flambda(task_id, env, cdata) for each task; env->num_task tasks in all. */
typedef struct {
  void* sync_handle;
  int32_t num_task;
} TVMParallelGroupEnv;

typedef int (*FTVMParallelLambda)(int task_id, TVMParallelGroupEnv* penv, void* cdata);

TVM_DLL int TVMBackendParallelLaunch(FTVMParallelLambda flambda, void* cdata, int num_task);
TVM_DLL int TVMBackendParallelBarrier(int task_id, TVMParallelGroupEnv* penv);

#ifdef __cplusplus
}
#endif
#endif
