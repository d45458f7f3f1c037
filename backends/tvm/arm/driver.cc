// tidlx's aarch64 check driver: loads a deploy_lib.so exported by tidlx.backends.tvm.export,
// runs its Relax VM "main" on float32 inputs read from raw files, writes every output's raw bytes
// to one file, in order. Built with TVM's runtime for aarch64 (build_runtime.sh) and run under
// qemu-aarch64 by backends/tvm/qemu.py.
//
//   driver deploy_lib.so out.bin in0.bin 1,3,64,192 [in1.bin 1,8 ...]
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/module.h>
#include <tvm/ffi/function.h>
#include <tvm/runtime/device_api.h>
#include <tvm/runtime/tensor.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace tvm;

static std::vector<int64_t> ParseShape(const std::string& text) {
  std::vector<int64_t> shape;
  std::stringstream in(text);
  std::string dim;
  while (std::getline(in, dim, ',')) shape.push_back(std::stoll(dim));
  return shape;
}

static void WriteTensor(std::ofstream& out, const runtime::Tensor& t) {
  size_t count = 1;
  for (int i = 0; i < t->ndim; ++i) count *= t->shape[i];
  out.write(static_cast<const char*>(t->data), count * ((t->dtype.bits * t->dtype.lanes + 7) / 8));
}

int main(int argc, char** argv) {
  if (argc < 3 || (argc - 3) % 2 != 0) {
    std::fprintf(stderr, "usage: %s deploy_lib.so out.bin [input.bin d0,d1,...]...\n", argv[0]);
    return 2;
  }
  DLDevice cpu{kDLCPU, 0};
  ffi::Module lib = ffi::Module::LoadFromFile(argv[1]);
  ffi::Module vm = lib->GetFunction("vm_load_executable").value()().cast<ffi::Module>();
  // device type, id and allocator kind (2: pooled) of the device and of the host
  vm->GetFunction("vm_initialization").value()(static_cast<int>(kDLCPU), 0, 2, static_cast<int>(kDLCPU), 0, 2);
  std::vector<ffi::Any> args;
  for (int i = 3; i < argc; i += 2) {
    std::vector<int64_t> shape = ParseShape(argv[i + 1]);
    runtime::Tensor x = runtime::Tensor::Empty(ffi::Shape(shape), DLDataType{kDLFloat, 32, 1}, cpu);
    size_t count = 1;
    for (int64_t d : shape) count *= d;
    std::ifstream in(argv[i], std::ios::binary);
    if (!in.read(static_cast<char*>(x->data), count * 4)) {
      std::fprintf(stderr, "cannot read %zu floats from %s\n", count, argv[i]);
      return 1;
    }
    args.push_back(x);
  }
  ffi::Function main_fn = vm->GetFunction("main").value();
  ffi::Any result;
  main_fn.CallPacked(ffi::PackedArgs(reinterpret_cast<const ffi::AnyView*>(args.data()),
                                     static_cast<int32_t>(args.size())), &result);
  std::ofstream out(argv[2], std::ios::binary);
  if (auto t = result.as<runtime::Tensor>()) {
    WriteTensor(out, t.value());
  } else {
    for (const ffi::Any& item : result.cast<ffi::Array<ffi::Any>>()) WriteTensor(out, item.cast<runtime::Tensor>());
  }
  return out.good() ? 0 : 1;
}
