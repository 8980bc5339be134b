// Feeding the device: batches produced on a background thread while the step runs.
//
//   auto batches = accelkit::prefetch_loader(*loader, {rt->config().prefetch, rt->device()});
//   while (auto b = batches.next()) { ... b->data ... }
//   batches.stats().mean_wait_ms()   // > 0: the step waited on data; the pipeline is the bottleneck
//
// A Prefetcher keeps up to `depth` batches ready. The batches and their order are those the
// producer gives, one after the other, as without it (the producer runs on one thread, in
// order). An exception thrown by the producer is re-thrown by the next() that would have
// returned that batch, after the batches produced before it; the sequence ends there.
// Destroying the Prefetcher mid-epoch stops the thread: a producer call in progress finishes,
// nothing more is produced.
//
// Where the batches go (Options::device):
//   - none or the CPU: as produced; the thread overlaps decoding/augmentation with the step.
//   - CUDA (ROCm included): the producer thread pins each tensor and copies it with
//     non_blocking on a side stream from LibTorch's pool; next() makes the device's current
//     stream wait for that copy (an event), and tells the caching allocator the memory is used
//     on the current stream, so the copy overlaps the step without a host synchronisation.
//   - other devices (MPS, a plugin's new device type): next() copies to the device on the
//     caller's thread; production still overlaps the step, the copy does not.
//
// Batch types: at::Tensor, torch::data::Example<> (data, target), std::pair, std::tuple and
// std::vector of those (what torch::data's DataLoader returns with or without Stack<>).
// depth 0 runs the producer inside next(): the same batches, no thread (the waits then are the
// producer's time).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <c10/core/Event.h>
#include <c10/core/Stream.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/data/example.h>

namespace accelkit {

struct PrefetchStats {
  std::uint64_t batches = 0;  // returned by next()
  std::uint64_t waits = 0;    // next() calls that found no batch ready and blocked
  double waited_ms = 0;       // time next() blocked, in all
  double max_wait_ms = 0;     // the longest single block
  double produce_ms = 0;      // time the producer (and staging) took, in all
  double mean_wait_ms() const { return batches ? waited_ms / static_cast<double>(batches) : 0.0; }
  double mean_produce_ms() const { return batches ? produce_ms / static_cast<double>(batches) : 0.0; }
};

struct PrefetchOptions {
  std::size_t depth = 2;                    // batches kept ready (the `prefetch` setting); 0 = no thread
  std::optional<c10::Device> device;        // where next() delivers the batches; none = as produced
};

namespace detail {

// Calls f(tensor&) for every tensor of a batch.
template <class F>
void for_each_tensor(at::Tensor& t, F&& f) {
  if (t.defined()) f(t);
}
template <class F, class D, class T>
void for_each_tensor(torch::data::Example<D, T>& e, F&& f) {
  for_each_tensor(e.data, f);
  for_each_tensor(e.target, f);
}
template <class F, class D>
void for_each_tensor(torch::data::Example<D, torch::data::example::NoTarget>& e, F&& f) {
  for_each_tensor(e.data, f);
}
template <class F, class A, class B>
void for_each_tensor(std::pair<A, B>& p, F&& f) {
  for_each_tensor(p.first, f);
  for_each_tensor(p.second, f);
}
template <class F, class... Ts>
void for_each_tensor(std::tuple<Ts...>& t, F&& f) {
  std::apply([&](auto&... parts) { (for_each_tensor(parts, f), ...); }, t);
}
template <class F, class T>
void for_each_tensor(std::vector<T>& v, F&& f) {
  for (auto& x : v) for_each_tensor(x, f);
}

// How batches reach the device.
enum class Staging { none, side_stream, on_next };

inline Staging staging_for(const std::optional<c10::Device>& device) {
  if (!device || device->is_cpu()) return Staging::none;
  return device->is_cuda() ? Staging::side_stream : Staging::on_next;
}

}  // namespace detail

template <class Batch>
class Prefetcher {
 public:
  // Returns the next batch, or nullopt at the end of the data.
  using Producer = std::function<std::optional<Batch>()>;

