// ShardSampler (dist_sampler.hpp): PyTorch DistributedSampler's shards for torch::data.
#include "accelkit/dist_sampler.hpp"

#include <stdexcept>
#include <string>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/serialize/archive.h>

#include "accelkit/distributed.hpp"

namespace accelkit {

ShardSampler::ShardSampler(std::size_t size, std::size_t world, std::size_t rank, std::uint64_t seed, bool shuffle,
                           bool drop_last)
    : DistributedSampler(size, world, rank, !drop_last), seed_(seed), shuffle_(shuffle) {
  if (world < 1 || rank >= world)
    throw std::invalid_argument("ShardSampler: rank " + std::to_string(rank) + " of a world of " +
                                std::to_string(world));
  build();
}

ShardSampler ShardSampler::for_group(std::size_t size, const dist::ProcessGroup& group, std::uint64_t seed,
                                     bool shuffle, bool drop_last) {
  return ShardSampler(size, static_cast<std::size_t>(group.world_size()), static_cast<std::size_t>(group.rank()),
                      seed, shuffle, drop_last);
}

void ShardSampler::build() {
  std::vector<std::size_t> order(size_);
  if (shuffle_ && size_ > 0) {
    // The same permutation on every rank: a generator seeded from the common seed and epoch.
    auto gen = at::make_generator<at::CPUGeneratorImpl>(seed_ + epoch_);
    at::Tensor perm = at::randperm(static_cast<std::int64_t>(size_), gen, at::kLong);
    const std::int64_t* p = perm.data_ptr<std::int64_t>();
    for (std::size_t i = 0; i < size_; ++i) order[i] = static_cast<std::size_t>(p[i]);
  } else {
    for (std::size_t i = 0; i < size_; ++i) order[i] = i;
  }
  // allow_duplicates_ (no drop_last): wrap around to a multiple of the world size.
  const std::size_t total = allow_duplicates_ ? (size_ + num_replicas_ - 1) / num_replicas_ * num_replicas_
                                              : size_ / num_replicas_ * num_replicas_;
  for (std::size_t i = size_; i < total && size_ > 0; ++i) order.push_back(order[i - size_]);
  order.resize(total);
  local_.clear();
  for (std::size_t i = rank_; i < total; i += num_replicas_) local_.push_back(order[i]);
  next_ = 0;
}

void ShardSampler::reset(torch::optional<std::size_t> new_size) {
  if (new_size) size_ = *new_size;
  build();
}

torch::optional<std::vector<std::size_t>> ShardSampler::next(std::size_t batch_size) {
  if (next_ >= local_.size()) return torch::nullopt;
  const std::size_t end = std::min(local_.size(), next_ + batch_size);
  std::vector<std::size_t> out(local_.begin() + static_cast<std::ptrdiff_t>(next_),
                               local_.begin() + static_cast<std::ptrdiff_t>(end));
  next_ = end;
  return out;
}

void ShardSampler::save(torch::serialize::OutputArchive& archive) const {
  archive.write("epoch", at::tensor(static_cast<std::int64_t>(epoch_)), /*is_buffer=*/true);
  archive.write("next", at::tensor(static_cast<std::int64_t>(next_)), /*is_buffer=*/true);
}

void ShardSampler::load(torch::serialize::InputArchive& archive) {
  at::Tensor epoch, next;
  archive.read("epoch", epoch, /*is_buffer=*/true);
  archive.read("next", next, /*is_buffer=*/true);
  epoch_ = static_cast<std::size_t>(epoch.item<std::int64_t>());
  build();
  next_ = std::min(local_.size(), static_cast<std::size_t>(next.item<std::int64_t>()));
}

}  // namespace accelkit
