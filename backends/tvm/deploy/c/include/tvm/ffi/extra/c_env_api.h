/* tidlx deploy folder: the generated kernels include this for TVM-FFI's environment calls; the
 * deployed host part calls no other packed function, so it only brings in the core ABI. */
#ifndef TIDLX_TVM_FFI_C_ENV_API_H_
#define TIDLX_TVM_FFI_C_ENV_API_H_

#include "tvm/ffi/c_api.h"

#endif
