// accelkit bench and report --model with a .pt2 AOTInductor package, through the CLI. On
// LibTorch >= 2.6 with the packages exported at test time (tests/fixtures/models/export_models.py):
// bench times LibTorch's own loader against accelkit's load_model (outputs compared, timings in
// text and JSON), says what does not apply to a package, refuses training, inputs of another
// shape, a torch.export archive and a package for another device in one line (exit 2); report
// says whether the package loads here. Before 2.6: every .pt2 path is one line, "needs LibTorch
// >= 2.6", exit 2.
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <caffe2/serialize/inline_container.h>
#include <nlohmann/json.hpp>

#include "accelkit/sdk/torch_compat_aoti.hpp"
#include "cli_process.hpp"
#include "test_support.hpp"

#include "torch_doctest.hpp"

namespace bench_pt2_suite {

using namespace accelkit::test;
using nlohmann::json;

namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// One line on stderr, nothing on stdout, exit 2.
void check_refused(const RunResult& r, const std::string& why) {
  INFO(describe(r));
  CHECK(r.code == 2);
  CHECK(r.out.empty());
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(has(r.err, why));
}

// A .pt2-shaped archive with the metadata of a package compiled for `device` (no library).
void write_fake_pt2(const std::string& path, const std::string& device) {
  caffe2::serialize::PyTorchStreamWriter w(path);
  const std::string fmt = "pt2";
  const std::string meta = R"({"AOTI_DEVICE_KEY": ")" + device + R"("})";
  w.writeRecord("archive_format", fmt.data(), fmt.size());
  w.writeRecord("data/aotinductor/model/abc.wrapper_metadata.json", meta.data(), meta.size());
  w.writeEndOfFile();
}

std::string fixtures_dir() {
  const char* dir = std::getenv("ACCELKIT_TEST_MODEL_FIXTURES");
  return dir ? dir : "";
}

const EnvOverrides& cli_env() {
  static const EnvOverrides env = {{"ACCELKIT_PLUGIN_PATH", cpu_plugin_dir()}, {"ACCELKIT_DEVICE", "cpu"}};
  return env;
}

std::vector<std::string> bench_args(const std::string& model, const std::string& input,
                                    std::vector<std::string> more = {}) {
  std::vector<std::string> args = {"bench", "--model", model, "--input", input, "--steps", "3", "--warmup", "1"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

}  // namespace

TEST_CASE("a .pt2 package on LibTorch < 2.6: bench and report refuse it in one line") {
  if (accelkit::compat::AotiPackage::available) return;  // the next cases run packages
  TempDir tmp("accelkit-bench-pt2-old");
  const std::string pt2 = (tmp.path() / "model.pt2").string();
  write_fake_pt2(pt2, "cpu");
  check_refused(run_cli(bench_args(pt2, "8x16"), cli_env()), "needs LibTorch >= 2.6");
  check_refused(run_cli(bench_args(pt2, "8x16", {"--mode", "train"}), cli_env()), "needs LibTorch >= 2.6");
  check_refused(run_cli({"report", "--model", pt2}, cli_env()), "needs LibTorch >= 2.6");
}

TEST_CASE("bench --model x.pt2: LibTorch's loader against accelkit's load_model, outputs checked, then timed") {
  if (!accelkit::compat::AotiPackage::available) return;
  const std::string dir = fixtures_dir();
  if (dir.empty() || !fs::exists(dir + "/mlp.pt2")) {
    MESSAGE("no exported .pt2 fixtures (no Python with this LibTorch's torch at configure time): skipped");
    return;
  }
  const std::string mlp = dir + "/mlp.pt2";  // Linear(16, 32), ReLU, Linear(32, 4), compiled for 8 x 16

  RunResult r = run_cli(bench_args(mlp, "8x16", {"--json"}), cli_env());
  REQUIRE_MESSAGE(r.code == 0, describe(r));
  const json j = json::parse(r.out);
  CHECK(j["mode"] == "infer");
  // The constants the package holds: the weights at least (inductor may write a tiny bias into its code).
  CHECK(j["params"].get<int>() >= 16 * 32 + 32 * 4);
  CHECK(j["params"].get<int>() <= 16 * 32 + 32 + 32 * 4 + 4);
  CHECK(has(j["shape"].get<std::string>(), ".pt2 package 'model' (cpu"));
  CHECK(has(j["baseline"]["description"].get<std::string>(), "AOTIModelPackageLoader"));
  CHECK(has(j["accelkit"]["description"].get<std::string>(), "load_model"));
  for (const char* v : {"baseline", "accelkit"}) {
    CAPTURE(v);
    CHECK(j[v]["samples_ms"].size() == 3);
    for (const auto& ms : j[v]["samples_ms"]) CHECK(ms.get<double>() > 0);
    CHECK(j[v]["threads"].get<int>() > 0);
  }
  CHECK(j["speedup"].get<double>() ==
        doctest::Approx(j["baseline"]["median_ms"].get<double>() / j["accelkit"]["median_ms"].get<double>()));
  CHECK(j["accuracy"]["compared"] == "outputs");
  CHECK(j["accuracy"]["ok"] == true);
  CHECK(j["accuracy"]["rel_diff"].get<double>() <= j["accuracy"]["tolerance"].get<double>());
  CHECK(j["accuracy"]["cosine"].get<double>() >= 0.9999);
  CHECK(j["not_timed"].empty());
  CHECK(j["inference"].is_null());

  // What cannot apply to a package is said, not timed; the tuned variant is the loader on all cores.
  r = run_cli(bench_args(mlp, "8x16", {"--vs-tuned", "--quantize", "int8"}), cli_env());
  REQUIRE_MESSAGE(r.code == 0, describe(r));
  CHECK(has(r.out, "not timed: int8 (--quantize int8)"));
  CHECK(has(r.out, "not timed: tuned: freezing and channels-last"));
  CHECK(has(r.out, "  tuned "));
  CHECK_FALSE(has(r.out, "  int8 "));
  CHECK(has(r.out, "accuracy: outputs on the same inputs"));
  CHECK(has(r.out, "accelkit is "));
}

TEST_CASE("bench --model x.pt2: training, other shapes, a torch.export archive, another device: one line, exit 2") {
  if (!accelkit::compat::AotiPackage::available) return;
  const std::string dir = fixtures_dir();
  if (dir.empty() || !fs::exists(dir + "/mlp.pt2")) {
    MESSAGE("no exported .pt2 fixtures: skipped");
    return;
  }
  const std::string mlp = dir + "/mlp.pt2";
  check_refused(run_cli(bench_args(mlp, "8x16", {"--mode", "train"}), cli_env()), "it has no backward");
  // AOTInductor's own input check (model_file.hpp turns it on): never a run out of bounds.
  check_refused(run_cli(bench_args(mlp, "8x15"), cli_env()), "refuses --input 8x15");
  check_refused(run_cli(bench_args(mlp, "4x16"), cli_env()), "expected: 8, but got: 4");
  check_refused(run_cli(bench_args(dir + "/mlp_export.pt2", "8x16"), cli_env()),
                "a torch.export program (torch.export.save), not an AOTInductor package");
  TempDir tmp("accelkit-bench-pt2");
  const std::string cuda = (tmp.path() / "cuda.pt2").string();
  write_fake_pt2(cuda, "cuda");
  check_refused(run_cli(bench_args(cuda, "8x16"), cli_env()), "compiled for cuda");
}

TEST_CASE("report --model x.pt2: what the package is and that it loads here") {
  if (!accelkit::compat::AotiPackage::available) return;
  const std::string dir = fixtures_dir();
  if (dir.empty() || !fs::exists(dir + "/cnn.pt2")) {
    MESSAGE("no exported .pt2 fixtures: skipped");
    return;
  }
  const std::string cnn = dir + "/cnn.pt2";
  RunResult r = run_cli({"report", "--model", cnn, "--json"}, cli_env());
  REQUIRE_MESSAGE(r.code == 0, describe(r));
  const json m = json::parse(r.out)["model_file"];
  CHECK(m["format"] == "pt2");
  CHECK(m["device"] == "cpu");
  CHECK(m["loads_on"] == "cpu");
  CHECK(m["models"] == json::array({"model"}));
  CHECK(m["torch_version"].get<std::string>().substr(0, 2) == "2.");
  r = run_cli({"report", "--model", cnn}, cli_env());
  REQUIRE_MESSAGE(r.code == 0, describe(r));
  CHECK(has(r.out, "Model file " + cnn));
  CHECK(has(r.out, "loads here"));
  check_refused(run_cli({"report", "--model", cnn, "--measure"}, cli_env()), "a .pt2 package's are compiled");
  check_refused(run_cli({"report", "--model", dir + "/mlp_export.pt2"}, cli_env()),
                "a torch.export program (torch.export.save), not an AOTInductor package");
  TempDir tmp("accelkit-report-pt2");
  const std::string cuda = (tmp.path() / "cuda.pt2").string();
  write_fake_pt2(cuda, "cuda");
  check_refused(run_cli({"report", "--model", cuda, "--json"}, cli_env()), "compiled for cuda");
}

}  // namespace bench_pt2_suite