  Prefetcher(Producer produce, PrefetchOptions options)
      : produce_(std::move(produce)), options_(std::move(options)), staging_(detail::staging_for(options_.device)) {
    if (!produce_) throw std::invalid_argument("accelkit::Prefetcher: no producer");
    if (options_.depth > 0) thread_ = std::thread([this] { run(); });
  }
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  ~Prefetcher() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    space_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  // The next batch on the device (see the header comment), or nullopt at the end; re-throws
  // the producer's exception at the batch it belongs to.
  std::optional<Batch> next() {
    const auto start = std::chrono::steady_clock::now();
    Slot slot;
    if (finished_) return std::nullopt;  // after the end or an error, the end
    if (options_.depth == 0) {
      slot = make_slot();
    } else {
      std::unique_lock<std::mutex> lock(mu_);
      const bool ready = !queue_.empty();
      ready_.wait(lock, [&] { return !queue_.empty(); });
      slot = std::move(queue_.front());
      queue_.pop_front();
      if (!ready) ++stats_.waits;
      lock.unlock();
      space_.notify_one();
    }
    const double waited = ms_since(start);
    if (!slot.batch) {
      finished_ = true;
      if (slot.error) std::rethrow_exception(slot.error);
      return std::nullopt;
    }
    deliver(slot);
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.batches;
    stats_.waited_ms += waited;
    if (options_.depth == 0 && waited > 0) ++stats_.waits;
    if (waited > stats_.max_wait_ms) stats_.max_wait_ms = waited;
    return std::move(slot.batch);
  }

  PrefetchStats stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  const PrefetchOptions& options() const noexcept { return options_; }

 private:
  struct Slot {
    std::optional<Batch> batch;     // nullopt with no error: the end
    std::exception_ptr error;
    std::optional<c10::Event> copied;  // side-stream staging: recorded after the copies
  };

  static double ms_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
  }

  // Produces (and, for side-stream staging, starts the copy of) one batch.
  Slot make_slot() {
    const auto start = std::chrono::steady_clock::now();
    Slot slot;
    try {
      slot.batch = produce_();
      if (slot.batch && staging_ == detail::Staging::side_stream) slot.copied = stage_on_side_stream(*slot.batch);
    } catch (...) {
      slot.batch.reset();
      slot.error = std::current_exception();
    }
    const double took = ms_since(start);
    std::lock_guard<std::mutex> lock(mu_);
    stats_.produce_ms += took;
    return slot;
  }

  c10::Event stage_on_side_stream(Batch& batch) {
    const c10::Device device = *options_.device;
    c10::impl::VirtualGuardImpl impl(device.type());
    if (!side_) side_ = impl.getStreamFromGlobalPool(device, /*isHighPriority=*/false);
    c10::StreamGuard on_side(*side_);
    detail::for_each_tensor(batch, [&](at::Tensor& t) {
      if (t.device() == device) return;
      at::Tensor host = t.is_pinned() ? t : t.pin_memory();
      t = host.to(device, /*non_blocking=*/true);
    });
    c10::Event copied(device.type());
    copied.record(*side_);
    return copied;
  }

  // On the caller's thread: the device's current stream waits for the copies, or the copy.
  void deliver(Slot& slot) {
    if (staging_ == detail::Staging::side_stream && slot.copied) {
      c10::impl::VirtualGuardImpl impl(options_.device->type());
      const c10::Stream current = impl.getStream(*options_.device);
      slot.copied->block(current);
      detail::for_each_tensor(*slot.batch, [&](at::Tensor& t) {
        if (t.device() == *options_.device) impl.recordDataPtrOnStream(t.storage().data_ptr(), current);
      });
    } else if (staging_ == detail::Staging::on_next) {
      const c10::Device device = *options_.device;
      detail::for_each_tensor(*slot.batch, [&](at::Tensor& t) {
        if (t.device() != device) t = t.to(device);
      });
    }
  }

  void run() {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        space_.wait(lock, [&] { return stop_ || queue_.size() < options_.depth; });
        if (stop_) return;
      }
      Slot slot = make_slot();
      const bool last = !slot.batch;  // the end, or an error: nothing follows
      {
        std::lock_guard<std::mutex> lock(mu_);
        queue_.push_back(std::move(slot));
      }
      ready_.notify_one();
      if (last) return;
    }
  }

  Producer produce_;
  PrefetchOptions options_;
  detail::Staging staging_;
  std::optional<c10::Stream> side_;  // used by the producer thread only
  mutable std::mutex mu_;
  std::condition_variable ready_, space_;
  std::deque<Slot> queue_;
  bool stop_ = false;
  bool finished_ = false;  // next() returned the end or the producer's error (caller's thread only)
  PrefetchStats stats_;
  std::thread thread_;  // last: started after every member it uses exists
};

// A Prefetcher over one epoch of a torch::data DataLoader (begun on the producer thread).
template <class Loader>
Prefetcher<typename Loader::BatchType> prefetch_loader(Loader& loader, PrefetchOptions options) {
  using Batch = typename Loader::BatchType;
  using It = decltype(loader.begin());
  auto it = std::make_shared<std::optional<It>>();
  return Prefetcher<Batch>(
      [&loader, it]() -> std::optional<Batch> {
        if (!*it) it->emplace(loader.begin());
        else ++**it;
        if (**it == loader.end()) return std::nullopt;
        return ***it;
      },
      std::move(options));
}

}  // namespace accelkit
