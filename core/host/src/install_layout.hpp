// Where the installed accelkit that a program was built against keeps its plugins and its
// plugin scanner. The core is a static library: compiled-in paths name the prefix it was
// configured with, which `cmake --install --prefix`, DESTDIR or a copied tree may have changed.
// So the package's CMake config (accelkitConfig.cmake, at find_package time, where it knows the
// prefix it was found in) adds a generated source defining these two functions to every target
// that links accelkit::core. In the build tree, and for programs not built through the package,
// nobody defines them: the weak references stay null and the other search places apply.
#pragma once

#include <string>

extern "C" {
__attribute__((weak)) const char* accelkit_installed_plugin_dir(void);
__attribute__((weak)) const char* accelkit_installed_libexec_dir(void);
}

namespace accelkit::install_layout {

inline std::string plugin_dir() {
  const char* d = accelkit_installed_plugin_dir ? accelkit_installed_plugin_dir() : nullptr;
  return d ? d : "";
}
inline std::string libexec_dir() {
  const char* d = accelkit_installed_libexec_dir ? accelkit_installed_libexec_dir() : nullptr;
  return d ? d : "";
}

}  // namespace accelkit::install_layout
