// Data-parallel training on c10d (distributed.hpp): the launcher's environment, the TCPStore
// rendezvous, the process group (Gloo's made here, others by the device's plugin), a liveness
// beacon that names a lost rank, and DistributedDataParallel's Reducer driven from C++.
#include "accelkit/distributed.hpp"

#include <algorithm>
#include <atomic>
#include <csignal>
#include <signal.h>
#include <condition_variable>
#include <map>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <thread>

#include <torch/nn/module.h>
#include <spdlog/spdlog.h>

#include "accelkit/loss_scaler.hpp"
#include "accelkit/runtime.hpp"
#include "accelkit/runtime/internals.hpp"
#include "accelkit/sdk/support/process_group.hpp"
#include "accelkit/sdk/torch_compat_dist.hpp"
#include "accelkit/version.hpp"
#include "accelkit/base/strings.hpp"

namespace accelkit {
namespace dist {
namespace {

bool loopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1";
}

// c10::Error's message without its C++ backtrace, or the advice newer Gloo appends.
std::string error_text(const std::exception& e) {
  const auto* c = dynamic_cast<const c10::Error*>(&e);
  std::string what = c ? c->what_without_backtrace() : e.what();
  if (const auto advice = what.find(". This is typically caused by"); advice != std::string::npos) what.resize(advice);
  return text::torch_error_line(what);
}

// A peer that dies mid-collective closes its sockets; Gloo's next write to one of them raises
// SIGPIPE, whose default action ends this rank silently (exit 141) before the collective can
// fail and name the lost rank. With SIGPIPE ignored the write fails with EPIPE instead, as in a
// Python process, which ignores it from the start. A handler the program installed is kept.
void survive_closed_peers() {
  struct sigaction now {};
  if (sigaction(SIGPIPE, nullptr, &now) != 0 || now.sa_handler != SIG_DFL) return;
  std::signal(SIGPIPE, SIG_IGN);
  spdlog::debug("data-parallel: SIGPIPE ignored, so a rank that dies mid-write is reported by the collective");
}

}  // namespace

// ---- the world: store, group, beacon ----------------------------------------------------

class World {
 public:
  World(const Launch& l, std::chrono::milliseconds timeout) : launch_(l), timeout_(timeout) {
    store_ = connect(l.rank == 0 && !l.store_hosted, timeout, l.store_hosted ? 0 : static_cast<std::size_t>(l.world_size));
    // A group of one without a launcher: the store took a free port, which the beacon uses.
    if (launch_.master_port == 0) launch_.master_port = static_cast<int>(store_->getPort());
    beacon_store_ = connect(false, timeout, 0);
    beacon_ = std::thread([this] { beat(); });
  }

  ~World() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    if (beacon_.joinable()) beacon_.join();
    // Rank 0 hosts the store: it waits (briefly) for the others to be done with it - unless a
    // rank was lost, which will never say so.
    try {
      if (!failed_ && launch_.rank != 0) {
        store_->add("accelkit/done", 1);
      } else if (!failed_) {
        const auto until = std::chrono::steady_clock::now() + std::min(timeout_, std::chrono::milliseconds(10000));
        while (store_->add("accelkit/done", 0) < launch_.world_size - 1 && std::chrono::steady_clock::now() < until)
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    } catch (const std::exception&) {
      // A rank or the store is gone; nothing left to tell it.
    }
    group_.reset();
    plugin_group_.reset();
  }

  c10::intrusive_ptr<c10d::TCPStore> connect(bool server, std::chrono::milliseconds timeout, std::size_t workers) const {
    c10d::TCPStoreOptions o;
    o.port = static_cast<std::uint16_t>(launch_.master_port);
    o.isServer = server;
    if (workers) o.numWorkers = workers;
    o.waitWorkers = workers != 0;
    o.timeout = timeout;
    return c10::make_intrusive<c10d::TCPStore>(launch_.master_addr, o);
  }

