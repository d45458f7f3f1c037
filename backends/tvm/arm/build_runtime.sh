#!/bin/sh
# Cross-compiles TVM's runtime (tvm-ffi + the Relax VM, CPU only) for aarch64 from the sources the
# installed apache-tvm wheel ships, and tidlx's driver.cc against it, into OUT:
#
#   build_runtime.sh PYTHON TVM_SOURCE_DIR OUT
#
# The wheel leaves out a few internal headers (include/tvm/support, src/support,
# 3rdparty/compiler-rt/builtin_fp16.h): they are read from TVM_SOURCE_DIR, a checkout of apache/tvm.
set -eu
PYTHON=$1; TVM_SRC=$2; OUT=$3
CXX=${CXX:-aarch64-linux-gnu-g++}
SP=$("$PYTHON" -c 'import os, tvm; print(os.path.dirname(os.path.dirname(tvm.__file__)))')
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT/obj" "$OUT/headers/src/runtime/vm"
cp -r "$TVM_SRC/include" "$OUT/headers/"
cp -r "$TVM_SRC/src/support" "$OUT/headers/src/"
cp "$TVM_SRC/3rdparty/compiler-rt/builtin_fp16.h" "$OUT/headers/"
H="$OUT/headers"
# The wheel's headers first; the checkout's only where the wheel has none ("../support/x.h" resolves
# through the empty src/runtime and src/runtime/vm folders).
INC="-I$SP/tvm/include -I$SP/tvm_ffi/include -I$SP/tvm/src -I$H/include -I$H/src -I$H -I$H/src/runtime -I$H/src/runtime/vm"
FLAGS="-O2 -std=c++17 -fPIC -DNDEBUG -DTVM_FFI_EXPORTS -DTVM_RUNTIME_EXPORTS -DTVM_FFI_USE_LIBBACKTRACE=0 -DTVM_FFI_BACKTRACE_ON_SEGFAULT=0"
SOURCES="$(ls "$SP"/tvm_ffi/src/ffi/*.cc | grep -v backtrace_win) $(ls "$SP"/tvm_ffi/src/ffi/extra/*.cc) \
  $(ls "$SP"/tvm/src/runtime/*.cc) $SP/tvm/src/runtime/memory/memory_manager.cc \
  $(ls "$SP"/tvm/src/runtime/vm/*.cc | grep -v -e attn -e paged_kv -e lm_support -e kv_state -e rnn_state -e tensor_cache)"
# One object per source, kept between runs (a source newer than its object is compiled again).
for f in $SOURCES; do echo "$f"; done | xargs -P "${JOBS:-2}" -I{} sh -c \
  "o=\"$OUT/obj/\$(basename {} .cc)-\$(echo {} | md5sum | cut -c1-8).o\"; \
   [ \"\$o\" -nt {} ] || $CXX $FLAGS $INC -c {} -o \"\$o\""
"$CXX" -shared "$OUT"/obj/*.o -o "$OUT/libtvm_runtime.so" -ldl -lpthread
"$CXX" -O2 -std=c++17 -I"$SP/tvm/include" -I"$SP/tvm_ffi/include" -I"$H/include" "$HERE/driver.cc" -o "$OUT/driver" \
  -L"$OUT" -ltvm_runtime -Wl,-rpath,'$ORIGIN'
echo "built $OUT/libtvm_runtime.so and $OUT/driver"
