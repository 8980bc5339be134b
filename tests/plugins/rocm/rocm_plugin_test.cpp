// libaccelkit-rocm.so through the core's loader (handshake, factory, probe) on the fixture
// trees, and the accelkit CLI with ACCELKIT_SYSFS_ROOT at the MI210 tree. LibTorch here is
// not a ROCm build, so the card is listed, monitored and its VRAM reported, never usable.
#include <doctest/doctest.h>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "accelkit/loader.hpp"
#include "accelkit/sdk/monitor.hpp"
#include "test_support.hpp"

extern char** environ;

using namespace accelkit;
using accelkit::test::contains;
using accelkit::test::ScopedEnv;
using accelkit::test::TempDir;
namespace fs = std::filesystem;

namespace {

std::string fixture(const char* name) { return std::string(ACCELKIT_TEST_FIXTURES) + "/rocm/" + name + "/sys"; }

// The built plugins, copied to a private directory when the build tree is group/other
// writable (the loader would refuse them, and this suite is not about the umask).
const std::string& plugin_dir() {
  static TempDir copy("accelkit-rocm-plugins");
  static const std::string dir = [] {
    const fs::path built = fs::path(ACCELKIT_ROCM_PLUGIN_PATH).parent_path();
    if (insecure_path_reason(built.string()).empty()) return built.string();
    const fs::path to = copy.path() / "plugins";
    fs::create_directories(to);
    accelkit::test::set_mode(to, 0755);
    for (const char* so : {ACCELKIT_ROCM_PLUGIN_PATH, ACCELKIT_CPU_PLUGIN_PATH}) {
      const fs::path dst = to / fs::path(so).filename();
      fs::copy_file(so, dst);
      accelkit::test::set_mode(dst, 0644);
    }
    return to.string();
  }();
  return dir;
}

std::string rocm_plugin() { return plugin_dir() + "/libaccelkit-rocm.so"; }

struct Run {
  int code = -1;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The CLI with this environment minus ACCELKIT_*, plus the plugin directory and `sysfs`.
Run run_cli(const std::vector<std::string>& args, const std::string& sysfs) {
  TempDir tmp("accelkit-rocm-cli");
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    if (std::strncmp(*e, "ACCELKIT_", 9) != 0) env.emplace_back(*e);
  env.push_back("ACCELKIT_PLUGIN_PATH=" + plugin_dir());
  env.push_back("ACCELKIT_SYSFS_ROOT=" + sysfs);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_s{ACCELKIT_CLI_PATH};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string out = (tmp.path() / "out").string(), err = (tmp.path() / "err").string();
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, ACCELKIT_CLI_PATH, &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  REQUIRE_MESSAGE(rc == 0, "posix_spawn: " << std::strerror(rc));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  Run r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

// A fixture file's byte count, as the test reads it (not through the plugin's reader).
std::uint64_t fixture_bytes(const fs::path& path) {
  std::ifstream in(path);
  std::uint64_t v = 0;
  REQUIRE_MESSAGE(static_cast<bool>(in >> v), "cannot read " << path.string());
  return v;
}

std::string describe(const Run& r) { return "exit " + std::to_string(r.code) + "\n--- stdout\n" + r.out + "--- stderr\n" + r.err; }

}  // namespace

TEST_CASE("the loader loads libaccelkit-rocm.so; on the MI210 tree it lists the card, scores 0, says why") {
  ScopedEnv sysfs("ACCELKIT_SYSFS_ROOT", fixture("mi210"));
  PluginRecord rec = load_plugin_file(rocm_plugin());
  CHECK(rec.name == "rocm");
  REQUIRE_MESSAGE(rec.plugin, rec.reason);
  CHECK(rec.status == PluginStatus::unavailable);
  CHECK(contains(rec.reason, "LibTorch here is not a ROCm build"));
  REQUIRE(rec.probe);
  CHECK(rec.probe->score == 0);
  REQUIRE(rec.probe->devices.size() == 1);
  const DeviceInfo& d = rec.probe->devices[0];
  CHECK(d.id == "rocm:0");
  CHECK(d.name == "AMD Instinct MI210");
  CHECK(d.torch_device.empty());
  CHECK(d.capabilities.has(Capability::bf16));

  // Opened anyway, the card monitors; it refuses to plan precision.
  auto dev = rec.plugin->open(0);
  REQUIRE_MESSAGE(dev.ok(), dev.status().message());
  auto precision = dev.value()->precision();
  REQUIRE_FALSE(precision.ok());
  CHECK(contains(precision.status().message(), "not a ROCm build"));
  auto monitor = dev.value()->monitor();
  REQUIRE(monitor.ok());
  auto readings = monitor.value()->sample();
  REQUIRE(readings.ok());
  bool saw_power = false;
  for (const auto& r : readings.value())
    if (r.key == reading::power_w) saw_power = r.value && *r.value > 42.9 && *r.value < 43.1;
  CHECK(saw_power);
  CHECK_FALSE(rec.plugin->open(1).ok());
}

TEST_CASE("memory(): the card's VRAM equal to the fixture files; no allocator peak to reset or cache to empty") {
  for (auto [tree, card] : {std::pair{"rdna1", "card0"}, std::pair{"mi210", "card0"}, std::pair{"rdna3", "card1"}}) {
    CAPTURE(tree);
    ScopedEnv sysfs("ACCELKIT_SYSFS_ROOT", fixture(tree));
    const fs::path dir = fs::path(fixture(tree)) / "class/drm" / card / "device";
    const std::uint64_t total = fixture_bytes(dir / "mem_info_vram_total");
    const std::uint64_t used = fixture_bytes(dir / "mem_info_vram_used");
    PluginRecord rec = load_plugin_file(rocm_plugin());
    REQUIRE_MESSAGE(rec.plugin, rec.reason);
    REQUIRE(rec.probe);
    REQUIRE(rec.probe->devices.size() == 1);
    CHECK(rec.probe->devices[0].capabilities.has(Capability::memory_stats));
    auto dev = rec.plugin->open(0);
    REQUIRE_MESSAGE(dev.ok(), dev.status().message());

    auto m = dev.value()->memory();
    REQUIRE_MESSAGE(m.ok(), m.status().message());
    CHECK(m.value().total == total);
    CHECK(m.value().available == total - used);
    CHECK_FALSE(m.value().in_use);
    CHECK_FALSE(m.value().peak);
    CHECK_FALSE(m.value().reserved);
    CHECK_MESSAGE(contains(m.value().source, "mem_info_vram_total"), m.value().source);
    CHECK(contains(m.value().source, "no allocator figures: LibTorch here is not a ROCm build"));

    const Status reset = dev.value()->reset_peak_memory();
    CHECK(reset.code() == StatusCode::not_supported);
    CHECK(contains(reset.message(), "rocm:0: LibTorch here is not a ROCm build"));
    CHECK(contains(reset.message(), "no allocator peak"));
    const Status empty = dev.value()->empty_cache();
    CHECK(empty.code() == StatusCode::not_supported);
    CHECK(contains(empty.message(), "LibTorch here is not a ROCm build"));
    CHECK(contains(empty.message(), "no allocator cache"));
  }
}

TEST_CASE("memory() without mem_info_vram_used: unavailable and why; memory_stats not claimed") {
  TempDir copy("accelkit-rocm-tree");
  const fs::path tree = copy.path() / "sys";
  fs::copy(fixture("mi210"), tree, fs::copy_options::recursive);
  const fs::path used = tree / "class/drm/card0/device/mem_info_vram_used";
  REQUIRE(fs::remove(used));
  ScopedEnv sysfs("ACCELKIT_SYSFS_ROOT", tree.string());
  PluginRecord rec = load_plugin_file(rocm_plugin());
  REQUIRE_MESSAGE(rec.plugin, rec.reason);
  REQUIRE(rec.probe);
  REQUIRE(rec.probe->devices.size() == 1);
  CHECK_FALSE(rec.probe->devices[0].capabilities.has(Capability::memory_stats));
  auto dev = rec.plugin->open(0);
  REQUIRE_MESSAGE(dev.ok(), dev.status().message());
  auto m = dev.value()->memory();
  REQUIRE_FALSE(m.ok());
  CHECK(m.status().code() == StatusCode::unavailable);
  CHECK_MESSAGE(contains(m.status().message(), "cannot read " + used.string()), m.status().message());
  CHECK(contains(m.status().message(), "LibTorch here is not a ROCm build"));
}

TEST_CASE("the loader on the other trees: RDNA1 and RDNA3 listed, no AMD card -> no device") {
  for (const char* tree : {"rdna1", "rdna3"}) {
    ScopedEnv sysfs("ACCELKIT_SYSFS_ROOT", fixture(tree));
    PluginRecord rec = load_plugin_file(rocm_plugin());
    CAPTURE(tree);
    REQUIRE(rec.probe);
    CHECK(rec.probe->score == 0);
    CHECK(rec.probe->devices.size() == 1);
    CHECK(contains(rec.reason, "LibTorch here is not a ROCm build"));
  }
  ScopedEnv sysfs("ACCELKIT_SYSFS_ROOT", fixture("no_amd"));
  PluginRecord rec = load_plugin_file(rocm_plugin());
  REQUIRE(rec.probe);
  CHECK(rec.probe->devices.empty());
  CHECK(contains(rec.reason, "no AMD GPU"));
}

TEST_CASE("CLI on the MI210 tree: info and plugins list the card and why; report runs on the CPU") {
  const std::string mi210 = fixture("mi210");
  Run info = run_cli({"info"}, mi210);
  REQUIRE_MESSAGE(info.code == 0, describe(info));
  CHECK_MESSAGE(contains(info.out, "rocm:0  AMD Instinct MI210"), describe(info));
  CHECK(contains(info.out, "LibTorch here is not a ROCm build"));
  CHECK(contains(info.out, "Selected: cpu:0"));
  CHECK(contains(info.out, "gfx=gfx90a"));

  Run plugins = run_cli({"plugins", "-v"}, mi210);
  REQUIRE_MESSAGE(plugins.code == 0, describe(plugins));
  CHECK(contains(plugins.out, "rocm"));
  CHECK(contains(plugins.out, "unavailable"));
  CHECK(contains(plugins.out, "LibTorch here is not a ROCm build"));
  CHECK(contains(plugins.out, "device rocm:0: AMD Instinct MI210"));

  Run report = run_cli({"report"}, mi210);
  REQUIRE_MESSAGE(report.code == 0, describe(report));
  CHECK(contains(report.out, "rocm:0"));
  CHECK(contains(report.out, "LibTorch here is not a ROCm build"));
}

TEST_CASE("CLI: --device rocm on the MI210 tree exits 3 and says why") {
  Run r = run_cli({"info", "--device", "rocm"}, fixture("mi210"));
  CHECK_MESSAGE(r.code == 3, describe(r));
  CHECK(contains(r.err, "requested device unavailable"));
  CHECK(contains(r.err, "rocm:0"));
  CHECK(contains(r.err, "LibTorch here is not a ROCm build"));
  Run report = run_cli({"report", "--device", "rocm:0"}, fixture("mi210"));
  CHECK_MESSAGE(report.code == 3, describe(report));
}

TEST_CASE("CLI report: each route and its reason; a bad [routing] table exits 2 naming file:line") {
  const std::string routing = std::string(ACCELKIT_TEST_FIXTURES) + "/routing";
  Run r = run_cli({"report", "--config", routing + "/fft_cpu.toml"}, fixture("no_amd"));
  REQUIRE_MESSAGE(r.code == 0, describe(r));
  CHECK(contains(r.out, "Operation routing (device cpu:0)"));
  CHECK_MESSAGE(contains(r.out, "routing.fft = \"cpu\""), describe(r));
  CHECK(contains(r.out, "fft_cpu.toml:4:1"));
  Run bad = run_cli({"report", "--config", routing + "/unknown_op.toml"}, fixture("no_amd"));
  CHECK_MESSAGE(bad.code == 2, describe(bad));
  CHECK(contains(bad.err, "unknown_op.toml:2:1"));
  CHECK(contains(bad.err, "did you mean 'fft'?"));
}
