// The launcher's environment read into this process's place in the run (launch.hpp).
#include "accelkit/launch.hpp"

#include <algorithm>
#include <cstdlib>

#include "accelkit/base/strings.hpp"

namespace accelkit::dist {
namespace {

constexpr int kDefaultPort = 29500;

std::optional<int> parse_int(const std::string& name, const std::optional<std::string>& text) {
  if (!text) return std::nullopt;
  const std::string& s = *text;
  std::size_t used = 0;
  long v = 0;
  try {
    v = std::stol(s, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (s.empty() || used != s.size() || v < 0 || v > 1'000'000)
    throw LaunchError(name + "=" + text::shorten(s) + " is not a whole number from 0 to 1000000");
  return static_cast<int>(v);
}

// "4(x2),3" -> 4: Slurm's per-node task counts start with this node's (for a uniform job).
std::optional<int> slurm_tasks_per_node(const std::optional<std::string>& text) {
  if (!text || text->empty()) return std::nullopt;
  std::string head = text->substr(0, text->find_first_of("(,"));
  return parse_int("SLURM_TASKS_PER_NODE", head);
}

}  // namespace

std::string first_slurm_host(const std::string& nodelist) {
  // The first entry ends at a comma outside brackets.
  int depth = 0;
  std::size_t end = nodelist.size();
  for (std::size_t i = 0; i < nodelist.size(); ++i) {
    if (nodelist[i] == '[') ++depth;
    else if (nodelist[i] == ']') --depth;
    else if (nodelist[i] == ',' && depth == 0) { end = i; break; }
    if (depth < 0 || depth > 1) break;
  }
  const std::string first = nodelist.substr(0, end);
  const auto open = first.find('[');
  if (first.empty() || depth != 0 || (open != std::string::npos && first.back() != ']') ||
      (open == std::string::npos && first.find(']') != std::string::npos))
    throw LaunchError("SLURM_JOB_NODELIST=" + text::shorten(nodelist) + " is not a Slurm node list");
  if (open == std::string::npos) return first;
  // "prefix[07-09,12]suffix" is not written by Slurm; the range list closes the entry.
  std::string range = first.substr(open + 1, first.size() - open - 2);
  range = range.substr(0, range.find(','));
  range = range.substr(0, range.find('-'));
  if (range.empty() || range.find_first_not_of("0123456789") != std::string::npos)
    throw LaunchError("SLURM_JOB_NODELIST=" + text::shorten(nodelist) + " is not a Slurm node list");
  return first.substr(0, open) + range;
}

Launch detect_launch(const EnvReader& env_in) {
  EnvReader env = env_in ? env_in : [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    return v ? std::optional<std::string>(v) : std::nullopt;
  };
  Launch l;
  auto set_world = [&](const char* launcher, const char* rank_var, const char* size_var, std::optional<int> rank,
                       std::optional<int> size, std::optional<int> local_rank, std::optional<int> local_size) {
    l.launcher = launcher;
    if (!size) throw LaunchError(std::string(rank_var) + " is set but " + size_var + " is not");
    if (*size < 1) throw LaunchError(std::string(size_var) + " is 0: a run has at least one process");
    if (*rank >= *size)
      throw LaunchError(std::string(rank_var) + "=" + std::to_string(*rank) + " is not below " + size_var + "=" +
                        std::to_string(*size));
    l.rank = *rank;
    l.world_size = *size;
    l.local_rank = local_rank.value_or(0);
    l.local_world_size = local_size.value_or(1);
    if (l.local_rank >= l.local_world_size) l.local_world_size = l.local_rank + 1;
  };

  if (auto rank = parse_int("RANK", env("RANK"))) {
    set_world("torchrun", "RANK", "WORLD_SIZE", rank, parse_int("WORLD_SIZE", env("WORLD_SIZE")),
              parse_int("LOCAL_RANK", env("LOCAL_RANK")), parse_int("LOCAL_WORLD_SIZE", env("LOCAL_WORLD_SIZE")));
    l.source = "RANK, WORLD_SIZE, LOCAL_RANK from torchrun's environment";
  } else if (auto procid = parse_int("SLURM_PROCID", env("SLURM_PROCID"))) {
    auto per_node = parse_int("SLURM_NTASKS_PER_NODE", env("SLURM_NTASKS_PER_NODE"));
    if (!per_node) per_node = slurm_tasks_per_node(env("SLURM_TASKS_PER_NODE"));
    set_world("slurm", "SLURM_PROCID", "SLURM_NTASKS", procid, parse_int("SLURM_NTASKS", env("SLURM_NTASKS")),
              parse_int("SLURM_LOCALID", env("SLURM_LOCALID")), per_node);
    l.source = "SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID from Slurm's environment";
    if (auto nodes = env("SLURM_JOB_NODELIST"); nodes && !nodes->empty()) l.master_addr = first_slurm_host(*nodes);
    else if (auto nodes2 = env("SLURM_NODELIST"); nodes2 && !nodes2->empty()) l.master_addr = first_slurm_host(*nodes2);
    // One job, one port: derived from the job id, so two jobs sharing a node do not collide.
    if (auto job = parse_int("SLURM_JOB_ID", env("SLURM_JOB_ID"))) l.master_port = 20000 + *job % 10000;
  } else if (auto ompi = parse_int("OMPI_COMM_WORLD_RANK", env("OMPI_COMM_WORLD_RANK"))) {
    set_world("openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", ompi,
              parse_int("OMPI_COMM_WORLD_SIZE", env("OMPI_COMM_WORLD_SIZE")),
              parse_int("OMPI_COMM_WORLD_LOCAL_RANK", env("OMPI_COMM_WORLD_LOCAL_RANK")),
              parse_int("OMPI_COMM_WORLD_LOCAL_SIZE", env("OMPI_COMM_WORLD_LOCAL_SIZE")));
    l.source = "OMPI_COMM_WORLD_RANK, _SIZE, _LOCAL_RANK from Open MPI's environment";
  } else if (auto pmi = parse_int("PMI_RANK", env("PMI_RANK"))) {
    set_world("pmi", "PMI_RANK", "PMI_SIZE", pmi, parse_int("PMI_SIZE", env("PMI_SIZE")),
              parse_int("MPI_LOCALRANKID", env("MPI_LOCALRANKID")),
              parse_int("MPI_LOCALNRANKS", env("MPI_LOCALNRANKS")));
    l.source = "PMI_RANK, PMI_SIZE from MPICH's (PMI) environment";
  } else {
    l.source = "no launcher's variables (RANK, SLURM_PROCID, OMPI_COMM_WORLD_RANK, PMI_RANK): one process";
    return l;
  }

  if (auto addr = env("MASTER_ADDR"); addr && !addr->empty()) l.master_addr = *addr;
  if (auto port = parse_int("MASTER_PORT", env("MASTER_PORT"))) {
    if (*port < 1 || *port > 65535) throw LaunchError("MASTER_PORT=" + std::to_string(*port) + " is not a TCP port");
    l.master_port = *port;
  }
  if (l.master_port == 0) l.master_port = kDefaultPort;
  // torchrun's agent may already host the store at MASTER_ADDR:MASTER_PORT for its workers.
  if (auto agent = env("TORCHELASTIC_USE_AGENT_STORE"); agent && (*agent == "True" || *agent == "1"))
    l.store_hosted = true;
  if (l.master_addr.empty()) {
    if (l.world_size > 1 && l.local_world_size < l.world_size)
      throw LaunchError("the " + l.launcher + " run spans " + std::to_string(l.world_size / l.local_world_size) +
                        "+ hosts and nothing names rank 0's: set MASTER_ADDR (mpirun -x MASTER_ADDR=<host>)");
    l.master_addr = "127.0.0.1";  // every rank on this host
  }
  return l;
}

int threads_per_rank(unsigned cores, int local_ranks) noexcept {
  return std::max(1, static_cast<int>(cores) / std::max(1, local_ranks));
}

}  // namespace accelkit::dist