  // The group of `backend` for `device`'s tensors: the plugin's (Device::process_group), or,
  // where it makes none, Gloo's, which the host makes itself. Returns who made it. Throws
  // DeviceUnavailableError where neither can.
  std::string make_group(const std::string& backend, Device& device, const std::string& torch_device) {
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>("accelkit/" + backend, store_);
    CollectiveRequest request;
    request.backend = backend;
    request.store = prefixed.get();
    request.rank = launch_.rank;
    request.world_size = launch_.world_size;
    request.timeout = timeout_;
    request.torch_device = torch_device;
    Result<std::shared_ptr<c10d::ProcessGroup>> made = device.process_group(request);
    if (made && made.value()) {
      plugin_group_ = made.value();
      group_ = support::retain(plugin_group_);
      return "made by the " + device.info().id + " plugin";
    }
    const Status why = made ? Status(StatusCode::internal, "it returned no group") : made.status();
    if (backend != "gloo" || why.code() != StatusCode::not_supported)
      throw DeviceUnavailableError("dist_backend " + backend + " on " + device.info().id +
                                   ": the plugin could not make the process group: " + why.message());
    // GLOO_SOCKET_IFNAME names the interface, as it does for PyTorch.
    const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
    group_ = compat::make_gloo_group(prefixed, launch_.rank, launch_.world_size, timeout_, ifname ? ifname : "",
                                     loopback(launch_.master_addr) ? "127.0.0.1" : "");
    return "made by accelkit (c10d's Gloo in LibTorch)";
  }

  const c10::intrusive_ptr<c10d::ProcessGroup>& group() const { return group_; }
  const c10::intrusive_ptr<c10d::TCPStore>& store() const { return store_; }
  int port() const { return launch_.master_port; }  // the store's (a free one, where none was named)

  // What to throw when `during` failed with `e`: which ranks stopped answering.
  RankLostError lost(const std::string& during, const std::exception& e) const {
    failed_ = true;
    std::vector<int> gone;
    std::string how;
    try {
      auto probe = connect(false, std::chrono::milliseconds(3000), 0);
      std::vector<std::int64_t> before(static_cast<std::size_t>(launch_.world_size));
      for (int r = 0; r < launch_.world_size; ++r) before[static_cast<std::size_t>(r)] = probe->add(beat_key(r), 0);
      std::this_thread::sleep_for(kBeatPeriod * 5);
      for (int r = 0; r < launch_.world_size; ++r)
        if (r != launch_.rank && probe->add(beat_key(r), 0) == before[static_cast<std::size_t>(r)]) gone.push_back(r);
      how = "its heartbeat stopped: it exited, was killed, or hangs";
    } catch (const std::exception&) {
      if (launch_.rank != 0) gone = {0};
      how = "it hosts the rendezvous store at " + launch_.master_addr + ":" + std::to_string(launch_.master_port) +
            ", which no longer answers";
    }
    const std::string of = " of " + std::to_string(launch_.world_size);
    std::string msg;
    if (gone.empty()) {
      msg = "rank " + std::to_string(launch_.rank) + of + ": " + during + " failed while every other rank still " +
            "answers (a rank may be stuck, or " + std::to_string(timeout_.count() / 1000) +
            " s dist_timeout passed): " + error_text(e);
    } else {
      std::vector<std::string> names;
      for (int r : gone) names.push_back(std::to_string(r));
      msg = (gone.size() == 1 ? "rank " : "ranks ") + text::join(names) + of + (gone.size() == 1 ? " is" : " are") +
            " lost (" + how + "); rank " + std::to_string(launch_.rank) + " stops: " + during +
            " failed: " + error_text(e);
    }
    return RankLostError(msg, gone);
  }

 private:
  static constexpr std::chrono::milliseconds kBeatPeriod{400};
  static std::string beat_key(int rank) { return "accelkit/beat/" + std::to_string(rank); }

  void beat() {
    const std::string key = beat_key(launch_.rank);
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_) {
      lock.unlock();
      try {
        beacon_store_->add(key, 1);
      } catch (const std::exception&) {
        return;  // the store is gone: the collectives will say so
      }
      lock.lock();
      wake_.wait_for(lock, kBeatPeriod, [this] { return stop_; });
    }
  }

