// accelkit-plugin-scanner: examines one plugin file in a process of its own, for the host's
// out-of-process scan (core/host/src/plugin_scan.hpp). The host runs
//
//   accelkit-plugin-scanner --scan <plugin.so> [--memory BYTES]
//
// with descriptor 3 open for the result: the handshake and the probe run here, and when they
// return - whatever they decided - "accelkit-plugin-scan passed" is written there, followed by
// the plugin's status and reason. A plugin that crashes, hangs, aborts or exits never gets that
// far, and the host refuses it. Run by hand (no descriptor 3), it prints the result.
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "accelkit/loader.hpp"
#include "accelkit/new_device.hpp"
#include "../src/plugin_scan.hpp"

int main(int argc, char** argv) {
  std::string plugin;
  unsigned long long memory = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--scan" && i + 1 < argc) plugin = argv[++i];
    else if (arg == "--memory" && i + 1 < argc) memory = std::strtoull(argv[++i], nullptr, 10);
    else {
      std::cerr << "usage: accelkit-plugin-scanner --scan <plugin.so> [--memory BYTES]\n";
      return 2;
    }
  }
  if (plugin.empty()) {
    std::cerr << "usage: accelkit-plugin-scanner --scan <plugin.so> [--memory BYTES]\n";
    return 2;
  }
  if (memory > 0) {
    const rlimit limit{memory, memory};
    if (::setrlimit(RLIMIT_DATA, &limit) != 0) std::cerr << "accelkit-plugin-scanner: cannot limit memory: " << std::strerror(errno) << '\n';
  }
  const accelkit::PluginRecord rec = accelkit::load_plugin_file(plugin, /*probe=*/true);
  std::string result = std::string(accelkit::scan::kPassedLine) + "\n" + accelkit::to_string(rec.status) + "\n" +
                       rec.name + "\n" + rec.reason + "\n";
  // A new device type's table is checked here too, so a broken one is refused at scan time.
  if (rec.status == accelkit::PluginStatus::usable && rec.plugin && rec.probe) {
    const std::string why = accelkit::new_device::table_problem(*rec.plugin, *rec.probe);
    if (!why.empty()) result += std::string(accelkit::scan::kTableLine) + why + "\n";
  }
  const int fd = ::fcntl(accelkit::scan::kResultFd, F_GETFD) != -1 ? accelkit::scan::kResultFd : STDOUT_FILENO;
  for (std::size_t done = 0; done < result.size();) {
    const ssize_t n = ::write(fd, result.data() + done, result.size() - done);
    if (n <= 0) return 1;
    done += static_cast<std::size_t>(n);
  }
  // Quit without running the plugin's destructors or LibTorch's: the examination is over.
  std::_Exit(0);
}
