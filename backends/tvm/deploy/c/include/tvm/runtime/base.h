/* tidlx deploy folder: the export macro the generated kernels put on their definitions. */
#ifndef TIDLX_TVM_RUNTIME_BASE_H_
#define TIDLX_TVM_RUNTIME_BASE_H_

#include "tvm/ffi/c_api.h"

#ifndef TVM_DLL
#define TVM_DLL TVM_FFI_DLL
#endif

/* TVM's C code names a float16 value "half": the compiler's 16-bit float where it has one (gcc 12 on
 * x86-64 and aarch64: _Float16). A compiler without it fails only on models with float16 tensors. */
#if defined(__FLT16_MAX__) && !defined(TIDLX_NO_HALF)
TIDLX_EXTENSION typedef _Float16 half;
#endif

#endif