  Launch launch_;
  std::chrono::milliseconds timeout_;
  c10::intrusive_ptr<c10d::TCPStore> store_;
  c10::intrusive_ptr<c10d::TCPStore> beacon_store_;
  std::shared_ptr<c10d::ProcessGroup> plugin_group_;  // the plugin's handle, when it made group_
  c10::intrusive_ptr<c10d::ProcessGroup> group_;
  std::thread beacon_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  mutable std::atomic<bool> failed_{false};  // a collective failed: no goodbye at the end
};

ProcessGroup::~ProcessGroup() = default;

void ProcessGroup::all_reduce_sum(std::vector<at::Tensor>& tensors) {
  if (!world_) return;
  try {
    for (auto& t : tensors) {
      std::vector<at::Tensor> one{t};
      world_->group()->allreduce(one)->wait();
    }
  } catch (const std::exception& e) {
    throw world_->lost("an all-reduce", e);
  }
}

void ProcessGroup::broadcast(std::vector<at::Tensor>& tensors, int root) {
  if (!world_) return;
  try {
    c10d::BroadcastOptions o;
    o.rootRank = root;
    for (auto& t : tensors) {
      std::vector<at::Tensor> one{t};
      world_->group()->broadcast(one, o)->wait();
    }
  } catch (const std::exception& e) {
    throw world_->lost("a broadcast from rank " + std::to_string(root), e);
  }
}

void ProcessGroup::barrier() {
  if (!world_) return;
  try {
    if (backend_ == "gloo") {
      world_->group()->barrier()->wait();
    } else {
      // NCCL's own barrier guesses its device from the rank; a one-element all-reduce on this
      // rank's device is a barrier that cannot guess wrong.
      std::vector<at::Tensor> one{at::zeros({1}, at::TensorOptions().device(tensor_device_))};
      world_->group()->allreduce(one)->wait();
      (void)one[0].item<float>();  // waits for the device, not just the enqueue
    }
  } catch (const std::exception& e) {
    throw world_->lost("a barrier", e);
  }
}

std::vector<std::string> ProcessGroup::all_gather_text(const std::string& key, const std::string& text) {
  if (!world_) return {text};
  const auto& store = world_->store();
  const std::string base = "accelkit/gather/" + key + "/";
  std::vector<std::string> keys, out;
  try {
    store->set(base + std::to_string(rank()), std::vector<std::uint8_t>(text.begin(), text.end()));
    for (int r = 0; r < world_size(); ++r) keys.push_back(base + std::to_string(r));
    store->wait(keys, timeout_);
    for (const auto& k : keys) {
      auto v = store->get(k);
      out.emplace_back(v.begin(), v.end());
    }
  } catch (const std::exception& e) {
    throw world_->lost("exchanging " + key, e);
  }
  return out;
}

namespace {

// The step tuner's agreement (step_tuning.hpp) through the run's store: each rank's observation
// under its own key, checked for without waiting. Holds the group weakly: once it is gone, each
// rank decides alone.
StepAgreement step_agreement(const std::shared_ptr<ProcessGroup>& pg) {
  StepAgreement a;
  a.world_size = pg->world_size();
  const std::weak_ptr<ProcessGroup> weak = pg;
  auto key = [](int generation, int rank) {
    return "accelkit/step_tuning/" + std::to_string(generation) + "/" + std::to_string(rank);
  };
  a.publish = [weak, key](int generation, const std::string& payload) {
    const auto g = weak.lock();
    if (!g || !g->world()) return;
    try {
      g->world()->store()->set(key(generation, g->rank()), std::vector<std::uint8_t>(payload.begin(), payload.end()));
    } catch (const std::exception& e) {
      throw g->world()->lost("publishing this rank's step timings", e);
    }
  };
  a.poll = [weak, key](int generation) -> std::optional<std::vector<std::string>> {
    const auto g = weak.lock();
    if (!g || !g->world()) return std::vector<std::string>{};
    std::vector<std::string> keys, out;
    for (int r = 0; r < g->world_size(); ++r) keys.push_back(key(generation, r));
    try {
      const auto& store = g->world()->store();
      if (!store->check(keys)) return std::nullopt;
      for (const auto& k : keys) {
        const auto v = store->get(k);
        out.emplace_back(v.begin(), v.end());
      }
    } catch (const std::exception& e) {
      throw g->world()->lost("reading the other ranks' step timings", e);
    }
    return out;
  };
  a.rank0 = [weak](const std::string& name, const std::string& text) {
    const auto g = weak.lock();
    if (!g || !g->world()) return text;
    return g->all_gather_text(name, text).at(0);
  };
  return a;
}

}  // namespace

