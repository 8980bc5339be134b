// accelkit train --nproc-per-node N: N local data-parallel workers (dist::run_local_workers),
// each this same command without the option, with torchrun's variables (RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT: the environment's, else a
// free port). The workers share the terminal: Ctrl-C reaches each (they agree on the step to
// stop after, and rank 0 saves); SIGINT, SIGTERM and SIGHUP to this process are passed on (a
// worker takes the launcher's copy of a signal it already had as the same stop), the same one
// again within 3 s kills them. A worker that ends an
// agreed stop (interrupt, guard stop) leaves the others to end by themselves; when one fails
// otherwise, the others are asked to stop (SIGTERM), then killed after a grace period. The exit
// code is the first non-zero one.
#include <csignal>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "accelkit/distributed.hpp"
#include "cli.hpp"

namespace accelkit::cli {

int launch_local_workers(const Invocation& inv) {
  std::vector<std::string> args;
  std::error_code ec;
  args.push_back(std::filesystem::read_symlink("/proc/self/exe", ec).string());
  if (ec) {
    std::cerr << "accelkit train: --nproc-per-node: cannot find this program's own file (/proc/self/exe)\n";
    return kExitFailure;
  }
  for (std::size_t i = 1; i < inv.argv.size(); ++i) {
    const std::string& a = inv.argv[i];
    if (a == "--nproc-per-node") {
      ++i;
      continue;
    }
    if (a.rfind("--nproc-per-node=", 0) == 0) continue;
    args.push_back(a);
  }
  try {
    // An interrupt (Ctrl-C, SIGTERM, SIGHUP) or a guard stop on one rank is every rank's stop
    // after the same step: the others save and end by themselves.
    return dist::run_local_workers(
        args, inv.nproc_per_node, [](const std::string& line) { std::cerr << "accelkit train: " << line << '\n'; },
        {128 + SIGINT, 128 + SIGTERM, 128 + SIGHUP, kExitGuardStop});
  } catch (const dist::LaunchError& e) {
    std::cerr << "accelkit train: --nproc-per-node: " << e.what() << '\n';
    return kExitUsage;
  }
}

}  // namespace accelkit::cli
