// This project's test: accelkit's conformance checks (what `accelkit verify` runs) on every
// device the plugins built here report - each capability cpu_variant claims, against
// LibTorch's own results. Usage: conformance_test PLUGIN_DIR (ctest passes the build directory).
#include <accelkit/conformance.hpp>

#include <exception>
#include <iostream>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: conformance_test PLUGIN_DIR\n";
    return 2;
  }
  try {
    accelkit::conformance::CheckOptions options;
    options.quick = true;
    int failed = 0;
    for (const auto& report : accelkit::conformance::check_plugin_dir(argv[1], options)) {
      for (const auto& r : report.results)
        std::cout << to_string(r.outcome) << ' ' << report.device.id << ' ' << r.capability << ": " << r.name << "\n  "
                  << r.detail << '\n';
      failed += report.failed();
    }
    std::cout << (failed ? "conformance: FAILED\n" : "conformance: every claim holds\n");
    return failed ? 1 : 0;
  } catch (const std::exception& e) {
    std::cerr << "conformance_test: " << e.what() << '\n';
    return 1;
  }
}
