// Data-parallel training on PyTorch's own distributed engine (c10d): the launcher's
// environment read, a rendezvous through c10d's TCPStore, the collective backend the device's
// plugin names (its "collectives" capability key: Gloo's group made here, any other - NCCL -
// by the plugin, Device::process_group), and DistributedDataParallel's gradient
// reducer (c10d::Reducer: buckets filled from autograd hooks, all-reduce launched as each
// bucket fills, so communication overlaps the rest of backward) over any torch::nn::Module.
//
//   auto rt = accelkit::Runtime::start({});
//   auto world = accelkit::dist::init(*rt);         // world size 1 without a launcher
//   accelkit::DataParallel dp(*rt, world, *net);    // broadcasts rank 0's weights
//   ... loss = ...; dp.backward(loss); optimizer.step();
//
// No launcher: world size 1, no process group, no store, DataParallel::backward is
// loss.backward(). A lost rank (killed, hung, unreachable) ends the survivors' collectives
// within `dist_timeout` seconds with RankLostError, which names the rank.
//
// Thread-safety: one thread drives a DataParallel; the process group is c10d's.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/types.h>

#include "accelkit/launch.hpp"

namespace torch::nn { class Module; }

namespace accelkit {

class Runtime;
class LossScaler;

namespace dist {

// A rank was lost: it exited, was killed, hung past the timeout, or its host became
// unreachable. what() names it ("rank 1 of 2 is lost: ...").
class RankLostError : public std::runtime_error {
 public:
  RankLostError(std::string message, std::vector<int> lost)
      : std::runtime_error(std::move(message)), lost_(std::move(lost)) {}
  const std::vector<int>& lost_ranks() const noexcept { return lost_; }

 private:
  std::vector<int> lost_;
};

// The ranks disagree before training starts (accelkit or LibTorch versions, model shapes).
class WorldMismatchError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class World;  // the process group, its store and the liveness beacon (distributed.cpp)

// This process's place in the run and its process group (none with world size 1).
class ProcessGroup {
 public:
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  const Launch& launch() const noexcept { return launch_; }
  int rank() const noexcept { return launch_.rank; }
  int world_size() const noexcept { return launch_.world_size; }
  int local_rank() const noexcept { return launch_.local_rank; }
  bool is_main() const noexcept { return launch_.rank == 0; }
  const std::string& backend() const noexcept { return backend_; }  // "gloo", "nccl"; "" alone
  const std::string& why() const noexcept { return why_; }          // why this backend
  std::chrono::milliseconds timeout() const noexcept { return timeout_; }

  // Where the group's collectives take their tensors: the CPU for Gloo, the rank's device for
  // the others (NCCL: "cuda:<local rank>").
  at::Device tensor_device() const noexcept { return tensor_device_; }
  // Collectives on tensors of tensor_device() (in place); no-ops without a group. Throw
  // RankLostError.
  void all_reduce_sum(std::vector<at::Tensor>& tensors);
  void broadcast(std::vector<at::Tensor>& tensors, int root = 0);
  void barrier();
  // Every rank's `text`, in rank order (through the store). Throws RankLostError.
  std::vector<std::string> all_gather_text(const std::string& key, const std::string& text);

  // For code that drives c10d itself (null without a group: world size 1).
  World* world() const noexcept { return world_.get(); }

