#include "bench_models.hpp"

#include <cmath>
#include <stdexcept>

#include <ATen/Context.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/pooling.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/csrc/jit/api/module.h>

#include "accelkit/bench.hpp"
#include "accelkit/model_file.hpp"
#include "accelkit/sdk/torch_compat.hpp"

namespace accelkit::bench_detail {

namespace {

// Pre-norm encoder layer: x + attn(ln1(x)), then + mlp(ln2(x)); no embedding, no dropout.
class EncoderLayer : public torch::nn::Module {
 public:
  EncoderLayer(int d, int heads)
      : heads_(heads),
        ln1_(register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})))),
        qkv_(register_module("qkv", torch::nn::Linear(d, 3 * d))),
        proj_(register_module("proj", torch::nn::Linear(d, d))),
        ln2_(register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})))),
        fc1_(register_module("fc1", torch::nn::Linear(d, 4 * d))),
        fc2_(register_module("fc2", torch::nn::Linear(4 * d, d))) {}

  at::Tensor forward(const at::Tensor& x) {
    const int64_t b = x.size(0), t = x.size(1), d = x.size(2), dh = d / heads_;
    // [B, T, 3, H, dh] -> [3, B, H, T, dh]
    at::Tensor qkv = qkv_->forward(ln1_->forward(x)).view({b, t, 3, heads_, dh}).permute({2, 0, 3, 1, 4});
    at::Tensor a = attention(qkv[0], qkv[1], qkv[2]).transpose(1, 2).reshape({b, t, d});
    at::Tensor h = x + proj_->forward(a);
    return h + fc2_->forward(at::gelu(fc1_->forward(ln2_->forward(h))));
  }

 private:
  static at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
    return compat::attention(q, k, v);
  }

  int64_t heads_;
  torch::nn::LayerNorm ln1_;
  torch::nn::Linear qkv_, proj_;
  torch::nn::LayerNorm ln2_;
  torch::nn::Linear fc1_, fc2_;
};

class Encoder : public torch::nn::Module {
 public:
  Encoder(int d, int heads, int layers) {
    for (int i = 0; i < layers; ++i)
      layers_.push_back(register_module("layer" + std::to_string(i), std::make_shared<EncoderLayer>(d, heads)));
  }
  at::Tensor forward(at::Tensor x) {
    for (auto& layer : layers_) x = layer->forward(x);
    return x;
  }

 private:
  std::vector<std::shared_ptr<EncoderLayer>> layers_;
};

// pytorch/examples' C++ MNIST network (cpp/mnist): two 5x5 convolutions with max pooling and
// ReLU, then two linear layers; without its dropout (random masks would make the variants'
// losses incomparable in the accuracy check) and with the bench's MSE against a teacher instead
// of NLL on labels.
class MnistCnn : public torch::nn::Module {
 public:
  MnistCnn()
      : conv1_(register_module("conv1", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 10, 5)))),
        conv2_(register_module("conv2", torch::nn::Conv2d(torch::nn::Conv2dOptions(10, 20, 5)))),
        fc1_(register_module("fc1", torch::nn::Linear(320, 50))),
        fc2_(register_module("fc2", torch::nn::Linear(50, 10))) {}

  at::Tensor forward(const at::Tensor& x) {
    at::Tensor h = at::relu(at::max_pool2d(conv1_->forward(x), {2, 2}));
    h = at::relu(at::max_pool2d(conv2_->forward(h), {2, 2}));
    h = at::relu(fc1_->forward(h.flatten(1)));
    return fc2_->forward(h);
  }

 private:
  torch::nn::Conv2d conv1_, conv2_;
  torch::nn::Linear fc1_, fc2_;
};

}  // namespace

bool is_builtin_model(const std::string& model) {
  return model == "mlp" || model == "transformer" || model == "cnn" || model == "optimizer";
}

