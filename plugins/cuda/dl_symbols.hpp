// Opening a vendor library at run time and resolving typed function pointers from it,
// remembering the first missing one.
#pragma once

#include <dlfcn.h>

#include <string>

#include <accelkit/sdk/host_paths.hpp>

namespace accelkit::cuda {

// The library to open: `var`'s value (read with secure_getenv) when set, else `fallback`.
inline std::string library_from_env(const char* var, const char* fallback) {
  const char* env = secure_env(var);
  return env && *env ? env : fallback;
}

// dlopen(RTLD_NOW | RTLD_LOCAL), or nullptr with *error set to dlerror()'s reason.
inline void* open_library(const std::string& library, std::string* error) {
  void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = ::dlerror();
    *error = why ? why : ("cannot open " + library);
  }
  return handle;
}

class SymbolResolver {
 public:
  SymbolResolver(void* handle, std::string library) : handle_(handle), library_(std::move(library)) {}

  // Sets fn and returns true when `name` exists; otherwise records the error.
  template <typename Fn>
  bool require(const char* name, Fn& fn) {
    if (optional(name, fn)) return true;
    if (error_.empty()) error_ = library_ + " lacks " + name;
    return false;
  }
  template <typename Fn>
  bool optional(const char* name, Fn& fn) {
    void* p = ::dlsym(handle_, name);
    if (!p) return false;
    fn = reinterpret_cast<Fn>(p);
    return true;
  }
  const std::string& error() const { return error_; }

 private:
  void* handle_;
  std::string library_;
  std::string error_;
};

}  // namespace accelkit::cuda
