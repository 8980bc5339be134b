// A ResNet-20 CIFAR-10 training program in the style of the widely used C++ tutorials (residual
// blocks with BatchNorm, torch::optim::Adam, a random horizontal flip in the loop, the learning
// rate cut by torch::optim::StepLR), trained three ways in one process, epochs alternating
// between them, each from the same initial weights:
//   original    the program as written: LibTorch's default threads, fp32, torch::optim::Adam
//   hand-tuned  what a LibTorch user tunes by hand: intra-op threads = the machine's cores,
//               channels-last input and weights
//   accelkit    the program ported (the README's loop): Runtime::start, prepare(model,
//               optimizer), forward under rt->autocast(), the loss in fp32, rt->step(optimizer)
// The images are 32x32x3 in 10 classes, each class a fixed random pattern under noise (no
// network), so the network learns and the test accuracies can be compared. The accelkit run
// starts with an empty cache: its first epoch includes the steps step tuning observes.
//
//   accelkit_bench_resnet_program [--epochs E] [--batches B] [--batch N]
//
// Medians of E epochs per variant after one warm-up epoch each.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <torch/torch.h>
#include <unistd.h>

#include "accelkit/runtime.hpp"
#include "bench_timing.hpp"

namespace {

using accelkit::bench_timing::Clock;
using accelkit::bench_timing::median;
using accelkit::bench_timing::ms_since;

struct BlockImpl : torch::nn::Module {
  BlockImpl(int64_t in, int64_t out, int64_t stride)
      : conv1(torch::nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false)),
        bn1(out),
        conv2(torch::nn::Conv2dOptions(out, out, 3).padding(1).bias(false)),
        bn2(out) {
    register_module("conv1", conv1);
    register_module("bn1", bn1);
    register_module("conv2", conv2);
    register_module("bn2", bn2);
    if (stride != 1 || in != out) {
      down = torch::nn::Sequential(torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 1).stride(stride).bias(false)),
                                   torch::nn::BatchNorm2d(out));
      register_module("down", down);
    }
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto y = torch::relu(bn1(conv1(x)));
    y = bn2(conv2(y));
    return torch::relu(y + (down ? down->forward(x) : x));
  }
  torch::nn::Conv2d conv1;
  torch::nn::BatchNorm2d bn1;
  torch::nn::Conv2d conv2;
  torch::nn::BatchNorm2d bn2;
  torch::nn::Sequential down{nullptr};
};
TORCH_MODULE(Block);

struct ResNet20 : torch::nn::Module {
  ResNet20() : stem(torch::nn::Conv2dOptions(3, 16, 3).padding(1).bias(false)), bn(16), fc(64, 10) {
    register_module("stem", stem);
    register_module("bn", bn);
    int64_t in = 16;
    for (int64_t out : {16, 32, 64})
      for (int i = 0; i < 3; ++i) {
        layers->push_back(Block(in, out, (i == 0 && out != 16) ? 2 : 1));
        in = out;
      }
    register_module("layers", layers);
    register_module("fc", fc);
  }
  torch::Tensor forward(const torch::Tensor& x) {
    auto y = torch::relu(bn(stem(x)));
    y = layers->forward(y);
    y = torch::adaptive_avg_pool2d(y, {1, 1}).flatten(1);
    return fc(y);
  }
  torch::nn::Conv2d stem;
  torch::nn::BatchNorm2d bn;
  torch::nn::Sequential layers;
  torch::nn::Linear fc;
};

// Images of class c: pattern c under noise; labels in order.
std::pair<torch::Tensor, torch::Tensor> make_data(int64_t n, uint64_t seed) {
  torch::manual_seed(1234);
  const auto patterns = torch::randn({10, 3, 32, 32});
  torch::manual_seed(seed);
  const auto labels = torch::randint(0, 10, {n}, torch::kLong);
  return {patterns.index_select(0, labels) * 0.6 + torch::randn({n, 3, 32, 32}), labels};
}

