// Plugin: the object a plugin library creates once, and the ACCELKIT_PLUGIN macro that
// writes the library's two exports.
//
// Life of a plugin, as the host runs it:
//   0. The first time this version of the file is seen, steps 1-3 run in a separate process
//      (the host's plugin scanner) with a timeout and a memory limit; a plugin that crashes,
//      hangs, exits or lets an exception out there is refused with what it did, until its file
//      changes. Only then does the host itself load it.
//   1. dlopen(RTLD_NOW | RTLD_LOCAL); accelkit_plugin_info() is read and checked (abi.h).
//   2. Only then the factory (Boost.DLL alias "accelkit_create_plugin") is called, once.
//   3. probe() is called once, on the host's main thread. It reports devices, capabilities,
//      a score and reasons. It must not crash or hang, must not throw, and starts no device
//      context it can avoid (ideally only reads sysfs, driver queries, static tables).
//   4. open(i) is called for the device the host negotiated, possibly others.
//   The library is never unloaded; every object it returns keeps it loaded.
//
// Rules for authors:
//   - No work in static initialisers. Registrations with LibTorch (TORCH_LIBRARY etc.), if
//     any, go in open() and use the plugin's own namespace.
//   - Build with hidden visibility (accelkit_add_plugin does); only the two entry points
//     are exported.
//   - GPU SDKs are dlopen()ed at run time, never linked, so the plugin loads everywhere and
//     probe() can say "no driver".
//   - Read hardware files through sysfs_path()/procfs_path() (host_paths.hpp) so tests can
//     point them at fixture trees.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <boost/dll/alias.hpp>
#include <torch/version.h>

#include "accelkit/sdk/abi.h"
#include "accelkit/sdk/device.hpp"
#include "accelkit/sdk/status.hpp"

// ---- the C++ ABI tag -----------------------------------------------------------------------
// Compiler family (Itanium C++ ABI for GCC and Clang, else MSVC), the standard library, and
// libstdc++'s dual ABI switch. Host and plugin must agree exactly.
#define ACCELKIT_STR2_(x) #x
#define ACCELKIT_STR_(x) ACCELKIT_STR2_(x)
#if defined(_MSC_VER) && !defined(__clang__)
#define ACCELKIT_CXX_FAMILY_ "msvc"
#else
#define ACCELKIT_CXX_FAMILY_ "itanium"
#endif
#if defined(_LIBCPP_VERSION)
#define ACCELKIT_CXX_STDLIB_ "libc++"
#elif defined(__GLIBCXX__)
#define ACCELKIT_CXX_STDLIB_ "libstdc++/cxx11abi=" ACCELKIT_STR_(_GLIBCXX_USE_CXX11_ABI)
#else
#define ACCELKIT_CXX_STDLIB_ "other"
#endif
#define ACCELKIT_CXX_ABI_TAG ACCELKIT_CXX_FAMILY_ "/" ACCELKIT_CXX_STDLIB_

// LibTorch version the including code is compiled against, "major.minor.patch".
#define ACCELKIT_TORCH_VERSION_STRING                                        \
  ACCELKIT_STR_(TORCH_VERSION_MAJOR) "." ACCELKIT_STR_(TORCH_VERSION_MINOR) "." \
      ACCELKIT_STR_(TORCH_VERSION_PATCH)

// ---- the handshake, readable without loading the library ----------------------------------
// ACCELKIT_PLUGIN also writes the handshake's facts as text into the ELF section
// ".accelkit_plugin", one "key value" per line:
//
//   accelkit-plugin-note 1
//   abi 5.0
//   torch 2.13.0
//   cxx_abi itanium/libstdc++/cxx11abi=1
//
// The host reads it from the file before dlopen() and refuses a mismatch there: loading a
// plugin built against another LibTorch would bring that LibTorch's libraries and static
// initialisers into the host's process before accelkit_plugin_info() could say anything.
// Since ABI 3.0. A plugin that writes its own accelkit_plugin_info instead of using
// ACCELKIT_PLUGIN can write the same note with ACCELKIT_PLUGIN_NOTE(torch, cxx_abi).
#define ACCELKIT_PLUGIN_NOTE_SECTION ".accelkit_plugin"
#define ACCELKIT_PLUGIN_NOTE(torch_version, cxx_abi)                                             \
  [[gnu::used, gnu::section(ACCELKIT_PLUGIN_NOTE_SECTION)]] static const char                    \
      accelkit_plugin_note_[] = "accelkit-plugin-note 1\n"                                       \
                                "abi " ACCELKIT_STR_(ACCELKIT_ABI_MAJOR) "." ACCELKIT_STR_(     \
                                    ACCELKIT_ABI_MINOR) "\n"                                     \
                                "torch " torch_version "\n"                                      \
                                "cxx_abi " cxx_abi "\n";

