// accelkit report --model FILE: the model's dimension alignment for the plan's dtype, in text
// and JSON; a file that is missing or not TorchScript is one line on stderr and exit 2, before
// anything else is printed.
#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include "cli_process.hpp"
#include "script_models.hpp"
#include "test_support.hpp"

#include "torch_doctest.hpp"

namespace report_model_suite {

using namespace accelkit::test;
using nlohmann::json;

TEST_CASE("report --model: misaligned sizes for the plan's dtype; a bad file is one line, exit 2") {
  TempDir tmp("accelkit-report-model");
  const std::string model = (tmp.path() / "stack.pt").string();
  script_linear_stack(100, 2, 7).save(model);
  const EnvOverrides env = {{"ACCELKIT_PLUGIN_PATH", cpu_plugin_dir()}};

  RunResult r = run_cli({"report", "--model", model, "--json"}, env);
  REQUIRE_MESSAGE(r.code == 0, describe(r));
  const json j = json::parse(r.out);
  const json& a = j["alignment"];
  CHECK(a["model"] == model);
  CHECK(a["dtype"] == j["precision"]["plan"]["dtype"]);
  const int multiple = a["multiple"].get<int>();
  CHECK(multiple >= 4);  // the CPU plugin's vector width in elements
  CHECK(a["layers"] == 2);
  CHECK(a["issues"].size() == (100 % multiple ? 4u : 0u));
  for (const auto& i : a["issues"]) {
    CHECK(i["size"] == 100);
    CHECK(i["padded"].get<int>() % multiple == 0);
    CHECK(i["padded"].get<int>() - 100 < multiple);
  }

  r = run_cli({"report", "--model", model}, env);
  REQUIRE_MESSAGE(r.code == 0, describe(r));
  CHECK(r.out.find("Dimension alignment of " + model) != std::string::npos);

  r = run_cli({"report", "--model", model, "--measure", "--json"}, env);
  REQUIRE_MESSAGE(r.code == 0, describe(r));
  for (const auto& i : json::parse(r.out)["alignment"]["issues"]) {
    CHECK(i["ms"].get<double>() > 0);
    CHECK(i["padded_ms"].get<double>() > 0);
  }
  r = run_cli({"report", "--measure"}, env);
  CHECK(r.code == 2);
  CHECK(r.err.find("--measure needs --model FILE") != std::string::npos);

  // A CNN: its convolutions are timed on the shapes --input gives, and left untimed (said so)
  // without it.
  const std::string cnn = (tmp.path() / "cnn.pt").string();
  script_cnn(5).save(cnn);
  r = run_cli({"report", "--model", cnn, "--measure", "--input", "4x3x32x32", "--json"}, env);
  REQUIRE_MESSAGE(r.code == 0, describe(r));
  json a2 = json::parse(r.out)["alignment"];
  REQUIRE(!a2["issues"].empty());
  CHECK(a2["issues"][0]["op"] == "conv");
  CHECK(a2["issues"][0]["size"] == 3);
  CHECK(a2["issues"][0]["timed_on"] == "4x3x32x32");
  CHECK(a2["issues"][0]["ms"].get<double>() > 0);
  CHECK(a2["not_timed"].empty());
  r = run_cli({"report", "--model", cnn, "--measure", "--json"}, env);
  REQUIRE_MESSAGE(r.code == 0, describe(r));
  a2 = json::parse(r.out)["alignment"];
  CHECK(a2["issues"][0]["ms"].is_null());
  REQUIRE(a2["not_timed"].size() == 1);
  CHECK(a2["not_timed"][0].get<std::string>().find("--input") != std::string::npos);
  r = run_cli({"report", "--model", cnn, "--measure", "--input", "4x5x32x32"}, env);
  CHECK(r.code == 2);
  CHECK(r.err.find("rejected the example inputs") != std::string::npos);
  r = run_cli({"report", "--model", cnn, "--measure", "--input", "4xfoo"}, env);
  CHECK(r.code == 2);
  CHECK(r.err.find("--input '4xfoo'") != std::string::npos);
  r = run_cli({"report", "--model", cnn, "--input", "4x3x32x32"}, env);
  CHECK(r.code == 2);
  CHECK(r.err.find("needs --model FILE --measure") != std::string::npos);
  r = run_cli({"train", "--input", "4x3x32x32"}, env);
  CHECK(r.code == 2);
  CHECK(r.err.find("--input is an option of 'bench' and 'report'") != std::string::npos);

  for (const std::string& bad : {(tmp.path() / "missing.pt").string(), std::string("/etc/hostname")}) {
    CAPTURE(bad);
    r = run_cli({"report", "--model", bad}, env);
    CHECK(r.code == 2);
    CHECK(r.out.empty());
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK(r.err.find("--model " + bad) != std::string::npos);
  }
  r = run_cli({"info", "--model", model}, env);
  CHECK(r.code == 2);
  CHECK(r.err.find("--model is an option of 'bench' and 'report'") != std::string::npos);
}

}  // namespace report_model_suite
