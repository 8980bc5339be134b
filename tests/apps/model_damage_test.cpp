// Damaged and wrong model files through every loading path: the library's load_torchscript and
// load_model_file, and the CLI's bench --model (inference and training) and report --model.
// Each is refused in one line that names the file and says what it is not, quoting LibTorch
// shortened (never its backtrace, its "checkpoint" advice or its enhancement request), at most
// about 300 characters; the CLI exits 2. The files are made here from a TorchScript module saved
// by this LibTorch: empty, random bytes, truncated at several offsets, a zip of garbage records,
// flipped bytes in the pickle and in a code record, a directory, a FIFO, a sparse 1 GiB file
// (and one that begins like a zip), and, where the test-time export ran, a torch.export .pt2
// and a .pt2 package whose compiled library had a byte changed.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/api/module.h>

#include "accelkit/model_file.hpp"
#include "accelkit/sdk/torch_compat_aoti.hpp"
#include "cli_process.hpp"
#include "test_support.hpp"

#include "torch_doctest.hpp"

namespace model_damage_suite {

using namespace accelkit;
using namespace accelkit::test;

namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

struct Damaged {
  std::string path;
  std::string says;  // a phrase the refusal must hold
};

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(gen() & 0xFF);
  return s;
}

// A small TorchScript module saved by this LibTorch: Linear(16, 4) then ReLU, in TorchScript code.
std::string save_good(const std::string& path) {
  torch::jit::Module m("Small");
  m.register_parameter("w", at::randn({16, 4}), /*is_buffer=*/false);
  m.register_parameter("b", at::randn({4}), /*is_buffer=*/false);
  m.define(R"(
def forward(self, x):
    return torch.relu(torch.matmul(x, self.w) + self.b)
)");
  m.save(path);
  return path;
}

// `good` with the byte at `at` of record `record` flipped.
void flip_in_record(const std::string& good, const std::string& record, double at, const std::string& out) {
  caffe2::serialize::PyTorchStreamReader reader(good);
  const std::size_t offset = reader.getRecordOffset(record);
  const std::size_t size = std::get<1>(reader.getRecord(record));
  std::string bytes = bytes_of(good);
  bytes[offset + static_cast<std::size_t>(at * static_cast<double>(size - 1))] ^= static_cast<char>(0xA5);
  write_bytes(out, bytes);
}

std::string code_record(const std::string& good) {
  caffe2::serialize::PyTorchStreamReader reader(good);
  for (const auto& r : reader.getAllRecords())
    if (r.rfind("code/", 0) == 0 && r.size() > 3 && r.compare(r.size() - 3, 3, ".py") == 0) return r;
  return "";
}

std::vector<Damaged> make_corpus(const fs::path& dir) {
  auto p = [&](const char* name) { return (dir / name).string(); };
  const std::string good = save_good(p("good.pt"));
  const std::string bytes = bytes_of(good);
  std::vector<Damaged> c;
  write_bytes(p("empty.pt"), "");
  c.push_back({p("empty.pt"), "empty"});
  write_bytes(p("random.pt"), random_bytes(5000, 1));
  c.push_back({p("random.pt"), "not a zip archive"});
  for (std::size_t cut : {std::size_t{10}, std::size_t{100}, bytes.size() / 2, bytes.size() - 10}) {
    const std::string name = p(("cut-" + std::to_string(cut) + ".pt").c_str());
    write_bytes(name, bytes.substr(0, cut));
    c.push_back({name, "truncated"});
  }
  {
    caffe2::serialize::PyTorchStreamWriter w(p("garbage-zip.pt"));
    for (const char* r : {"code/__torch__.py", "data.pkl", "constants.pkl"}) {
      const std::string junk = random_bytes(300, static_cast<unsigned>(std::string(r).size()));
      w.writeRecord(r, junk.data(), junk.size());
    }
    w.writeEndOfFile();
    c.push_back({p("garbage-zip.pt"), "not a usable TorchScript file"});
  }
  flip_in_record(good, "data.pkl", 0.0, p("flip-pickle-head.pt"));
  c.push_back({p("flip-pickle-head.pt"), "a damaged record: data.pkl does not match its checksum"});
  flip_in_record(good, "data.pkl", 0.5, p("flip-pickle-middle.pt"));
  c.push_back({p("flip-pickle-middle.pt"), "a damaged record: data.pkl does not match its checksum"});
  const std::string code = code_record(good);
  REQUIRE_FALSE(code.empty());
  flip_in_record(good, code, 0.5, p("flip-code.pt"));
  c.push_back({p("flip-code.pt"), "a damaged record: " + code});
  fs::create_directory(p("directory.pt"));
  c.push_back({p("directory.pt"), "not a regular file (a directory)"});
  REQUIRE(::mkfifo(p("fifo.pt").c_str(), 0600) == 0);
  c.push_back({p("fifo.pt"), "not a regular file (a FIFO)"});
  {  // sparse: 1 GiB that takes no disk
    const int fd = ::open(p("sparse.pt").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, off_t{1} << 30) == 0);
    ::close(fd);
    c.push_back({p("sparse.pt"), "not a zip archive"});
    write_bytes(p("zip-head-sparse.pt"), bytes.substr(0, 200));
    REQUIRE(::truncate(p("zip-head-sparse.pt").c_str(), off_t{1} << 30) == 0);
    c.push_back({p("zip-head-sparse.pt"), "truncated"});
  }
  const char* fixtures = std::getenv("ACCELKIT_TEST_MODEL_FIXTURES");
  if (fixtures && fs::exists(std::string(fixtures) + "/mlp_export.pt2"))
    c.push_back({std::string(fixtures) + "/mlp_export.pt2", "a torch.export program"});
  return c;
}

