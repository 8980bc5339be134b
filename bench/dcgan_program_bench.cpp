// pytorch/examples' C++ DCGAN program (cpp/dcgan/dcgan.cpp: its DCGANGenerator of ConvTranspose2d,
// BatchNorm2d, ReLU and Tanh, its discriminator Sequential of Conv2d, LeakyReLU(0.2), BatchNorm2d
// and Sigmoid, kNoiseSize 100, batch 64, two torch::optim::Adam with lr 2e-4 and betas (0.5, 0.5),
// real labels smoothed to uniform 0.8-1.0, binary_cross_entropy, the discriminator stepped on real
// and fake images, then the generator) trained three ways in one process, epochs alternating
// between them, each from the same initial weights and on the same noise and labels:
//   original    the program as written: LibTorch's default threads, fp32, torch::optim::Adam
//               stepped with .step()
//   hand-tuned  what a LibTorch user tunes by hand: intra-op threads = the machine's cores,
//               channels-last weights (the 4-D ones) and inputs
//   accelkit    the program ported with the README's loop: Runtime::start, prepare(model,
//               optimizer) for each network, each forward under rt->autocast(), the losses in
//               fp32, rt->step(optimizer) instead of optimizer.step()
// The port changes 10 statements of the program: 4 in its setup (the include of
// accelkit/runtime.hpp, Runtime::start, the two prepare calls) and 6 in its loop (accelkit_batch
// against original_batch below, marked `// ~`): the four forwards, each now
// `[&] { auto ac = rt->autocast(); return ...; }()` with its output .to(torch::kFloat) where a
// loss reads it, and the two rt->step calls. As formatted here the loop's 6 take 10 lines, the
// forwards wrapping. (The program's `device` is CUDA when there is one; where that differs from
// rt->device(), the one place the modules go, it would also be set to rt->device(): an eleventh.)
// The port keeps the program's four forwards apart, so step tuning sees four autocast scopes per
// batch: each times a different part of the step (it shuffles the candidates' turns for such
// programs).
//
// The images are MNIST's idx files written here (no network): each class a pattern of strokes
// under noise, normalised to [-1, 1] as the example's Normalize(0.5, 0.5) does; batch b of an
// epoch is images [64 b, 64 b + 64), sliced from one tensor in the loop (the example's DataLoader
// with 2 workers is left out: every variant reads its batches the same way). Each batch's D and G
// losses are read (the example reads them every 10th batch). The accelkit run starts with an
// empty cache: its first epoch includes the steps step tuning observes.
//
// Quality is not FID: after the last epoch each generator draws 256 images (fixed noise, in
// training mode as the example's checkpoint samples are), and the table gives their pixel mean
// and standard deviation, and a nearest-pattern score: each image's highest Pearson correlation
// with the 10 class-mean images of the training set, averaged. The real images' figures (the
// last 256 of the 10,000 written) are printed beside them: closer to them is better, not higher
// (samples that collapse onto the noise-free class means would score above the real images).
// With the mean D and G losses of each variant's last epoch.
//
//   accelkit_bench_dcgan_program [--epochs E] [--batches B] [--only VARIANT]
//
// Medians of E epochs (default 3) of B batches (default 20) per variant after one warm-up epoch.
// --only original|hand-tuned|accelkit times that variant alone, each epoch printed, no ratios:
// what a program running by itself sees (the variants alternating in one process share the
// heap, and one variant's allocations change the next one's page faults).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <torch/torch.h>
#include <unistd.h>

#include "accelkit/runtime.hpp"
#include "bench_timing.hpp"
#include "mnist_example.hpp"

