// accelkit train --nproc-per-node N: N local data-parallel workers (dist::run_local_workers),
// each this same command without the option, with torchrun's variables (RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT: the environment's, else a
// free port). The workers share the terminal: Ctrl-C reaches each (they agree on the step to
// stop after, and rank 0 saves); SIGTERM to this process is passed on. When one worker fails
// the others are asked to stop (SIGTERM), then killed after a grace period; the exit code is
// the first failure's.
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
    return dist::run_local_workers(args, inv.nproc_per_node, [](const std::string& line) {
      std::cerr << "accelkit train: " << line << '\n';
    });
  } catch (const dist::LaunchError& e) {
    std::cerr << "accelkit train: --nproc-per-node: " << e.what() << '\n';
    return kExitUsage;
  }
}

}  // namespace accelkit::cli