struct Variant {
  std::string name;
  std::shared_ptr<ResNet20> model;
  std::unique_ptr<torch::optim::Adam> opt;
  std::unique_ptr<torch::optim::StepLR> sched;
  std::vector<double> epochs_ms;
  double first_ms = 0, loss_sum = 0;
};

double accuracy(ResNet20& m, const torch::Tensor& x, const torch::Tensor& y, bool channels_last) {
  torch::NoGradGuard no_grad;
  m.eval();
  auto in = channels_last ? x.contiguous(at::MemoryFormat::ChannelsLast) : x;
  const auto pred = m.forward(in).argmax(1);
  m.train();
  return 100.0 * pred.eq(y).sum().item<double>() / static_cast<double>(y.size(0));
}

// The table, the ratios, and what step tuning did.
void report(const std::vector<Variant>& vs, const std::vector<double>& acc, int epochs, int batches,
            const accelkit::Runtime& runtime) {
  const accelkit::Runtime* rt = &runtime;
  accelkit::bench_timing::print_epoch_table(vs, acc, epochs, batches);
  const double base = median(vs[0].epochs_ms);
  const double tuned = median(vs[1].epochs_ms), accel = median(vs[2].epochs_ms);
  const auto& cl = rt->context().config().channels_last;
  const std::string settings = cl.user_set() ? std::string("channels_last = ") + accelkit::to_string(*cl) : "defaults";
  std::printf("accelkit (%s) is %.2fx the original program and %.2fx hand-tuned LibTorch; accuracy %+.2f points "
              "vs the original\n", settings.c_str(), base / accel, tuned / accel, acc[2] - acc[0]);
  const auto& st = rt->step_tuning();
  const bool decided = st.state == accelkit::StepTuningStatus::State::decided;
  std::printf("accelkit: step tuning %s: %s%s\n",
              decided ? "decided" : st.state == accelkit::StepTuningStatus::State::observing ? "still observing" : "off",
              decided ? (st.candidates[st.chosen].label() + " - ").c_str() : "", st.why.c_str());
  if (st.redecisions > 0)
    std::printf("accelkit: step tuning re-observed %lld time(s); the last: %s\n", static_cast<long long>(st.redecisions),
                st.last_revisit.c_str());
  std::printf("  (mean losses %.4f / %.4f / %.4f, read so no step is skipped)\n", vs[0].loss_sum / ((epochs + 1.0) * batches),
              vs[1].loss_sum / ((epochs + 1.0) * batches), vs[2].loss_sum / ((epochs + 1.0) * batches));
}

// The three variants from the same initial weights, each with its own Adam and schedule.
std::vector<Variant> make_variants() {
  std::vector<Variant> vs(3);
  const char* names[] = {"original", "hand-tuned", "accelkit"};
  for (std::size_t i = 0; i < 3; ++i) {
    torch::manual_seed(1);
    vs[i].name = names[i];
    vs[i].model = std::make_shared<ResNet20>();
    if (i == 1) {  // channels-last weights
      torch::NoGradGuard no_grad;
      for (auto& p : vs[i].model->parameters())
        if (p.dim() == 4) p.set_data(p.contiguous(at::MemoryFormat::ChannelsLast));
    }
    vs[i].opt = std::make_unique<torch::optim::Adam>(vs[i].model->parameters(), torch::optim::AdamOptions(1e-3));
    vs[i].sched = std::make_unique<torch::optim::StepLR>(*vs[i].opt, 3, 0.5);  // per epoch
  }
  return vs;
}

