// Loads libattnprof_inject.so the way the CUDA driver does and calls InitializeInjection. Run with
// the toolkit's stub libcuda (no usable driver): the library must load, say why it cannot
// record, return 1 and let the program run on and exit normally.
#include <dlfcn.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: load_injection LIBRARY\n");
    return 2;
  }
  void* library = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    std::printf("dlopen failed: %s\n", dlerror());
    return 1;
  }
  using Init = int (*)();
  const auto init = reinterpret_cast<Init>(dlsym(library, "InitializeInjection"));
  if (init == nullptr) {
    std::printf("InitializeInjection is not exported\n");
    return 1;
  }
  std::printf("InitializeInjection returned %d\n", init());
  std::printf("InitializeInjection returned %d again\n", init());
  return 0;
}
