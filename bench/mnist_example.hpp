// pytorch/examples' C++ MNIST program's pieces, shared by the benches that run it: its network
// and MNIST's idx files written here (no network access), random or learnable.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace accelkit::bench_mnist {

// pytorch/examples cpp/mnist/mnist.cpp's network.
struct Net : torch::nn::Module {
  Net()
      : conv1(torch::nn::Conv2dOptions(1, 10, /*kernel_size=*/5)),
        conv2(torch::nn::Conv2dOptions(10, 20, /*kernel_size=*/5)),
        fc1(320, 50),
        fc2(50, 10) {
    register_module("conv1", conv1);
    register_module("conv2", conv2);
    register_module("conv2_drop", conv2_drop);
    register_module("fc1", fc1);
    register_module("fc2", fc2);
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(torch::max_pool2d(conv1->forward(x), 2));
    x = torch::relu(torch::max_pool2d(conv2_drop->forward(conv2->forward(x)), 2));
    x = x.view({-1, 320});
    x = torch::relu(fc1->forward(x));
    x = torch::dropout(x, /*p=*/0.5, /*training=*/is_training());
    x = fc2->forward(x);
    return torch::log_softmax(x, /*dim=*/1);
  }
  torch::nn::Conv2d conv1;
  torch::nn::Conv2d conv2;
  torch::nn::Dropout2d conv2_drop;
  torch::nn::Linear fc1;
  torch::nn::Linear fc2;
};

inline void put_u32(std::ofstream& f, std::uint32_t v) {
  const unsigned char b[4] = {static_cast<unsigned char>(v >> 24), static_cast<unsigned char>(v >> 16),
                              static_cast<unsigned char>(v >> 8), static_cast<unsigned char>(v)};
  f.write(reinterpret_cast<const char*>(b), 4);
}

// MNIST's test-split files in the idx format torch::data::datasets::MNIST reads.
constexpr int kImages = 10000;

inline void write_mnist(const std::filesystem::path& dir, int images, bool learnable = false, unsigned seed = 7) {
  std::filesystem::create_directories(dir);
  std::mt19937 rng(seed);
  std::ofstream img(dir / "t10k-images-idx3-ubyte", std::ios::binary);
  put_u32(img, 2051);
  put_u32(img, static_cast<std::uint32_t>(images));
  put_u32(img, 28);
  put_u32(img, 28);
  // Learnable: each class has a pattern of its own (a few bright strokes, the same for every
  // `seed`), drawn under noise; otherwise pixels and labels are independent noise.
  std::mt19937 shapes(11);
  std::vector<std::vector<int>> pattern(10, std::vector<int>(28 * 28, 0));
  for (auto& p : pattern)
    for (int stroke = 0; stroke < 6; ++stroke) {
      const int r = static_cast<int>(shapes() % 20) + 4, c = static_cast<int>(shapes() % 20) + 4;
      const bool across = shapes() % 2 == 0;
      for (int k = -3; k <= 3; ++k) p[static_cast<std::size_t>((across ? r : r + k) * 28 + (across ? c + k : c))] = 200;
    }
  std::vector<int> labels(static_cast<std::size_t>(images));
  for (auto& l : labels) l = static_cast<int>(rng() % 10);
  std::vector<char> pixels(28 * 28);
  for (int i = 0; i < images; ++i) {
    const auto& p = pattern[static_cast<std::size_t>(labels[static_cast<std::size_t>(i)])];
    for (std::size_t k = 0; k < pixels.size(); ++k) {
      const int noise = static_cast<int>(rng() & 0xFF);
      pixels[k] = static_cast<char>(learnable ? std::min(255, p[k] / 2 + noise / 2) : noise);
    }
    img.write(pixels.data(), static_cast<std::streamsize>(pixels.size()));
  }
  std::ofstream lab(dir / "t10k-labels-idx1-ubyte", std::ios::binary);
  put_u32(lab, 2049);
  put_u32(lab, static_cast<std::uint32_t>(images));
  for (int l : labels) lab.put(static_cast<char>(l));
  if (!img || !lab) {
    std::fprintf(stderr, "cannot write %s\n", dir.c_str());
    std::exit(1);
  }
}

// The example's dataset: MNIST's test split (kImages images) read from `dir`, normalised with
// the example's mean and deviation, stacked into batches.
using Dataset = torch::data::datasets::MapDataset<
    torch::data::datasets::MapDataset<torch::data::datasets::MNIST, torch::data::transforms::Normalize<>>,
    torch::data::transforms::Stack<>>;

inline Dataset dataset(const std::filesystem::path& dir) {
  return torch::data::datasets::MNIST(dir.string(), torch::data::datasets::MNIST::Mode::kTest)
      .map(torch::data::transforms::Normalize<>(0.1307, 0.3081))
      .map(torch::data::transforms::Stack<>());
}

// Test accuracy in percent: the example's test() (eval mode, no grad), each forward under
// the guard `scope()` returns.
template <typename Scope>
double accuracy(Net& model, const std::filesystem::path& dir, Scope scope) {
  torch::NoGradGuard no_grad;
  model.eval();
  auto loader = torch::data::make_data_loader(dataset(dir), torch::data::DataLoaderOptions().batch_size(1000));
  std::int64_t correct = 0, total = 0;
  for (const auto& batch : *loader) {
    at::Tensor out;
    {
      [[maybe_unused]] auto s = scope();
      out = model.forward(batch.data);
    }
    correct += out.argmax(1).eq(batch.target).sum().template item<std::int64_t>();
    total += batch.target.size(0);
  }
  model.train();
  return 100.0 * static_cast<double>(correct) / static_cast<double>(std::max<std::int64_t>(total, 1));
}

// One way of training the program, timed per epoch.
struct Variant {
  std::string name;
  std::unique_ptr<Net> model;
  std::vector<double> epochs_ms;
  double first_ms = 0;  // the warm-up epoch
  double loss_sum = 0;  // every step's loss, read (so no step is skipped)
  std::int64_t steps = 0;
};

// Three ways of training the program under these names, each from the same initial weights.
inline std::vector<Variant> variants(const char* first, const char* second, const char* third) {
  std::vector<Variant> vs(3);
  vs[0].name = first;
  vs[1].name = second;
  vs[2].name = third;
  for (auto& v : vs) {
    torch::manual_seed(1);
    v.model = std::make_unique<Net>();
  }
  return vs;
}

}  // namespace accelkit::bench_mnist
