/* tidlx deploy folder: the export macro the generated kernels put on their definitions. */
#ifndef TIDLX_TVM_RUNTIME_BASE_H_
#define TIDLX_TVM_RUNTIME_BASE_H_

#include "tvm/ffi/c_api.h"

#ifndef TVM_DLL
#define TVM_DLL TVM_FFI_DLL
#endif

#endif
