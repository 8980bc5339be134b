// The claimed collective backends (the "collectives" key): a process group the plugin makes for
// a world of one, over a store on loopback, runs an all-reduce and a broadcast on the device.
// Gloo's groups are the host's to make, so a device offering gloo alone passes without one.
#include <chrono>
#include <sstream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "accelkit/device_sync.hpp"
#include "accelkit/sdk/support/process_group.hpp"
#include "check_util.hpp"

namespace accelkit::conformance::detail {

void check_collectives(const Run& run) {
  const auto& extra = run.info().capabilities.extra;
  const auto key = extra.find(kCollectivesKey);
  if (key == extra.end()) return;
  std::vector<std::string> offered;
  std::stringstream list(key->second);
  for (std::string b; std::getline(list, b, ',');)
    if (!b.empty()) offered.push_back(b);
  for (const std::string& backend : offered) {
    run.check(kCollectivesKey, backend + " process group: a world of one all-reduces and broadcasts",
              [&]() -> CheckResult {
      // A store of its own on a free loopback port, as dist::init makes for a group of one.
      c10d::TCPStoreOptions o;
      o.port = 0;
      o.isServer = true;
      o.numWorkers = 1;
      o.waitWorkers = false;
      o.timeout = std::chrono::seconds(30);
      auto store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", o);
      auto prefixed = c10::make_intrusive<c10d::PrefixStore>("accelkit-verify/" + backend, store);
      CollectiveRequest request;
      request.backend = backend;
      request.store = prefixed.get();
      request.timeout = std::chrono::seconds(30);
      request.torch_device = run.dev.str();
      auto made = run.device.process_group(request);
      if (!made.ok()) {
        if (backend == "gloo" && made.status().code() == StatusCode::not_supported)
          return pass("the host makes Gloo's groups (c10d's Gloo in LibTorch); the plugin makes none");
        return fail("offered, but process_group() says: " + made.status().message() +
                    " - a data-parallel run on this device would stop there");
      }
      if (!made.value()) return fail("offered, but process_group() returned no group");
      auto group = support::retain(made.value());
      // Gloo takes host tensors; any other backend the device's own.
      const c10::Device where = backend == "gloo" ? c10::Device(c10::kCPU) : run.dev;
      at::Tensor x = run.randn({1024}).to(where), ref = x.clone();
      std::vector<at::Tensor> one{x};
      group->allreduce(one)->wait();
      c10d::BroadcastOptions b;
      b.rootRank = 0;
      group->broadcast(one, b)->wait();
      accelkit::detail::synchronize(where);
      const double err = max_rel(one[0], ref);
      return judge("all-reduce and broadcast over one rank against the input (" + run.dev.str() + ")", err, 0.0,
                   "a sum over one rank is the tensor itself");
    });
  }
}

}  // namespace accelkit::conformance::detail
