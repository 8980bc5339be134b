// pytorch/examples' C++ MNIST program's pieces, shared by the benches that run it: its network
// and MNIST's idx files written here (no network access), random or learnable.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
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

}  // namespace accelkit::bench_mnist
