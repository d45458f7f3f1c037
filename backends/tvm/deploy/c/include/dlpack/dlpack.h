/* tidlx deploy folder: the DLPack tensor descriptor, as the TVM-generated kernels read it.
 * Our own declaration of DLPack's ABI (field order, widths and enum values are the ABI). */
#ifndef TIDLX_DLPACK_H_
#define TIDLX_DLPACK_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* DLDeviceType: only the CPU is used by the deployed host part */
enum { kDLCPU = 1 };

/* DLDataTypeCode */
enum { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4, kDLBool = 6 };

typedef struct {
  int32_t device_type;
  int32_t device_id;
} DLDevice;

typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;       /* NULL: compact row-major */
  uint64_t byte_offset;
} DLTensor;

#ifdef __cplusplus
}
#endif
#endif