std::shared_ptr<ProcessGroup> init(Runtime& runtime, std::optional<Launch> launch) {
  std::shared_ptr<ProcessGroup> pg(new ProcessGroup());
  pg->launch_ = launch ? *launch : detect_launch();
  const Launch& l = pg->launch_;
  const Config& c = runtime.context().config();
  pg->timeout_ = std::chrono::milliseconds(static_cast<std::int64_t>(*c.dist_timeout) * 1000);
  Context& ctx = runtime.context();
  if (l.world_size <= 1 && !l.group_of_one) {
    pg->why_ = l.source;
    ctx.record({"dist", "one process", l.launcher, l.source});
    return pg;
  }

  survive_closed_peers();
  // A group of one without a launcher (Launch::group_of_one): its store on loopback, on a free port.
  if (pg->launch_.master_addr.empty()) pg->launch_.master_addr = "127.0.0.1";

  // The backend: the plugin's answer, or the setting, which the device must support.
  const DeviceInfo& info = runtime.device_handle()->info();
  std::vector<std::string> offered;
  if (auto it = info.capabilities.extra.find(kCollectivesKey); it != info.capabilities.extra.end()) {
    std::stringstream ss(it->second);
    for (std::string b; std::getline(ss, b, ',');)
      if (!b.empty()) offered.push_back(b);
  }
  const std::string& want = *c.dist_backend;
  std::string backend;
  if (want == "auto") {
    if (offered.empty())
      throw DeviceUnavailableError(info.id + " takes no part in a data-parallel run: its plugin names no collective "
                                   "backend (capability key \"collectives\")");
    backend = offered.front();
    pg->why_ = "the " + info.id + " plugin's collective backend (collectives = " + text::join(offered, ",") + ")";
  } else {
    if (std::find(offered.begin(), offered.end(), want) == offered.end())
      throw DeviceUnavailableError("dist_backend = " + want + " (from " + c.dist_backend.from() + "): " + info.id +
                                   " cannot use it; its plugin offers " +
                                   (offered.empty() ? std::string("none") : text::join(offered, ", ")));
    backend = want;
    pg->why_ = "dist_backend = " + want + " (from " + c.dist_backend.from() + ")";
  }
  pg->backend_ = backend;
  // Gloo takes host tensors (as LibTorch builds it here); any other backend the device's own.
  pg->tensor_device_ = backend == "gloo" ? at::Device(at::kCPU) : runtime.device();

  try {
    pg->world_ = std::make_unique<World>(l, pg->timeout_);
    pg->launch_.master_port = pg->world_->port();
  } catch (const std::exception& e) {
    throw RankLostError("rank " + std::to_string(l.rank) + " of " + std::to_string(l.world_size) +
                            ": the rendezvous at " + l.master_addr + ":" + std::to_string(l.master_port) +
                            " failed within dist_timeout (" + std::to_string(*c.dist_timeout) + " s): " + error_text(e),
                        {});
  }
  // The same accelkit and LibTorch on every rank, before anything else is exchanged.
  const std::string mine = std::string("accelkit ") + ACCELKIT_VERSION_STRING + ", LibTorch " + TORCH_VERSION;
  const auto all = pg->all_gather_text("versions", mine);
  for (int r = 1; r < l.world_size; ++r)
    if (all[static_cast<std::size_t>(r)] != all[0])
      throw WorldMismatchError("rank " + std::to_string(r) + " runs " + all[static_cast<std::size_t>(r)] +
                               " but rank 0 runs " + all[0] + ": every rank must run the same build");
  std::string made_by;
  try {
    made_by = pg->world_->make_group(backend, *runtime.device_handle(), runtime.device().str());
  } catch (const DeviceUnavailableError&) {
    throw;
  } catch (const std::exception& e) {
    throw pg->world_->lost("creating the " + backend + " process group", e);
  }
  pg->why_ += ", " + made_by;
  ctx.record({"dist", std::to_string(l.world_size) + " ranks, " + backend, l.launcher,
              "rank " + std::to_string(l.rank) + " (local " + std::to_string(l.local_rank) + " of " +
                  std::to_string(l.local_world_size) + "), " + l.source + "; master " + l.master_addr + ":" +
                  std::to_string(l.master_port) + "; backend: " + pg->why_});
  spdlog::info("data-parallel: rank {} of {} ({}), backend {}", l.rank, l.world_size, l.launcher, backend);
  detail::RuntimeInternals::join_data_parallel(runtime, l.local_world_size, step_agreement(pg));
  return pg;
}

}  // namespace dist

