#include "torch_backend.hpp"

#include <link.h>

#include <cstring>

namespace accelkit::rocm {

std::string loaded_torch_hip_library() {
  std::string found;
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, std::size_t, void* out) -> int {
        const char* path = info->dlpi_name;
        if (!path || !*path) return 0;
        const char* base = std::strrchr(path, '/');
        base = base ? base + 1 : path;
        if (std::strncmp(base, "libc10_hip", 10) == 0 || std::strncmp(base, "libtorch_hip", 12) == 0) {
          *static_cast<std::string*>(out) = path;
          return 1;
        }
        return 0;
      },
      &found);
  return found;
}

}  // namespace accelkit::rocm