// The rules every refusal keeps.
void check_line(const std::string& line, const Damaged& d) {
  INFO(line);
  CHECK(has(line, d.path));
  CHECK(has(line, d.says));
  CHECK_FALSE(has(line, "\n"));
  CHECK(line.size() <= 300 + d.path.size());
  for (const char* never : {"frame #", "Exception raised from", "checkpoint", "Could this error message", ".cpp:"})
    CHECK_FALSE(has(line, never));
}

const EnvOverrides& cli_env() {
  static const EnvOverrides env = {{"ACCELKIT_DEVICE", "cpu"}};
  return env;
}

// One line on stderr holding what `d` says, nothing on stdout, exit 2.
void check_cli(const std::vector<std::string>& args, const Damaged& d) {
  const RunResult r = run_cli(args, cli_env());
  INFO(describe(r));
  CHECK(r.code == 2);
  CHECK(r.out.empty());
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  std::string line = r.err.substr(0, r.err.find('\n'));
  line = line.substr(std::min(line.size(), line.find(d.path)));  // after the verb's "accelkit: bench: "
  check_line(line, d);
}

}  // namespace

TEST_CASE("damaged model files: the library's loaders refuse each in one line naming the file") {
  TempDir tmp("accelkit-model-damage");
  at::manual_seed(3);
  for (const auto& d : make_corpus(tmp.path())) {
    CAPTURE(d.path);
    std::string through_torchscript, through_model_file;
    try {
      load_torchscript(d.path);
    } catch (const ModelFileError& e) {
      through_torchscript = e.what();
    }
    try {
      load_model_file(d.path, c10::kCPU);
    } catch (const ModelFileError& e) {
      through_model_file = e.what();
    }
    REQUIRE_FALSE(through_torchscript.empty());
    REQUIRE_FALSE(through_model_file.empty());
    check_line(through_torchscript, d);
    check_line(through_model_file, d);
  }
}

TEST_CASE("a .pt2 package whose library changed after saving is refused before the library is loaded") {
  const char* fixtures = std::getenv("ACCELKIT_TEST_MODEL_FIXTURES");
  if (!accelkit::compat::AotiPackage::available || !fixtures || !fs::exists(std::string(fixtures) + "/mlp.pt2")) {
    MESSAGE("no .pt2 package here (LibTorch < 2.6, or no exported fixtures): skipped");
    return;
  }
  TempDir tmp("accelkit-model-damage-pt2");
  const std::string good = std::string(fixtures) + "/mlp.pt2";
  std::string library;
  {
    caffe2::serialize::PyTorchStreamReader reader(good);
    for (const auto& r : reader.getAllRecords())
      if (r.size() > 3 && r.compare(r.size() - 3, 3, ".so") == 0) library = r;
  }
  REQUIRE_FALSE(library.empty());
  // A byte in the middle of the library: it still loads as ELF, and would run changed code.
  const Damaged d{(tmp.path() / "changed-library.pt2").string(), "a damaged record: " + library.substr(0, 40)};
  flip_in_record(good, library, 0.5, d.path);
  std::string refused;
  try {
    load_model_file(d.path, c10::kCPU);
  } catch (const ModelFileError& e) {
    refused = e.what();
  }
  check_line(refused, d);
  check_cli({"bench", "--model", d.path, "--input", "8x16", "--steps", "1", "--warmup", "0"}, d);
  // The package it was made from loads and runs.
  CHECK(load_model_file(good, c10::kCPU)->run({at::randn({8, 16})}).size() == 1);
}

TEST_CASE("the undamaged file loads through the same loader and runs as the same ops") {
  TempDir tmp("accelkit-model-damage");
  at::manual_seed(4);
  const std::string good = save_good((tmp.path() / "good.pt").string());
  torch::jit::Module m = load_torchscript(good);
  const at::Tensor w = m.attr("w").toTensor(), b = m.attr("b").toTensor();
  for (int trial = 0; trial < 3; ++trial) {  // fresh random inputs
    const at::Tensor x = at::randn({5, 16});
    CHECK(at::allclose(m.forward({x}).toTensor(), at::relu(at::matmul(x, w) + b)));
  }
}

TEST_CASE("damaged model files: bench --model and report --model say it in one line, exit 2") {
  TempDir tmp("accelkit-model-damage-cli");
  at::manual_seed(5);
  const auto corpus = make_corpus(tmp.path());
  for (const auto& d : corpus) {
    CAPTURE(d.path);
    check_cli({"bench", "--model", d.path, "--input", "4x16", "--mode", "infer", "--steps", "1", "--warmup", "0"}, d);
    check_cli({"report", "--model", d.path}, d);
  }
  // Training loads the file through its own path (bench_models): the same refusals.
  for (const auto& d : corpus)
    if (has(d.path, "flip-code") || has(d.path, "cut-100.") || has(d.path, "fifo"))
      check_cli({"bench", "--model", d.path, "--input", "4x16", "--mode", "train", "--steps", "1", "--warmup", "0"}, d);
}

}  // namespace model_damage_suite
