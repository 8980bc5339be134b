// Model files (model_file.hpp): TorchScript made here in C++, .pt2 packages exported at test
// time by the PyTorch that matches this LibTorch (tests/fixtures/models/export_models.py, when
// the build found one), and hand-made archives for every way a file can be refused.
#include "torch_doctest.hpp"

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/serialization/import.h>
#include <ATen/ATen.h>
#include <torch/serialize.h>

#include "accelkit/loader.hpp"
#include "accelkit/model_file.hpp"
#include "accelkit/sdk/torch_compat_aoti.hpp"
#include "test_support.hpp"

// Each suite in its own namespace: suites are compiled together in unity batches.
namespace model_file_suite {

using namespace accelkit;
using namespace accelkit::test;

namespace {

std::string error_of(const std::string& path, c10::Device device = c10::kCPU) {
  try {
    load_model_file(path, device);
  } catch (const ModelFileError& e) {
    return e.what();
  }
  return "";
}

// A .pt2-shaped archive: archive_format "pt2", the model's metadata and (optionally) a library.
void write_fake_pt2(const std::string& path, const std::string& metadata_json, const std::string& library_path = "") {
  caffe2::serialize::PyTorchStreamWriter w(path);
  const std::string fmt = "pt2";
  w.writeRecord("archive_format", fmt.data(), fmt.size());
  w.writeRecord("data/aotinductor/model/abc.wrapper_metadata.json", metadata_json.data(), metadata_json.size());
  if (!library_path.empty()) {
    std::ifstream in(library_path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    REQUIRE_FALSE(bytes.empty());
    w.writeRecord("data/aotinductor/model/abc.wrapper.so", bytes.data(), bytes.size());
  }
  w.writeEndOfFile();
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string fixtures_dir() { return ACCELKIT_MODEL_FIXTURES; }
bool exported() { return fs::exists(fixtures_dir() + "/versions.txt"); }

}  // namespace

TEST_CASE("TorchScript made in C++ loads on the CPU and runs exactly as the same ops") {
  TempDir tmp("accelkit-model");
  at::manual_seed(7);
  torch::jit::Module m("Tiny");
  const auto w = at::randn({16, 5});
  m.register_parameter("w", w, /*is_buffer=*/false);
  m.define(R"(
def forward(self, x):
    return torch.relu(torch.matmul(x, self.w))
)");
  const std::string path = (tmp.path() / "tiny.pt").string();
  m.save(path);

  const ModelFileFacts facts = inspect_model_file(path);
  CHECK(facts.format == ModelFormat::torchscript);
  CHECK(facts.archive_version > 0);

  auto model = load_model_file(path, c10::kCPU);
  REQUIRE(model);
  CHECK(model->device() == c10::Device(c10::kCPU));
  CHECK(has(model->describe(), "TorchScript"));
  for (int trial = 0; trial < 3; ++trial) {  // fresh random inputs
    const auto x = at::randn({8, 16});
    const auto out = model->run({x});
    REQUIRE(out.size() == 1);
    CHECK(at::equal(out[0], at::relu(at::matmul(x, w))));
  }
  // Inputs the model rejects: LibTorch's reason, one line.
  const std::string bad = [&] {
    try {
      model->run({at::randn({8, 7})});
    } catch (const ModelFileError& e) {
      return std::string(e.what());
    }
    return std::string();
  }();
  INFO(bad);
  CHECK(has(bad, "refused its inputs"));
  CHECK_FALSE(has(bad, "\n"));
}

TEST_CASE("files that are not models are refused with what they are") {
  TempDir tmp("accelkit-model");
  SUBCASE("missing") { CHECK(has(error_of((tmp.path() / "none.pt").string()), "no such file")); }
  SUBCASE("not a zip") {
    const auto p = (tmp.path() / "garbage.pt").string();
    std::ofstream(p) << "this is not a model\n";
    CHECK(has(error_of(p), "not a zip archive"));
  }
  SUBCASE("a pickled tensor (torch.save), not a model") {
    const auto p = (tmp.path() / "tensor.pt").string();
    const auto bytes = torch::pickle_save(at::ones({3}));
    std::ofstream(p, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    const std::string e = error_of(p);
    INFO(e);
    CHECK(has(e, "torch.save archive"));
  }
}

TEST_CASE(".pt2 packages are checked before their library is loaded") {
  TempDir tmp("accelkit-model");
  const auto p = (tmp.path() / "fake.pt2").string();
  if (!compat::AotiPackage::available) {
    write_fake_pt2(p, R"({"AOTI_DEVICE_KEY": "cpu"})");
    const std::string e = error_of(p);
    INFO(e);
    CHECK(has(e, "needs LibTorch >= 2.6"));
    CHECK(has(e, host_torch_version()));
    return;
  }
  SUBCASE("compiled for another device type") {
    write_fake_pt2(p, R"({"AOTI_DEVICE_KEY": "cuda", "AOTI_MACHINE": "x86_64"})");
    const std::string e = error_of(p);
    INFO(e);
    CHECK(has(e, "compiled for cuda"));
    CHECK(has(e, "cpu"));
  }
  SUBCASE("made by another PyTorch") {
    write_fake_pt2(p, R"({"AOTI_DEVICE_KEY": "cpu", "torch_version": "2.1.0"})");
    const std::string e = error_of(p);
    INFO(e);
    CHECK(has(e, "made by PyTorch 2.1.0"));
    CHECK(has(e, host_torch_version()));
  }
  SUBCASE("another machine or instruction set") {
    write_fake_pt2(p, R"({"AOTI_DEVICE_KEY": "cpu", "AOTI_MACHINE": "s390x"})");
    CHECK(has(error_of(p), "compiled for s390x machines"));
    write_fake_pt2(p, R"({"AOTI_DEVICE_KEY": "cpu", "AOTI_CPU_ISA": "ZVECTOR"})");
    CHECK(has(error_of(p), "compiled for ZVECTOR"));
  }
  SUBCASE("its library needs another LibTorch's libraries") {
    write_fake_pt2(p, R"({"AOTI_DEVICE_KEY": "cpu"})",
                   std::string(ACCELKIT_FIXTURE_PLUGIN_DIR) + "/needs-other-torch/libaccelkit-needs-other-torch.so");
    const std::string e = error_of(p);
    INFO(e);
    CHECK(has(e, "another LibTorch"));
    CHECK(has(e, "libc10.so.99"));
    CHECK(std::getenv("ACCELKIT_FIXTURE_LOADED_NEEDS_OTHER_TORCH") == nullptr);  // never loaded
  }
  SUBCASE("its library calls LibTorch functions this LibTorch lacks") {
    write_fake_pt2(p, R"({"AOTI_DEVICE_KEY": "cpu"})", ACCELKIT_AOTI_MISSING_LIB);
    const std::string e = error_of(p);
    INFO(e);
    CHECK(has(e, "aoti_torch_accelkit_no_such_function"));
    CHECK(has(e, "newer PyTorch"));
  }
  SUBCASE("no model of that name") {
    write_fake_pt2(p, R"({"AOTI_DEVICE_KEY": "cpu"})");
    try {
      load_model_file(p, c10::kCPU, "other");
      FAIL("loaded");
    } catch (const ModelFileError& e) {
      CHECK(has(e.what(), "no model 'other'"));
    }
  }
}

TEST_CASE("a package's instruction set is read as inductor writes it: words, each checked") {
  // What inductor records (cpu_vec_isa.py: str() of the picked set, upper-cased).
  CHECK(cpu_isa_problem("") == "");
  CHECK(cpu_isa_problem("DEFAULT") == "");
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  const bool vnni = __builtin_cpu_supports("avx512vnni");
  CHECK(cpu_isa_problem("AVX2").empty() == (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")));
  CHECK(cpu_isa_problem("AVX512").empty() == avx512);
  CHECK(cpu_isa_problem("AVX512 AVX512_VNNI").empty() == (avx512 && vnni));
  if (!vnni) CHECK(has(cpu_isa_problem("AVX512 AVX512_VNNI"), "AVX512_VNNI"));
  // Words it cannot check are refused, never assumed.
  const std::string z = cpu_isa_problem("AVX512 ZVECTOR");
  CHECK(has(z, "'ZVECTOR'"));
  CHECK(has(z, "can check"));
}

TEST_CASE("models exported by this LibTorch's PyTorch: TorchScript and .pt2 agree with eager") {
  if (!exported()) {
    MESSAGE("skipped: no PyTorch matching this LibTorch was found at configure time, so no fixtures were exported "
            "(" << fixtures_dir() << ")");
    return;
  }
  auto io = torch::jit::load(fixtures_dir() + "/io.pt");
  for (const std::string name : {"mlp", "cnn"}) {
    CAPTURE(name);
    const auto x = io.attr("x_" + name).toTensor();
    const auto y = io.attr("y_" + name).toTensor();
    auto ts = load_model_file(fixtures_dir() + "/" + name + ".pt", c10::kCPU);
    const auto ts_out = ts->run({x});
    REQUIRE(ts_out.size() == 1);
    // The same eager kernels: equal up to float rounding of the summation order.
    CHECK(at::allclose(ts_out[0], y, 1e-5, 1e-6));
    if (!compat::AotiPackage::available) continue;
    const ModelFileFacts facts = inspect_model_file(fixtures_dir() + "/" + name + ".pt2");
    CHECK(facts.format == ModelFormat::aoti_package);
    CHECK(facts.device == "cpu");
    CHECK_FALSE(facts.torch_version.empty());
    auto pkg = load_model_file(fixtures_dir() + "/" + name + ".pt2", c10::kCPU);
    INFO(pkg->describe());
    const auto out = pkg->run({x});
    REQUIRE(out.size() == 1);
    // Inductor's own fused C++ kernels: fp32 with another summation order and vectorised
    // reductions; 1e-4 relative is ~1000 ulp of fp32, far below any real fault.
    CHECK(at::allclose(out[0], y, 1e-4, 1e-5));
    // Fresh inputs too, against the TorchScript model (eager ops).
    const auto x2 = at::randn_like(x);
    CHECK(at::allclose(pkg->run({x2})[0], ts->run({x2})[0], 1e-4, 1e-5));
  }
}

}  // namespace model_file_suite
