/* tidlx deploy folder: the part of TVM-FFI's C ABI the generated kernels use (our own minimal
 * declarations: the layout of a packed argument, the type indices kernels check, the error call). */
#ifndef TIDLX_TVM_FFI_C_API_H_
#define TIDLX_TVM_FFI_C_API_H_

#include <stdint.h>
#include <stddef.h>
#include "dlpack/dlpack.h"

#if defined(__GNUC__)
#define TVM_FFI_DLL __attribute__((visibility("default")))
#define TIDLX_EXTENSION __extension__ /* the unnamed union below is C11; gcc -pedantic -std=c99 takes it so */
#else
#define TVM_FFI_DLL
#define TIDLX_EXTENSION
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* type_index values of a packed argument (TVMFFITypeIndex) */
enum {
  kTVMFFINone = 0,
  kTVMFFIOpaquePtr = 4,
  kTVMFFIDLTensorPtr = 7,
  kTVMFFIStaticObjectBegin = 64,
  kTVMFFITensor = 70
};

/* A packed argument: 16 bytes, a type index then an 8-byte payload. */
typedef struct {
  int32_t type_index;
  uint32_t zero_padding;
  TIDLX_EXTENSION union {
    int64_t v_int64;
    double v_float64;
    void* v_ptr;
    const char* v_c_str;
    DLDataType v_dtype;
    DLDevice v_device;
    char v_bytes[8];
    uint64_t v_uint64;
  };
} TVMFFIAny;

/* The signature of every generated kernel: __tvm_ffi_<name>(self, args, num_args, result). */
typedef int32_t (*TVMFFISafeCallType)(void* self, void* args, int32_t num_args, void* result);

/* Records the error a kernel raises (kind such as "ValueError", the message in parts). */
TVM_FFI_DLL void TVMFFIErrorSetRaisedFromCStrParts(const char* kind, const char** message_parts, int32_t num_parts);
TVM_FFI_DLL void TVMFFIErrorSetRaisedFromCStr(const char* kind, const char* message);

#ifdef __cplusplus
}
#endif
#endif
