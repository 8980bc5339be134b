// Plugin discovery, the handshake, and loading. The core may throw inside itself; nothing
// here lets a plugin's exception escape.
#pragma once

#include <memory>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "accelkit/sdk/plugin.hpp"

namespace accelkit {

enum class PluginStatus {
  usable,       // handshake passed, created and probed with score > 0 (shown "usable")
  rejected,     // refused before or at load: insecure, not a plugin, handshake mismatch,
                // duplicate, disabled, factory failed
  unavailable,  // loaded, but its probe failed or scored 0 (no hardware, no driver, ...)
};
const char* to_string(PluginStatus s) noexcept;

struct PluginRecord {
  std::string name;           // from the plugin's info; the file stem when it never got that far
  std::string path;           // absolute path as found
  PluginStatus status = PluginStatus::rejected;
  std::string reason;         // why rejected/unavailable; empty when loaded
  std::string version;        // plugin's own version, when its info could be read
  std::string torch_version;
  std::string cxx_abi;
  std::string description;
  // How the out-of-process scan judged the file: "" when it was not scanned (scan off, or
  // refused before), else "passed ..." or "failed: <why>", and when.
  std::string scan;
  std::optional<ProbeReport> probe;  // set once probe() ran successfully
  std::shared_ptr<Plugin> plugin;    // set when created; keeps the library loaded
};

// One directory the loader looked in, and where it came from.
struct SearchDir {
  std::string path;
  std::string origin;  // "--plugin-path", "ACCELKIT_PLUGIN_PATH", "ACCELKIT_ADD_PLUGIN_PATH",
                       // "build-time", "executable-relative", "package"
};

struct LoaderOptions {
  // --plugin-path: replaces the default list, like ACCELKIT_PLUGIN_PATH, and wins over it.
  std::vector<std::string> cli_paths;
  // Extra ACCELKIT_PLUGINS_DISABLE-style globs (matched against plugin names and file names).
  std::vector<std::string> disable_globs;
  bool read_environment = true;  // ACCELKIT_PLUGIN_PATH, ACCELKIT_ADD_PLUGIN_PATH, ..._DISABLE
  bool include_default_dirs = true;  // build-time and executable-relative directories
  bool probe = true;                 // call probe() on every loaded plugin
  // The out-of-process scan (core/host/src/plugin_scan.hpp): before a plugin file is loaded here,
  // its handshake and probe run in a child process, once per file version; a plugin that
  // crashed, hung, aborted or exited there is refused with the reason, and stays refused until
  // its file changes. Off: plugins are examined in this process (for a debugger).
  bool scan = true;
  bool rescan = false;                  // examine every file again, whatever the registry says
  int scan_timeout_s = 10;              // then the child is killed
  std::uint64_t scan_memory_bytes = std::uint64_t{4} << 30;  // the child's data limit; 0 = none
  // The registry's cache directory; nullopt = the default (decision_cache_dir()), "" = none.
  std::optional<std::string> cache_dir;
};

struct Discovery {
  std::vector<SearchDir> dirs;         // in search order
  std::vector<PluginRecord> plugins;   // every candidate file, in search order
  std::vector<std::string> trace;      // every path tried and what became of it (plugins -v)
  // How plugins were examined: out of process (with the scanner and the registry's path), or
  // in this process and why. One line for `accelkit plugins`.
  std::string scan_note;
};

// The directories the loader will search, in order.
std::vector<SearchDir> plugin_search_dirs(const LoaderOptions& options);

// Finds, checks, loads, creates and probes every plugin. Never throws for a bad plugin:
// each one's fate is in its record.
Discovery discover_plugins(const LoaderOptions& options);

// Loads one plugin file (absolute path) through the same checks, in this process (no
// out-of-process scan). Used by discover_plugins, the scanner, and tests.
PluginRecord load_plugin_file(const std::string& path, bool probe = true);

// The host's own handshake expectations, for messages and tests.
std::string host_torch_version();  // "1.13.0"
std::string host_cxx_abi();

// The reason a file or one of its parent directories is unsafe to load from, or "" when it
// is safe: writable by group/others (sticky root-owned directories excepted).
std::string insecure_path_reason(const std::string& path);

}  // namespace accelkit
