// A Runtime on the built CPU plugin alone, for the suites that take a user's model: no
// environment, no default plugin places, device cpu, plus the caller's command-line settings.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "accelkit/runtime.hpp"

namespace accelkit::test {

inline std::unique_ptr<Runtime> start_cpu_runtime(std::vector<std::pair<std::string, std::string>> cli = {}) {
  ContextOptions o;
  o.settings.env = std::map<std::string, std::string>{};
  cli.insert(cli.begin(), {"device", "cpu"});
  o.settings.cli = std::move(cli);
  o.loader.cli_paths = {ACCELKIT_TEST_PLUGIN_DIR};
  o.loader.read_environment = false;
  o.loader.include_default_dirs = false;
  return Runtime::start(o);
}

}  // namespace accelkit::test