// --epochs E --batches B --batch N; false (after saying why) on bad input.
bool parse(int argc, char** argv, int& epochs, int& batches, int& batch) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const int v = std::atoi(argv[i + 1]);
    if (a == "--epochs") epochs = v;
    else if (a == "--batches") batches = v;
    else if (a == "--batch") batch = v;
    else return std::fprintf(stderr, "usage: accelkit_bench_resnet_program [--epochs E] [--batches B] [--batch N]\n"), false;
  }
  if ((argc - 1) % 2 || epochs < 1 || batches < 1 || batch < 1)
    return std::fprintf(stderr, "accelkit_bench_resnet_program: each option takes a positive number\n"), false;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int epochs = 3, batches = 12, batch = 128;
  if (!parse(argc, argv, epochs, batches, batch)) return 2;
  const auto cache = std::filesystem::temp_directory_path() / ("accelkit-resnet-program-" + std::to_string(::getpid()));
  ::setenv("ACCELKIT_CACHE_DIR", cache.c_str(), 1);  // a first run: nothing tuned yet
  const int default_threads = at::get_num_threads();
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  auto rt = accelkit::Runtime::start({});
  const auto [train_x, train_y] = make_data(int64_t{batches} * batch, 7);
  const auto [test_x, test_y] = make_data(1024, 8);

  std::vector<Variant> vs = make_variants();
  const accelkit::Adoption adopted = rt->prepare(*vs[2].model, *vs[2].opt);

  auto epoch = [&](std::size_t w) {
    Variant& v = vs[w];
    if (w < 2) {  // plain LibTorch: fp32 (Runtime::start turned autocast on for this thread), its threads
      accelkit::PrecisionPlan plain;
      plain.threads = w == 0 ? default_threads : cores;
      rt->apply_precision(plain);
    } else {
      rt->apply_precision(rt->precision());
    }
    torch::manual_seed(static_cast<uint64_t>(v.epochs_ms.size()) + 11);
    const auto t0 = Clock::now();
    for (int b = 0; b < batches; ++b) {
      auto x = train_x.narrow(0, int64_t{b} * batch, batch), y = train_y.narrow(0, int64_t{b} * batch, batch);
      if (torch::rand({1}).item<double>() < 0.5) x = x.flip(3);  // the augmentation in the loop
      if (w == 1) x = x.contiguous(at::MemoryFormat::ChannelsLast);
      v.opt->zero_grad();
      torch::Tensor out;
      if (w == 2) {
        auto ac = rt->autocast();
        out = v.model->forward(x);
      } else {
        out = v.model->forward(x);
      }
      auto loss = torch::nn::functional::cross_entropy(out.to(torch::kFloat), y);
      loss.backward();
      if (w == 2) rt->step(*v.opt);
      else v.opt->step();
      v.loss_sum += loss.item<double>();
    }
    v.sched->step();
    return ms_since(t0);
  };

  std::printf("ResNet-20, %d synthetic CIFAR-format images per epoch (%d batches of %d), Adam lr 1e-3 halved every 3 "
              "epochs; LibTorch %d.%d, default threads %d, cores %d; device %s\n",
              batches * batch, batches, batch, TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR, default_threads, cores,
              rt->device().str().c_str());
  std::printf("accelkit: optimizer %s (%s)\n", adopted.implementation.c_str(), adopted.why.c_str());
  for (std::size_t w = 0; w < 3; ++w) vs[w].first_ms = epoch(w);
  for (int e = 0; e < epochs; ++e)
    for (std::size_t k = 0; k < 3; ++k) {
      const std::size_t w = (e % 2 == 0) ? k : 2 - k;  // the order reversed every epoch
      vs[w].epochs_ms.push_back(epoch(w));
    }
  std::vector<double> acc;
  for (std::size_t w = 0; w < 3; ++w) {
    if (w < 2) {
      accelkit::PrecisionPlan plain;
      plain.threads = w == 0 ? default_threads : cores;
      rt->apply_precision(plain);
      acc.push_back(accuracy(*vs[w].model, test_x, test_y, w == 1));
    } else {
      rt->apply_precision(rt->precision());
      auto ac = rt->autocast();
      acc.push_back(accuracy(*vs[w].model, test_x, test_y, false));
    }
  }
  std::filesystem::remove_all(cache);

  report(vs, acc, epochs, batches, *rt);
  return 0;
}