InputSpec parse_input(const std::string& text) {
  auto bad = [&](const std::string& why) {
    throw std::invalid_argument("--input '" + text.substr(0, 80) + "': " + why +
                                " (expected DIMxDIMx...[,dtype], e.g. 32x3x224x224 or 16x128,int64)");
  };
  InputSpec in;
  in.text = text;
  const auto comma = text.find(',');
  const std::string dims = text.substr(0, comma);
  if (comma != std::string::npos) {
    static const std::pair<const char*, c10::ScalarType> kTypes[] = {
        {"float32", c10::ScalarType::Float}, {"float", c10::ScalarType::Float},   {"float16", c10::ScalarType::Half},
        {"bfloat16", c10::ScalarType::BFloat16}, {"float64", c10::ScalarType::Double}, {"int64", c10::ScalarType::Long},
        {"int32", c10::ScalarType::Int},   {"bool", c10::ScalarType::Bool}};
    const std::string name = text.substr(comma + 1);
    bool known = false;
    for (const auto& [n, t] : kTypes)
      if (name == n) {
        in.dtype = t;
        known = true;
      }
    if (!known) bad("unknown dtype '" + name.substr(0, 20) + "' (float32, float16, bfloat16, float64, int64, int32, bool)");
  }
  std::size_t pos = 0;
  std::int64_t elements = 1;
  while (pos <= dims.size()) {
    const auto x = dims.find('x', pos);
    const std::string d = dims.substr(pos, x == std::string::npos ? std::string::npos : x - pos);
    if (d.empty() || d.size() > 9 || d.find_first_not_of("0123456789") != std::string::npos) bad("'" + d + "' is not a size");
    const std::int64_t n = std::stoll(d);
    if (n < 1) bad("sizes must be at least 1");
    in.shape.push_back(n);
    elements *= n;
    if (elements > (std::int64_t{1} << 32)) bad("more than 2^32 elements");
    if (x == std::string::npos) break;
    pos = x + 1;
  }
  if (in.shape.empty() || in.shape.size() > 8) bad("1 to 8 dimensions");
  return in;
}

at::Tensor make_tensor(const InputSpec& in, c10::Device device) {
  at::Tensor t;
  if (in.dtype == c10::ScalarType::Bool) t = at::randint(0, 2, in.shape).to(at::kBool);
  else if (c10::isIntegralType(in.dtype, false)) t = at::randint(0, 16, in.shape, at::TensorOptions().dtype(in.dtype));
  else t = at::randn(in.shape).to(in.dtype);
  return t.to(device);
}

ModelSpec make_spec(const std::string& model, int batch, int width, bool gpu) {
  ModelSpec s;
  s.model = model;
  if (model == "mlp") {
    s.width = width ? width : (gpu ? 8192 : 2048);
    s.batch = batch ? batch : (gpu ? 512 : 256);
    s.layers = 3;
  } else if (model == "transformer") {
    s.width = width ? width : (gpu ? 1024 : 256);
    s.batch = batch ? batch : (gpu ? 32 : 8);
    s.seq = gpu ? 512 : 128;
    s.layers = gpu ? 8 : 4;
    s.heads = s.width % 64 == 0 ? s.width / 64 : 1;  // head size 64 where it divides
  } else if (model == "cnn") {
    s.width = 28;  // MNIST's 28 x 28 images, one channel
    s.batch = batch ? batch : (gpu ? 256 : 64);
    s.layers = 4;
  } else if (model == "optimizer") {
    s.width = width ? width : 2048;  // 4 x 2048^2 = 16.8M parameters
    s.batch = 0;
    s.layers = 4;
  } else if (model == "file") {
    s.batch = 0;  // the caller sets file and inputs
  } else {
    throw std::invalid_argument("unknown bench model '" + model + "'");
  }
  return s;
}

std::string describe(const ModelSpec& s) {
  const std::string w = std::to_string(s.width);
  if (s.model == "mlp")
    return std::to_string(s.layers) + " x Linear(" + w + ", " + w + ") + ReLU, MSE, batch " + std::to_string(s.batch);
  if (s.model == "transformer")
    return std::to_string(s.layers) + " encoder layers, d " + w + ", " + std::to_string(s.heads) + " heads, seq " +
           std::to_string(s.seq) + ", batch " + std::to_string(s.batch) +
           (compat::kSdpaControllable ? ", SDPA" : ", attention math path (no SDPA in this LibTorch)");
  if (s.model == "cnn")
    return "MNIST CNN (pytorch/examples cpp/mnist): conv 1->10 5x5, pool, conv 10->20 5x5, pool, fc 320->50->10, "
           "MSE, batch " + std::to_string(s.batch) + " of 1 x 28 x 28";
  if (s.model == "file") {
    std::string out = "TorchScript " + s.file + ", inputs";
    for (const auto& in : s.inputs) out += " " + in.text;
    return out;
  }
  return "AdamW step on " + std::to_string(s.layers) + " x [" + w + ", " + w + "] fp32";
}