// ---- DataParallel ------------------------------------------------------------------------

struct DataParallel::Engine {
  std::vector<at::Tensor> params;
  std::unique_ptr<c10d::Reducer> reducer;
  std::int64_t first_bucket_bytes = 0;
  bool find_unused = false;
};

namespace {

// Buckets of bf16/fp16 gradients (master weights) are summed in fp32: Gloo in LibTorch 1.13
// cannot all-reduce bf16 at all ("Invalid scalar type"), and an fp32 sum of the ranks' halves
// rounds once instead of at every addition. The hook divides by the world size itself (the
// reducer's own division is for its default hook only) and hands back the bucket's dtype.
class WideAllReduceHook : public c10d::CommHookInterface {
 public:
  explicit WideAllReduceHook(c10::intrusive_ptr<c10d::ProcessGroup> group) : state_(std::move(group)) {}

  at::Tensor parseHookResult(const c10::IValue& result) override {
    return result.isTensor() ? result.toTensor() : result.toTensorVector().at(0);
  }

  c10::intrusive_ptr<c10::ivalue::Future> runHook(c10d::GradBucket& bucket) override {
    const at::Tensor& buffer = bucket.getBuffer();
    const at::ScalarType dtype = buffer.scalar_type();
    std::vector<at::Tensor> wide{buffer.to(at::kFloat).div_(static_cast<double>(state_->getSize()))};
    auto done = state_->allreduce(wide)->getFuture();
    return done->then(
        [dtype](c10::ivalue::Future& f) {
          at::Tensor sum = f.value().toTensorVector().at(0);
          return c10::IValue(std::vector<at::Tensor>{sum.to(dtype)});
        },
        c10::ListType::ofTensors());
  }

 private:
  c10::intrusive_ptr<c10d::ProcessGroup> state_;
};

bool reduced_precision(const std::vector<at::Tensor>& params) {
  return std::any_of(params.begin(), params.end(), [](const at::Tensor& p) {
    return p.scalar_type() == at::kBFloat16 || p.scalar_type() == at::kHalf;
  });
}

std::string shapes_of(const std::vector<at::Tensor>& params) {
  std::ostringstream s;
  s << params.size() << " parameters:";
  for (const auto& p : params) {
    s << " " << c10::toString(p.scalar_type()) << "[";
    for (int64_t i = 0; i < p.dim(); ++i) s << (i ? "," : "") << p.size(i);
    s << "]";
  }
  return s.str();
}
}  // namespace

