// A torch::data sampler for data-parallel training: each rank draws a disjoint shard of the
// dataset, reshuffled every epoch from a seed common to all ranks (PyTorch's
// DistributedSampler: indices permuted by seed + epoch, padded by wrapping around to a multiple
// of the world size - or cut to one with drop_last - then rank r takes every world-th from r).
//
//   auto sampler = accelkit::ShardSampler::for_group(dataset.size().value(), *world, seed);
//   auto loader = torch::data::make_data_loader(dataset.map(...), sampler, batch_size);
//   for (epoch ...) { sampler.set_epoch(epoch); for (auto& batch : *loader) ... }
//
// (make_data_loader copies the sampler: call set_epoch on the loader's, or make the loader per
// epoch.) Thread-safety: as torch::data's samplers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <torch/data/samplers/distributed.h>
#include <torch/types.h>

namespace accelkit {

namespace dist { class ProcessGroup; }

class ShardSampler : public torch::data::samplers::DistributedSampler<> {
 public:
  // Throws std::invalid_argument for world < 1 or rank >= world.
  ShardSampler(std::size_t size, std::size_t world, std::size_t rank, std::uint64_t seed = 0, bool shuffle = true,
               bool drop_last = false);
  // This process's rank and world (world size 1 without a launcher).
  static ShardSampler for_group(std::size_t size, const dist::ProcessGroup& group, std::uint64_t seed = 0,
                                bool shuffle = true, bool drop_last = false);

  void reset(torch::optional<std::size_t> new_size = torch::nullopt) override;
  torch::optional<std::vector<std::size_t>> next(std::size_t batch_size) override;
  void save(torch::serialize::OutputArchive& archive) const override;
  void load(torch::serialize::InputArchive& archive) override;

  // This rank's indices for the current epoch, in order.
  const std::vector<std::size_t>& indices() const noexcept { return local_; }

 private:
  void build();
  std::uint64_t seed_;
  bool shuffle_;
  std::vector<std::size_t> local_;
  std::size_t next_ = 0;
};

}  // namespace accelkit
