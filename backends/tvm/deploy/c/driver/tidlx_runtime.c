/* tidlx deploy folder: the few runtime calls TVM-generated kernels make, so the host part runs
 * without TVM's runtime: workspace memory (a static LIFO arena, falling back to malloc when a
 * model needs more than TIDLX_WORKSPACE_BYTES), serial parallel loops, and the error message of
 * the last failing kernel (tidlx_last_error). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tvm/ffi/c_api.h"
#include "tvm/runtime/c_backend_api.h"
#include "tidlx_runtime.h"

#ifndef TIDLX_WORKSPACE_BYTES
#define TIDLX_WORKSPACE_BYTES (8u << 20)
#endif
#define TIDLX_ALIGN 64u

/* Kernels free their workspace in reverse order, so a bump pointer with a stack of offsets does. */
static union {
  double align_;
  unsigned char bytes[TIDLX_WORKSPACE_BYTES];
} arena;
static size_t arena_top;
#define TIDLX_MAX_LIVE 256
static size_t live_base[TIDLX_MAX_LIVE];
static void* live_ptr[TIDLX_MAX_LIVE];
static void* live_malloc[TIDLX_MAX_LIVE];
static int live_count;

static char last_error[1024];

static void set_error(const char* kind, const char** parts, int32_t num_parts) {
  size_t used = 0;
  int32_t i;
  last_error[0] = '\0';
  if (kind != NULL) {
    size_t n = strlen(kind);
    if (n > sizeof(last_error) - 3) n = sizeof(last_error) - 3;
    memcpy(last_error, kind, n);
    memcpy(last_error + n, ": ", 2);
    used = n + 2;
  }
  for (i = 0; i < num_parts; ++i) {
    size_t n = parts[i] == NULL ? 0 : strlen(parts[i]);
    if (used + n > sizeof(last_error) - 1) n = sizeof(last_error) - 1 - used;
    memcpy(last_error + used, parts[i], n);
    used += n;
  }
  last_error[used] = '\0';
}

void TVMFFIErrorSetRaisedFromCStrParts(const char* kind, const char** message_parts, int32_t num_parts) {
  set_error(kind, message_parts, num_parts);
}

void TVMFFIErrorSetRaisedFromCStr(const char* kind, const char* message) {
  set_error(kind, &message, 1);
}

void tidlx_set_error(const char* message) {
  set_error(NULL, &message, 1);
}

const char* tidlx_last_error(void) {
  return last_error;
}

void* TVMBackendAllocWorkspace(int device_type, int device_id, uint64_t nbytes, int dtype_code_hint,
                               int dtype_bits_hint) {
  size_t base = (arena_top + TIDLX_ALIGN - 1) / TIDLX_ALIGN * TIDLX_ALIGN;
  void* ptr;
  void* block = NULL;
  (void)device_type; (void)device_id; (void)dtype_code_hint; (void)dtype_bits_hint;
  if (live_count == TIDLX_MAX_LIVE) {
    tidlx_set_error("TVMBackendAllocWorkspace: too many live workspaces");
    return NULL;
  }
  if (nbytes <= TIDLX_WORKSPACE_BYTES && base <= TIDLX_WORKSPACE_BYTES - nbytes) {
    ptr = arena.bytes + base;
    arena_top = base + (size_t)nbytes;
  } else {
    /* over-allocate to hand out a 64-byte aligned pointer */
    block = malloc((size_t)nbytes + TIDLX_ALIGN);
    if (block == NULL) {
      tidlx_set_error("TVMBackendAllocWorkspace: out of memory");
      return NULL;
    }
    ptr = (unsigned char*)block + (TIDLX_ALIGN - (uintptr_t)block % TIDLX_ALIGN);
    base = arena_top;
  }
  live_base[live_count] = base;
  live_ptr[live_count] = ptr;
  live_malloc[live_count] = block;
  ++live_count;
  return ptr;
}

int TVMBackendFreeWorkspace(int device_type, int device_id, void* ptr) {
  (void)device_type; (void)device_id;
  if (live_count == 0 || live_ptr[live_count - 1] != ptr) {
    tidlx_set_error("TVMBackendFreeWorkspace: not the last workspace allocated");
    return -1;
  }
  --live_count;
  free(live_malloc[live_count]);
  if (live_malloc[live_count] == NULL) arena_top = live_base[live_count];
  return 0;
}

int TVMBackendParallelLaunch(FTVMParallelLambda flambda, void* cdata, int num_task) {
  /* one task does the whole loop: the kernels split their range by env.num_task */
  TVMParallelGroupEnv env;
  (void)num_task;
  env.sync_handle = NULL;
  env.num_task = 1;
  return flambda(0, &env, cdata);
}

int TVMBackendParallelBarrier(int task_id, TVMParallelGroupEnv* penv) {
  (void)task_id; (void)penv;
  return 0;
}