double training_matmul_flops(const ModelSpec& s) {
  const double b = s.batch, d = s.width;
  // Forward once, backward twice (input and weight gradients) - except the first layer's
  // input gradient, which nothing needs (the input does not require grad).
  if (s.model == "mlp") return (3.0 * s.layers - 1) * 2.0 * b * d * d;
  if (s.model == "cnn") {  // conv1 24x24x10 outputs of 25 MACs, conv2 8x8x20 of 250, fc 320x50 + 50x10
    const double conv1 = 24.0 * 24 * 10 * 25, rest = 8.0 * 8 * 20 * 250 + 320.0 * 50 + 50.0 * 10;
    return b * 2.0 * (2 * conv1 + 3 * rest);  // no input gradient for conv1
  }
  if (s.model == "transformer") {
    const double n = b * s.seq;
    // qkv 6nd^2 + proj 2nd^2 + mlp 16nd^2 = 24nd^2; q k^T and p v: 2 * 2 b t^2 d.
    return 3.0 * s.layers * (24.0 * n * d * d + 4.0 * b * s.seq * s.seq * d);
  }
  return 0;
}

Net make_net(const ModelSpec& s, std::uint64_t seed) {
  at::manual_seed(seed);
  Net net;
  if (s.model == "mlp") {
    torch::nn::Sequential seq;
    for (int i = 0; i < s.layers; ++i) {
      if (i) seq->push_back(torch::nn::ReLU());
      seq->push_back(torch::nn::Linear(s.width, s.width));
    }
    net.module = seq.ptr();
    net.forward = [seq](const at::Tensor& x) mutable { return seq->forward(x); };
  } else if (s.model == "transformer") {
    auto enc = std::make_shared<Encoder>(s.width, s.heads, s.layers);
    net.module = enc;
    net.forward = [enc](const at::Tensor& x) { return enc->forward(x); };
  } else if (s.model == "cnn") {
    auto cnn = std::make_shared<MnistCnn>();
    net.module = cnn;
    net.forward = [cnn](const at::Tensor& x) { return cnn->forward(x); };
  } else if (s.model == "file") {
    std::shared_ptr<torch::jit::Module> script;
    try {
      script = std::make_shared<torch::jit::Module>(load_torchscript(s.file));
    } catch (const ModelFileError& e) {
      throw std::invalid_argument(std::string("bench: ") + e.what());
    }
    script->train();
    for (at::Tensor p : script->parameters())  // trained here, whatever the file recorded
      if (p.is_floating_point()) p.requires_grad_(true);
    // The other inputs: fixed, the same for every Net of this spec.
    at::manual_seed(seed ^ 0x5eed);
    std::vector<at::Tensor> extra;
    for (std::size_t i = 1; i < s.inputs.size(); ++i) extra.push_back(make_tensor(s.inputs[i], c10::kCPU));
    net.script = script;
    net.forward = [script, extra](const at::Tensor& x) {
      std::vector<c10::IValue> args{x};
      for (const auto& e : extra) args.emplace_back(e.device() == x.device() ? e : e.to(x.device()));
      const c10::IValue out = script->forward(args);
      if (out.isTensor()) return out.toTensor();
      if (out.isTuple() && !out.toTupleRef().elements().empty() && out.toTupleRef().elements()[0].isTensor())
        return out.toTupleRef().elements()[0].toTensor();
      throw std::invalid_argument("bench: the model's output is not a tensor (nor a tuple starting with one)");
    };
  } else {
    throw std::invalid_argument("bench model '" + s.model + "' has no network");
  }
  return net;
}

std::vector<at::Tensor> Net::parameters() const {
  if (module) return module->parameters();
  std::vector<at::Tensor> out;
  if (script)
    for (const at::Tensor& p : script->parameters()) out.push_back(p);
  return out;
}

void Net::to(c10::Device device) const {
  if (module) module->to(device);
  if (script) script->to(device);
}

at::Tensor make_input(const ModelSpec& s, c10::Device device) {
  if (s.model == "file") return make_tensor(s.inputs.front(), device);
  auto opts = at::TensorOptions().dtype(at::kFloat);
  at::Tensor x = s.model == "transformer" ? at::randn({s.batch, s.seq, s.width}, opts)
                 : s.model == "cnn"       ? at::randn({s.batch, 1, s.width, s.width}, opts)
                                          : at::randn({s.batch, s.width}, opts);
  return x.to(device);
}

std::vector<at::Tensor> make_optimizer_params(const ModelSpec& s, std::uint64_t seed, c10::Device device) {
  at::manual_seed(seed);
  std::vector<at::Tensor> params;
  for (int i = 0; i < s.layers; ++i) {
    at::Tensor p = at::randn({s.width, s.width}).to(device).requires_grad_();
    p.mutable_grad() = at::randn({s.width, s.width}).to(device);
    params.push_back(p);
  }
  return params;
}

}  // namespace accelkit::bench_detail

namespace accelkit {

std::vector<at::Tensor> example_inputs(const std::vector<std::string>& inputs) {
  std::vector<at::Tensor> out;
  for (const std::string& in : inputs) out.push_back(bench_detail::make_tensor(bench_detail::parse_input(in), c10::kCPU));
  return out;
}

}  // namespace accelkit