namespace accelkit {

// What probe() found. Plain value.
struct ProbeReport {
  // 0 = unusable here (no driver, LibTorch without this backend, ...); otherwise higher is
  // better among devices of one kind. Scores only rank; the declared DeviceKind comes first
  // (discrete GPU > integrated GPU > NPU > other > CPU).
  int score = 0;
  std::vector<DeviceInfo> devices;   // every device seen, usable or not
  std::vector<std::string> reasons;  // why this score: one line each, most important first
  std::vector<std::string> warnings; // what the user should fix, with the fix
};

class Plugin {
 public:
  virtual ~Plugin() = default;
  // See step 3 above. An error Status marks the plugin unavailable with that message.
  virtual Result<ProbeReport> probe() noexcept = 0;
  // The device at `index` of the last probe's devices. Result is never null on success.
  virtual Result<std::shared_ptr<Device>> open(std::size_t index) noexcept = 0;

  // Replacing one interface of another plugin's device, without re-implementing the device:
  // an Optimizer whose AdamW implementations the host offers beside the device's own for
  // `device` (the negotiated device, which another plugin probed). The host measures them
  // all and uses the fastest, or the one the adamw_implementation setting names (listed as
  // "<this plugin>.<implementation>"). Status(not_supported) for devices it does not serve;
  // the default serves none. A plugin that only contributes may report no devices.
  // Since ABI 4.0.
  virtual Result<std::shared_ptr<Optimizer>> optimizer_for(const DeviceInfo& device) noexcept {
    (void)device;
    return Status(StatusCode::not_supported, "contributes no optimizer to other plugins' devices");
  }
};

// The factory's signature. It returns a Plugin allocated with `new` (the host deletes it
// while the library is loaded), or nullptr with *error set. It never throws.
using PluginFactory = Plugin*(Status* error);

}  // namespace accelkit

// ACCELKIT_PLUGIN(Class) writes both exports for a Plugin subclass that is default
// constructible and has `static constexpr const char* kName, kVersion, kDescription`.
// Use it once, at namespace scope, in one source file of the plugin.
#define ACCELKIT_PLUGIN(Class)                                                           \
  ACCELKIT_PLUGIN_NOTE(ACCELKIT_TORCH_VERSION_STRING, ACCELKIT_CXX_ABI_TAG)               \
  extern "C" BOOST_SYMBOL_EXPORT const AccelkitPluginInfo* accelkit_plugin_info(void) {  \
    static const AccelkitPluginInfo info = {                                             \
        sizeof(AccelkitPluginInfo), ACCELKIT_ABI_MAJOR,          ACCELKIT_ABI_MINOR,     \
        Class::kName,               Class::kVersion,             ACCELKIT_TORCH_VERSION_STRING, \
        ACCELKIT_CXX_ABI_TAG,       Class::kDescription};                                \
    return &info;                                                                        \
  }                                                                                      \
  namespace accelkit_plugin_entry_ {                                                     \
  ::accelkit::Plugin* create(::accelkit::Status* error) noexcept {                       \
    try {                                                                                \
      return new Class();                                                                \
    } catch (const std::exception& e) {                                                  \
      if (error) *error = ::accelkit::Status(::accelkit::StatusCode::internal,           \
                                             std::string("plugin constructor: ") + e.what()); \
    } catch (...) {                                                                      \
      if (error) *error = ::accelkit::Status(::accelkit::StatusCode::internal,           \
                                             "plugin constructor: unknown exception");   \
    }                                                                                    \
    return nullptr;                                                                      \
  }                                                                                      \
  }                                                                                      \
  BOOST_DLL_ALIAS(accelkit_plugin_entry_::create, accelkit_create_plugin)