namespace {

using accelkit::bench_timing::Clock;
using accelkit::bench_timing::median;
using accelkit::bench_timing::ms_since;

constexpr int64_t kNoiseSize = 100;  // the example's constants
constexpr int64_t kBatchSize = 64;

struct DCGANGeneratorImpl : torch::nn::Module {
  explicit DCGANGeneratorImpl(int64_t noise)
      : conv1(torch::nn::ConvTranspose2dOptions(noise, 256, 4).bias(false)),
        batch_norm1(256),
        conv2(torch::nn::ConvTranspose2dOptions(256, 128, 3).stride(2).padding(1).bias(false)),
        batch_norm2(128),
        conv3(torch::nn::ConvTranspose2dOptions(128, 64, 4).stride(2).padding(1).bias(false)),
        batch_norm3(64),
        conv4(torch::nn::ConvTranspose2dOptions(64, 1, 4).stride(2).padding(1).bias(false)) {
    register_module("conv1", conv1);
    register_module("conv2", conv2);
    register_module("conv3", conv3);
    register_module("conv4", conv4);
    register_module("batch_norm1", batch_norm1);
    register_module("batch_norm2", batch_norm2);
    register_module("batch_norm3", batch_norm3);
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(batch_norm1(conv1(x)));
    x = torch::relu(batch_norm2(conv2(x)));
    x = torch::relu(batch_norm3(conv3(x)));
    return torch::tanh(conv4(x));
  }
  torch::nn::ConvTranspose2d conv1;
  torch::nn::BatchNorm2d batch_norm1;
  torch::nn::ConvTranspose2d conv2;
  torch::nn::BatchNorm2d batch_norm2;
  torch::nn::ConvTranspose2d conv3;
  torch::nn::BatchNorm2d batch_norm3;
  torch::nn::ConvTranspose2d conv4;
};
TORCH_MODULE(DCGANGenerator);

torch::nn::Sequential create_discriminator() {
  using namespace torch::nn;
  return Sequential(Conv2d(Conv2dOptions(1, 64, 4).stride(2).padding(1).bias(false)),
                    LeakyReLU(LeakyReLUOptions().negative_slope(0.2)),
                    Conv2d(Conv2dOptions(64, 128, 4).stride(2).padding(1).bias(false)), BatchNorm2d(128),
                    LeakyReLU(LeakyReLUOptions().negative_slope(0.2)),
                    Conv2d(Conv2dOptions(128, 256, 4).stride(2).padding(1).bias(false)), BatchNorm2d(256),
                    LeakyReLU(LeakyReLUOptions().negative_slope(0.2)),
                    Conv2d(Conv2dOptions(256, 1, 3).stride(1).padding(0).bias(false)), Sigmoid());
}

// The learnable MNIST images in [-1, 1], [N, 1, 28, 28], and their labels.
struct Data {
  torch::Tensor images, labels;
};

Data make_data(const std::filesystem::path& dir) {
  accelkit::bench_mnist::write_mnist(dir, accelkit::bench_mnist::kImages, /*learnable=*/true, 7);
  torch::data::datasets::MNIST mnist(dir.string(), torch::data::datasets::MNIST::Mode::kTest);
  return {(mnist.images() - 0.5) / 0.5, mnist.targets()};
}

struct Variant {
  std::string name;
  DCGANGenerator generator{nullptr};
  torch::nn::Sequential discriminator{nullptr};
  std::unique_ptr<torch::optim::Adam> generator_optimizer, discriminator_optimizer;
  std::vector<double> epochs_ms;
  double first_ms = 0;
  double d_sum = 0, g_sum = 0;  // the losses of the variant's latest epoch, summed
};

// One batch as the program writes it; `fmt` is the hand-tuned variant's channels-last (a no-op
// for the original's contiguous tensors).
std::pair<double, double> original_batch(Variant& v, const torch::Tensor& data, torch::Device device,
                                         at::MemoryFormat fmt) {
  auto& generator = v.generator;
  auto& discriminator = v.discriminator;
  discriminator->zero_grad();
  torch::Tensor real_images = data.to(device).contiguous(fmt);
  torch::Tensor real_labels = torch::empty(data.size(0), device).uniform_(0.8, 1.0);
  torch::Tensor real_output = discriminator->forward(real_images).reshape(real_labels.sizes());
  torch::Tensor d_loss_real = torch::binary_cross_entropy(real_output, real_labels);
  d_loss_real.backward();

  torch::Tensor noise = torch::randn({data.size(0), kNoiseSize, 1, 1}, device).contiguous(fmt);
  torch::Tensor fake_images = generator->forward(noise);
  torch::Tensor fake_labels = torch::zeros(data.size(0), device);
  torch::Tensor fake_output = discriminator->forward(fake_images.detach()).reshape(fake_labels.sizes());
  torch::Tensor d_loss_fake = torch::binary_cross_entropy(fake_output, fake_labels);
  d_loss_fake.backward();

  torch::Tensor d_loss = d_loss_real + d_loss_fake;
  v.discriminator_optimizer->step();

  generator->zero_grad();
  fake_labels.fill_(1);
  fake_output = discriminator->forward(fake_images).reshape(fake_labels.sizes());
  torch::Tensor g_loss = torch::binary_cross_entropy(fake_output, fake_labels);
  g_loss.backward();
  v.generator_optimizer->step();
  return {d_loss.item<double>(), g_loss.item<double>()};  // the example logs them
}

// The same batch ported; the changed lines are marked `// ~`.
std::pair<double, double> accelkit_batch(Variant& v, const torch::Tensor& data, accelkit::Runtime* rt) {
  auto& generator = v.generator;
  auto& discriminator = v.discriminator;
  const torch::Device device = rt->device();
  discriminator->zero_grad();
  torch::Tensor real_images = data.to(device);
  torch::Tensor real_labels = torch::empty(data.size(0), device).uniform_(0.8, 1.0);
  torch::Tensor real_output = [&] { auto ac = rt->autocast(); return discriminator->forward(real_images); }()  // ~
                                  .to(torch::kFloat).reshape(real_labels.sizes());
  torch::Tensor d_loss_real = torch::binary_cross_entropy(real_output, real_labels);
  d_loss_real.backward();

  torch::Tensor noise = torch::randn({data.size(0), kNoiseSize, 1, 1}, device);
  torch::Tensor fake_images = [&] { auto ac = rt->autocast(); return generator->forward(noise); }();  // ~
  torch::Tensor fake_labels = torch::zeros(data.size(0), device);
  torch::Tensor fake_output =  // ~
      [&] { auto ac = rt->autocast(); return discriminator->forward(fake_images.detach()); }()
          .to(torch::kFloat).reshape(fake_labels.sizes());
  torch::Tensor d_loss_fake = torch::binary_cross_entropy(fake_output, fake_labels);
  d_loss_fake.backward();

  torch::Tensor d_loss = d_loss_real + d_loss_fake;
  rt->step(*v.discriminator_optimizer);  // ~

  generator->zero_grad();
  fake_labels.fill_(1);
  fake_output = [&] { auto ac = rt->autocast(); return discriminator->forward(fake_images); }()  // ~
                    .to(torch::kFloat).reshape(fake_labels.sizes());
  torch::Tensor g_loss = torch::binary_cross_entropy(fake_output, fake_labels);
  g_loss.backward();
  rt->step(*v.generator_optimizer);  // ~
  return {d_loss.item<double>(), g_loss.item<double>()};
}

// Pixel mean, standard deviation, and the nearest-pattern score of `images` ([N, 1, 28, 28]):
// each image's highest Pearson correlation with a row of `patterns` ([10, 784]), averaged.
struct SampleStats {
  double mean = 0, std = 0, pattern = 0;
};

torch::Tensor centred_rows(const torch::Tensor& x) {
  auto r = x.reshape({x.size(0), -1}).to(torch::kFloat);
  r = r - r.mean(1, /*keepdim=*/true);
  return r / r.norm(2, 1, /*keepdim=*/true).clamp_min(1e-12);
}

SampleStats sample_stats(const torch::Tensor& images, const torch::Tensor& patterns) {
  const auto x = images.to(torch::kFloat).cpu();
  const auto corr = torch::mm(centred_rows(x), centred_rows(patterns).t());
  return {x.mean().item<double>(), x.std().item<double>(), std::get<0>(corr.max(1)).mean().item<double>()};
}

// 256 images from `v`'s generator on fixed noise, in training mode as the example samples.
torch::Tensor generate(Variant& v, torch::Device device, accelkit::Runtime* rt) {
  torch::NoGradGuard no_grad;
  torch::manual_seed(99);
  const auto noise = torch::randn({256, kNoiseSize, 1, 1}).to(device);
  if (rt == nullptr) return v.generator->forward(noise);
  auto ac = rt->autocast();
  return v.generator->forward(noise).to(torch::kFloat);
}

void print_table(const std::vector<Variant>& vs, const std::vector<SampleStats>& gen, const SampleStats& real,
                 int epochs, int batches) {
  std::printf("medians of %d epochs each after one warm-up epoch, variants alternating; losses: means over the "
              "variant's last epoch; samples: 256 generated images (not FID, see the header)\n", epochs);
  std::printf("  %-11s %10s %10s %11s %8s %8s %8s %8s %8s %9s\n", "variant", "epoch ms", "batch ms", "first epoch",
              "speedup", "D loss", "G loss", "mean", "std", "pattern r");
  const double base = median(vs[0].epochs_ms);
  for (std::size_t i = 0; i < vs.size(); ++i) {
    const double m = median(vs[i].epochs_ms);
    std::printf("  %-11s %10.1f %10.3f %11.1f %7.2fx %8.4f %8.4f %8.4f %8.4f %9.4f\n", vs[i].name.c_str(), m,
                m / batches, vs[i].first_ms, base / m, vs[i].d_sum / batches, vs[i].g_sum / batches, gen[i].mean,
                gen[i].std, gen[i].pattern);
  }
  std::printf("  %-11s %10s %10s %11s %8s %8s %8s %8.4f %8.4f %9.4f\n", "real images", "", "", "", "", "", "",
              real.mean, real.std, real.pattern);
  const double tuned = median(vs[1].epochs_ms), accel = median(vs[2].epochs_ms);
  std::printf("accelkit (defaults) is %.2fx the original program and %.2fx hand-tuned LibTorch\n", base / accel,
              tuned / accel);
}

void print_step_tuning(const accelkit::Runtime& rt) {
  const auto& st = rt.step_tuning();
  const bool decided = st.state == accelkit::StepTuningStatus::State::decided;
  std::printf("accelkit: step tuning %s: %s%s\n",
              decided                                                          ? "decided"
              : st.state == accelkit::StepTuningStatus::State::observing ? "still observing"
                                                                         : "off",
              decided ? (st.candidates[st.chosen].label() + " - ").c_str() : "", st.why.c_str());
}

// The class-mean images of the training set, [10, 784]: the patterns the nearest-pattern score
// compares with.
torch::Tensor class_means(const Data& data) {
  std::vector<torch::Tensor> means;
  for (int64_t c = 0; c < 10; ++c) means.push_back(data.images.index({data.labels == c}).mean(0).reshape({1, -1}));
  return torch::cat(means);
}

// A variant's networks from the example's seed, its optimizers as the example makes them; the
// hand-tuned variant's 4-D weights channels-last. The accelkit variant's are moved by prepare().
Variant make_variant(const std::string& name, torch::Device device) {
  Variant v;
  v.name = name;
  torch::manual_seed(1);
  v.generator = DCGANGenerator(kNoiseSize);
  v.discriminator = create_discriminator();
  if (name != "accelkit") {
    v.generator->to(device);
    v.discriminator->to(device);
  }
  if (name == "hand-tuned") {
    torch::NoGradGuard no_grad;
    auto params = v.generator->parameters();
    for (auto& p : v.discriminator->parameters()) params.push_back(p);
    for (auto& p : params)
      if (p.dim() == 4) p.set_data(p.contiguous(at::MemoryFormat::ChannelsLast));
  }
  const auto adam = torch::optim::AdamOptions(2e-4).betas(std::make_tuple(0.5, 0.5));
  v.generator_optimizer = std::make_unique<torch::optim::Adam>(v.generator->parameters(), adam);
  v.discriminator_optimizer = std::make_unique<torch::optim::Adam>(v.discriminator->parameters(), adam);
  return v;
}

// --only: variant `w`'s warm-up epoch and `epochs` timed ones, each printed, and its median.
template <class Epoch>
void run_alone(Variant& v, Epoch&& epoch, std::size_t w, int epochs, int batches) {
  v.first_ms = epoch(w);
  std::printf("%s alone: warm-up epoch %.1f ms; epochs:", v.name.c_str(), v.first_ms);
  for (int e = 0; e < epochs; ++e) {
    v.epochs_ms.push_back(epoch(w));
    std::printf(" %.1f", v.epochs_ms.back());
  }
  const double m = median(v.epochs_ms);
  std::printf(" ms\n  median %.1f ms an epoch, %.3f ms a batch; D loss %.4f, G loss %.4f (last epoch)\n", m,
              m / batches, v.d_sum / batches, v.g_sum / batches);
}

bool parse_args(int argc, char** argv, int& epochs, int& batches, int& only) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const std::string value = argv[i + 1];
    const int v = std::atoi(argv[i + 1]);
    if (a == "--epochs") epochs = v;
    else if (a == "--batches") batches = v;
    else if (a == "--only" && (value == "original" || value == "hand-tuned" || value == "accelkit"))
      only = value == "original" ? 0 : value == "hand-tuned" ? 1 : 2;
    else
      return std::fprintf(stderr, "usage: accelkit_bench_dcgan_program [--epochs E] [--batches B] "
                                  "[--only original|hand-tuned|accelkit]\n"),
             false;
  }
  const int most = accelkit::bench_mnist::kImages / static_cast<int>(kBatchSize);
  if ((argc - 1) % 2 || epochs < 1 || batches < 1 || batches > most)
    return std::fprintf(stderr, "accelkit_bench_dcgan_program: --epochs must be positive, --batches 1 to %d\n", most),
           false;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int epochs = 3, batches = 20, only = -1;
  if (!parse_args(argc, argv, epochs, batches, only)) return 2;
  const auto root = std::filesystem::temp_directory_path() / ("accelkit-dcgan-program-" + std::to_string(::getpid()));
  ::setenv("ACCELKIT_CACHE_DIR", (root / "cache").c_str(), 1);  // a first run: nothing tuned yet
  const int default_threads = at::get_num_threads();
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const torch::Device device = torch::cuda::is_available() ? torch::Device(torch::kCUDA) : torch::Device(torch::kCPU);
  auto rt = accelkit::Runtime::start({});
  const Data data = make_data(root / "mnist");

  std::vector<Variant> vs;
  for (const char* name : {"original", "hand-tuned", "accelkit"}) vs.push_back(make_variant(name, device));
  const accelkit::Adoption g_adopted = rt->prepare(*vs[2].generator, *vs[2].generator_optimizer);
  const accelkit::Adoption d_adopted = rt->prepare(*vs[2].discriminator, *vs[2].discriminator_optimizer);

  auto plain = [&](std::size_t w) {  // plain LibTorch: fp32 (Runtime::start turned autocast on), its threads
    accelkit::PrecisionPlan p;
    p.threads = w == 0 ? default_threads : cores;
    rt->apply_precision(p);
  };
  auto epoch = [&](std::size_t w) {
    Variant& v = vs[w];
    if (w < 2) plain(w);
    else rt->apply_precision(rt->precision());
    torch::manual_seed(static_cast<uint64_t>(v.epochs_ms.size()) + 11);  // the same noise and labels for each
    v.d_sum = v.g_sum = 0;
    const auto fmt = w == 1 ? at::MemoryFormat::ChannelsLast : at::MemoryFormat::Contiguous;
    const auto t0 = Clock::now();
    for (int b = 0; b < batches; ++b) {
      const auto x = data.images.narrow(0, int64_t{b} * kBatchSize, kBatchSize);
      const auto [d, g] = w == 2 ? accelkit_batch(v, x, rt.get()) : original_batch(v, x, device, fmt);
      v.d_sum += d;
      v.g_sum += g;
    }
    return ms_since(t0);
  };

  std::printf("pytorch/examples cpp/dcgan: %d learnable MNIST-format images per epoch (%d batches of %lld), two Adam "
              "lr 2e-4 betas (0.5, 0.5); LibTorch %d.%d, default threads %d, cores %d; device %s\n",
              batches * static_cast<int>(kBatchSize), batches, static_cast<long long>(kBatchSize), TORCH_VERSION_MAJOR,
              TORCH_VERSION_MINOR, default_threads, cores, rt->device().str().c_str());
  std::printf("accelkit: generator optimizer %s (%s)\n", g_adopted.implementation.c_str(), g_adopted.why.c_str());
  std::printf("accelkit: discriminator optimizer %s (%s)\n", d_adopted.implementation.c_str(), d_adopted.why.c_str());
  if (only >= 0) {  // one variant by itself
    run_alone(vs[static_cast<std::size_t>(only)], epoch, static_cast<std::size_t>(only), epochs, batches);
    if (only == 2) print_step_tuning(*rt);
    std::filesystem::remove_all(root);
    return 0;
  }
  for (std::size_t w = 0; w < 3; ++w) vs[w].first_ms = epoch(w);
  for (int e = 0; e < epochs; ++e)
    for (std::size_t k = 0; k < 3; ++k) {
      const std::size_t w = (e % 2 == 0) ? k : 2 - k;  // the order reversed every epoch
      vs[w].epochs_ms.push_back(epoch(w));
    }

  const auto patterns = class_means(data);
  std::vector<SampleStats> gen;
  for (std::size_t w = 0; w < 3; ++w) {
    if (w < 2) plain(w);
    else rt->apply_precision(rt->precision());
    const auto images = generate(vs[w], w < 2 ? device : rt->device(), w < 2 ? nullptr : rt.get());
    gen.push_back(sample_stats(images, patterns));
  }
  const SampleStats real = sample_stats(data.images.narrow(0, data.images.size(0) - 256, 256), patterns);
  std::filesystem::remove_all(root);

  print_table(vs, gen, real, epochs, batches);
  print_step_tuning(*rt);
  return 0;
}
