// A brand-new device type from a plugin (sdk device_runtime.hpp): the host's side. The core
// owns LibTorch's PrivateUse1 registration - one device guard, one allocator, the
// allocation/view/copy kernels, the shallow-copy rule `module->to(device)` needs and a boxed
// CPU fallback that counts what falls back - and forwards to the activated plugin's table, so
// no pointer LibTorch holds ever dangles (plugins are never unloaded).
//
// Thread-safety: activate() once per process (a second activation of another plugin is
// refused); the rest may be called from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "accelkit/sdk/device.hpp"
#include "accelkit/sdk/plugin.hpp"

namespace accelkit::new_device {

// True for a device its plugin declares as a new device type (torch_device "privateuseone:<i>").
bool declares(const DeviceInfo& info);

// The index in "privateuseone:<i>", or -1.
int declared_index(const DeviceInfo& info);

// For the plugin scan: "" when every new-device device of `report` opens and brings a complete
// table; else why not ("its device runtime lacks the required entry copy"). Opens those devices.
std::string table_problem(Plugin& plugin, const ProbeReport& report);

// Registers `device`'s runtime (from plugin `plugin`) as LibTorch's PrivateUse1 device and
// returns LibTorch's string for the device ("hostmem:0" on LibTorch >= 2.1, else
// "privateuseone:0"). Idempotent for the plugin already active. Throws DeviceUnavailableError
// naming the plugin: no runtime, a required entry missing (named), another plugin active, the
// registration refused, or autograd already used by the program (start accelkit first).
std::string activate(const std::string& plugin, Device& device);

struct State {
  bool active = false;
  std::string plugin;
  std::string backend;           // the table's name
  std::string torch_type;        // LibTorch's name for the type: the backend, or "privateuseone"
  std::vector<std::string> native_kernels;  // the plugin's own (besides the host's allocation/view/copy set)
  std::vector<std::string> notes;           // what this LibTorch lacks for the device
};
State state();

struct FallbackCount {
  std::string op;          // "aten::addmm" with its overload, if any ("aten::add.Tensor")
  std::uint64_t calls = 0;
};
// Operators that ran on the CPU through the fallback since activation (or the last reset),
// most calls first.
std::vector<FallbackCount> fallback_counts();
void reset_fallback_counts();

}  // namespace accelkit::new_device
