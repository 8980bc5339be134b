// Resolving typed function pointers from a dlopen()ed library, remembering the first missing one.
#pragma once

#include <dlfcn.h>

#include <string>

namespace accelkit::cuda {

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