DataParallel::DataParallel(Runtime& runtime, std::shared_ptr<dist::ProcessGroup> group, torch::nn::Module& module,
                           DataParallelOptions options)
    : group_(std::move(group)), engine_(std::make_unique<Engine>()) {
  if (!group_) throw std::invalid_argument("DataParallel: no process group (call accelkit::dist::init first)");
  for (auto& p : module.parameters())
    if (p.requires_grad()) engine_->params.push_back(p);
  bucket_bytes_ = options.bucket_bytes > 0
                      ? options.bucket_bytes
                      : static_cast<std::int64_t>(*runtime.context().config().dist_bucket_mb) << 20;
  engine_->first_bucket_bytes = std::min(options.first_bucket_bytes, bucket_bytes_);
  engine_->find_unused = options.find_unused_parameters;
  if (!group_->world()) return;

  static int generation = 0;  // DataParallels are made in the same order on every rank
  const std::string key = "model/" + std::to_string(generation++);
  const std::string mine = shapes_of(engine_->params);
  const auto all = group_->all_gather_text(key, mine);
  for (int r = 1; r < group_->world_size(); ++r)
    if (all[static_cast<std::size_t>(r)] != all[0])
      throw dist::WorldMismatchError("rank " + std::to_string(r) + "'s model differs from rank 0's: " +
                               text::shorten(all[static_cast<std::size_t>(r)], 200) + " vs " +
                               text::shorten(all[0], 200));
  // Rank 0's parameters and buffers, to every rank: one flat buffer per dtype.
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> state = module.parameters();
  for (auto& b : module.buffers()) state.push_back(b);
  std::map<at::ScalarType, std::vector<at::Tensor>> by_dtype;
  for (auto& t : state) by_dtype[t.scalar_type()].push_back(t);
  for (auto& [dtype, ts] : by_dtype) {
    std::vector<at::Tensor> flat;
    for (auto& t : ts) flat.push_back(t.detach().reshape({-1}).to(group_->tensor_device()));
    std::vector<at::Tensor> one{at::cat(flat)};
    group_->broadcast(one, 0);
    std::int64_t at = 0;
    for (auto& t : ts) {
      t.copy_(one[0].narrow(0, at, t.numel()).view(t.sizes()));
      at += t.numel();
    }
  }
}

DataParallel::~DataParallel() {
  try {
    engine_.reset();
  } catch (const std::exception& e) {
    spdlog::warn("DataParallel: the gradient reducer failed as it closed: {}", e.what());
  }
}

void DataParallel::prepare_for_backward(const std::vector<at::Tensor>& outputs) {
  if (!group_->world() || !sync_) return;
  if (!engine_->reducer) {
    // Made at the first synchronised step, so the buckets take the parameters' dtypes as the
    // optimizer left them (master weights turn them bf16 after construction).
    auto made = compat::make_reducer(engine_->params, group_->world()->group(), bucket_bytes_,
                                     engine_->first_bucket_bytes, engine_->find_unused);
    engine_->reducer = std::move(made.first);
    buckets_ = made.second;
    if (group_->backend() == "gloo" && reduced_precision(engine_->params))
      engine_->reducer->register_comm_hook(std::make_unique<WideAllReduceHook>(group_->world()->group()));
  }
  engine_->reducer->prepare_for_backward(outputs);
}

void DataParallel::backward(const at::Tensor& loss) {
  prepare_for_backward({loss});
  if (!group_->world()) {
    loss.backward();
    return;
  }
  try {
    loss.backward();
  } catch (const std::exception& e) {
    throw group_->world()->lost("the gradient all-reduce", e);
  }
}

void DataParallel::attach(LossScaler& scaler) {
  if (!group_->world()) return;
  std::weak_ptr<dist::ProcessGroup> weak = group_;
  scaler.set_found_inf_agreement([weak](bool found) {
    auto g = weak.lock();
    if (!g) return found;
    std::vector<at::Tensor> flag{at::full({1}, found ? 1.0F : 0.0F, at::TensorOptions().device(g->tensor_device()))};
    g->all_reduce_sum(flag);
    return flag[0].item<float>() > 0.0F;
  });
}

}  // namespace accelkit