 private:
  friend std::shared_ptr<ProcessGroup> init(Runtime& runtime, std::optional<Launch> launch);
  ProcessGroup() = default;
  Launch launch_;
  std::string backend_;
  std::string why_;
  std::chrono::milliseconds timeout_{0};
  at::Device tensor_device_{at::kCPU};
  std::unique_ptr<World> world_;
};

// Joins the run the launcher started (or the one `launch` describes): rendezvous through a
// TCPStore on the master (rank 0 hosts it) within `dist_timeout`, checks that every rank runs
// the same accelkit and LibTorch versions, creates the process group with the backend the
// device's plugin names (or `dist_backend`; exit-3 DeviceUnavailableError where the device
// cannot use it), and shares the host's cores between its local ranks (unless `threads` is
// set). Records its decisions ("dist_backend", "threads") in the runtime's context. With more
// than one rank it ignores SIGPIPE (unless the program installed a handler), so that a peer
// dying mid-write fails the collective, naming the rank, instead of ending this one. Throws
// LaunchError, DeviceUnavailableError, WorldMismatchError, RankLostError.
std::shared_ptr<ProcessGroup> init(Runtime& runtime, std::optional<Launch> launch = std::nullopt);

// Runs `argv` (argv[0]: the executable's path) as `n` workers on this machine with torchrun's
// variables (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR = 127.0.0.1,
// MASTER_PORT: the environment's, else a free loopback port) and waits for them. A SIGINT,
// SIGTERM or SIGHUP to this process meanwhile is passed on to the workers (SIGHUP not where it
// is ignored, as under nohup), whether they had it from the terminal too or not: a worker
// stopping on one must take the same signal again from this process (its parent) as the same
// stop. The same signal again within 3 s kills the workers (SIGKILL) and makes the exit code
// 128 + it. When one fails, the others get SIGTERM, then SIGKILL 15 s later. Returns the first
// failure's exit code (128 + signal for a killed one), 0 when all succeeded. `say` gets a line
// at the start, on a failure and on a forced stop. Throws LaunchError for an unusable
// MASTER_PORT.
// `agreed_stops`: exit codes with which a worker ends a stop every rank agreed on (train's
// interrupt and guard stop: each rank stops after the same step): the others are left to end by
// themselves, and get SIGTERM only if they have not within 60 s.
int run_local_workers(const std::vector<std::string>& argv, int n,
                      const std::function<void(const std::string&)>& say = {},
                      const std::vector<int>& agreed_stops = {});

}  // namespace dist

struct DataParallelOptions {
  std::int64_t bucket_bytes = 0;        // 0: the `dist_bucket_mb` setting
  std::int64_t first_bucket_bytes = 1 << 20;  // the first bucket (the last layers) leaves early
  bool find_unused_parameters = false;  // parameters a step may leave without a gradient
};

// Gradients averaged over the ranks in buckets, each all-reduced as soon as backward fills it
// (c10d::Reducer). Parameters and buffers are broadcast from rank 0 at construction, after
// checking that every rank has the same parameter shapes (WorldMismatchError otherwise).
class DataParallel {
 public:
  DataParallel(Runtime& runtime, std::shared_ptr<dist::ProcessGroup> group, torch::nn::Module& module,
               DataParallelOptions options = {});
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  // loss.backward() with the gradients all-reduced (averaged) across ranks, unless inside
  // no_sync(). Throws RankLostError.
  void backward(const at::Tensor& loss);
  // For a program that calls backward itself: call this with the step's outputs (or loss)
  // first, every step that should synchronise.
  void prepare_for_backward(const std::vector<at::Tensor>& outputs);

  // While the returned guard lives, backward() accumulates gradients locally (gradient
  // accumulation); the first backward after it synchronises the accumulated sum.
  class NoSync {
   public:
    explicit NoSync(DataParallel& dp) : dp_(&dp) { dp_->sync_ = false; }
    ~NoSync() { if (dp_) dp_->sync_ = true; }
    NoSync(NoSync&& o) noexcept : dp_(o.dp_) { o.dp_ = nullptr; }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;
    NoSync& operator=(NoSync&&) = delete;

   private:
    DataParallel* dp_;
  };
  NoSync no_sync() { return NoSync(*this); }

  // The loss scaler's found-inf flag becomes the maximum over the ranks, so every rank skips
  // the same steps even where gradients were not synchronised (no_sync).
  void attach(LossScaler& scaler);

  const dist::ProcessGroup& group() const noexcept { return *group_; }
  std::size_t buckets() const noexcept { return buckets_; }
  std::int64_t bucket_bytes() const noexcept { return bucket_bytes_; }

 private:
  struct Engine;  // the reducer (distributed.cpp)
  std::shared_ptr<dist::ProcessGroup> group_;
  std::unique_ptr<Engine> engine_;
  std::size_t buckets_ = 0;
  std::int64_t bucket_bytes_ = 0;
  bool sync_ = true;
};

}  // namespace accelkit
