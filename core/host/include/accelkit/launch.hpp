// Where this process sits in a run of several: the launcher's environment (torchrun, Slurm,
// Open MPI, MPICH/PMI) read into rank, world size, local rank and the rendezvous address. The
// host reads it to open the device of this rank's local index; data-parallel training
// (distributed.hpp) to join the run.
#pragma once

#include <functional>
#include <optional>
#include <stdexcept>
#include <string>

namespace accelkit::dist {

// Where this process sits, from the launcher's environment.
struct Launch {
  std::string launcher = "none";  // "none", "torchrun", "slurm", "openmpi", "pmi"
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr;  // rendezvous host (rank 0's); empty with world size 1
  int master_port = 0;      // the rendezvous port: MASTER_PORT, a Slurm job's, else 29500
  bool store_hosted = false;  // the launcher hosts the store there (torchrun's agent store)
  std::string source;       // "RANK, WORLD_SIZE, LOCAL_RANK from torchrun's environment", ...
  // Make the process group even for a world of one (never set from the environment): the
  // collective path on one device, to test or measure it - every collective then runs, over
  // a store this process hosts. Otherwise one process has no group at all.
  bool group_of_one = false;
};

// A launcher's variable was present but unusable ("RANK=abc", RANK >= WORLD_SIZE, ...).
class LaunchError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Reads torchrun (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT),
// Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_NTASKS_PER_NODE or
// SLURM_TASKS_PER_NODE; master = first host of SLURM_JOB_NODELIST), Open MPI
// (OMPI_COMM_WORLD_RANK/_SIZE/_LOCAL_RANK/_LOCAL_SIZE) and MPICH/PMI (PMI_RANK, PMI_SIZE,
// MPI_LOCALRANKID, MPI_LOCALNRANKS), in that order; MASTER_ADDR / MASTER_PORT override the
// master under any of them. `env` returns a variable's value or nullopt (default: the
// process environment). Throws LaunchError.
using EnvReader = std::function<std::optional<std::string>(const std::string&)>;
Launch detect_launch(const EnvReader& env = {});

// The first host of a Slurm node list: "node[07-09,12],gpu01" -> "node07", "a,b" -> "a",
// "rack1-n[003-004]" -> "rack1-n003". Throws LaunchError on a malformed list.
std::string first_slurm_host(const std::string& nodelist);

// Intra-op threads for each of `local_ranks` ranks on a host of `cores` physical cores: the
// cores shared out, at least 1 (what dist::init sets on a CPU unless `threads` is set).
int threads_per_rank(unsigned cores, int local_ranks) noexcept;

}  // namespace accelkit::dist
