// The thermal and power guard (guard.hpp): its policies on a scripted monitor (warn once per
// crossing, pause until cooled by the hysteresis, stop; the device's own threshold; throttling
// and power events; implausible readings never acted on), and during real training through the
// CPU plugin's monitor on a fixture sysfs tree whose temperature file the test rewrites while
// the trainer runs: warn, pause-and-resume and stop-with-checkpoint each happen with the step
// count and the losses of an unguarded run intact.
#include <torch/torch.h>

#include "torch_doctest.hpp"

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include <accelkit/guard.hpp>
#include <accelkit/runtime.hpp>
#include <accelkit/train.hpp>

#include "test_support.hpp"

using namespace accelkit;
using namespace std::chrono_literals;

namespace {

// Readings the test sets; sample() returns them.
class ScriptedMonitor final : public Monitor {
 public:
  Result<std::vector<Reading>> sample() noexcept override {
    std::lock_guard<std::mutex> lock(mutex_);
    ++samples_;
    return readings_;
  }
  void set(const char* key, std::optional<double> value, const char* unit, std::string note = {}) {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& r : readings_)
      if (r.key == key) {
        r.value = value;
        r.note = std::move(note);
        return;
      }
    readings_.push_back(Reading{key, value, unit, "script", std::move(note)});
  }
  int samples() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return samples_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<Reading> readings_;
  int samples_ = 0;
};

GuardOptions options(GuardPolicy policy, std::optional<double> threshold = 80) {
  GuardOptions o;
  o.interval_s = 0.01;
  o.policy = policy;
  o.temperature_c = threshold;
  o.hysteresis_c = 5;
  return o;
}

// Waits until the guard has sampled what the monitor says now.
void settle(const Guard& guard) {
  const auto seen = guard.latest().sequence;
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (guard.latest().sequence < seen + 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(2ms);
}

std::vector<std::string> kinds(const Guard& guard) {
  std::vector<std::string> out;
  for (const auto& e : guard.events()) out.push_back(e.kind);
  return out;
}

}  // namespace

TEST_CASE("guard warn: one event per crossing of the threshold, re-armed below threshold - hysteresis") {
  auto monitor = std::make_shared<ScriptedMonitor>();
  monitor->set(reading::temperature_c, 60, "C");
  Guard guard(monitor, options(GuardPolicy::warn), "scripted:0");
  CHECK(guard.enabled());
  CHECK(guard.temperature_threshold() == 80);
  CHECK(guard.describe().find("warn at 80.0 C (guard_temperature)") != std::string::npos);
  CHECK(guard.check(1) == GuardAction::proceed);
  CHECK(guard.events().empty());
  monitor->set(reading::temperature_c, 85, "C");
  settle(guard);
  CHECK(guard.check(2) == GuardAction::proceed);
  CHECK(guard.check(3) == GuardAction::proceed);  // still over: no second event
  REQUIRE(kinds(guard) == std::vector<std::string>{"warn"});
  CHECK(guard.events()[0].step == 2);
  CHECK(guard.events()[0].value == 85);
  CHECK(guard.events()[0].threshold == 80);
  monitor->set(reading::temperature_c, 77, "C");  // below the threshold, not below 75: not re-armed
  settle(guard);
  guard.check(4);
  monitor->set(reading::temperature_c, 81, "C");
  settle(guard);
  guard.check(5);
  CHECK(kinds(guard).size() == 1);
  monitor->set(reading::temperature_c, 70, "C");  // cooled: re-armed
  settle(guard);
  guard.check(6);
  monitor->set(reading::temperature_c, 90, "C");
  settle(guard);
  guard.check(7);
  CHECK(kinds(guard) == std::vector<std::string>{"warn", "warn"});
}

TEST_CASE("guard pause: check() blocks until the device is below threshold - hysteresis, then resumes") {
  auto monitor = std::make_shared<ScriptedMonitor>();
  monitor->set(reading::temperature_c, 90, "C");
  Guard guard(monitor, options(GuardPolicy::pause), "scripted:0");
  std::thread cooler([&] {
    std::this_thread::sleep_for(150ms);
    monitor->set(reading::temperature_c, 78, "C");  // under the threshold, above 75: still paused
    std::this_thread::sleep_for(150ms);
    monitor->set(reading::temperature_c, 60, "C");
  });
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(guard.check(12) == GuardAction::proceed);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  cooler.join();
  CHECK(waited >= 0.29);
  REQUIRE(kinds(guard) == std::vector<std::string>{"pause", "resume"});
  const GuardEvent resume = guard.events()[1];
  CHECK(resume.step == 12);
  CHECK(resume.value == 60);
  CHECK(resume.paused_s >= 0.29);
  CHECK(resume.text.find("cooled") != std::string::npos);
}

TEST_CASE("guard pause: the interrupt flag (Ctrl-C) ends a pause at once") {
  auto monitor = std::make_shared<ScriptedMonitor>();
  monitor->set(reading::temperature_c, 95, "C");
  Guard guard(monitor, options(GuardPolicy::pause), "scripted:0");
  std::atomic<bool> interrupt{false};
  std::thread ctrl_c([&] {
    std::this_thread::sleep_for(100ms);
    interrupt = true;
  });
  CHECK(guard.check(3, &interrupt) == GuardAction::proceed);
  ctrl_c.join();
  REQUIRE(kinds(guard) == std::vector<std::string>{"pause", "resume"});
  CHECK(guard.events()[1].text.find("interrupted") != std::string::npos);
}

TEST_CASE("guard stop: check() says stop at the threshold") {
  auto monitor = std::make_shared<ScriptedMonitor>();
  monitor->set(reading::temperature_c, 70, "C");
  Guard guard(monitor, options(GuardPolicy::stop), "scripted:0");
  CHECK(guard.check(1) == GuardAction::proceed);
  monitor->set(reading::temperature_c, 80, "C");  // at the threshold counts
  settle(guard);
  CHECK(guard.check(2) == GuardAction::stop);
  CHECK(kinds(guard) == std::vector<std::string>{"stop"});
}

TEST_CASE("guard: the device's own slowdown temperature is the threshold when none is set; none at all is said") {
  auto monitor = std::make_shared<ScriptedMonitor>();
  monitor->set(reading::temperature_c, 50, "C");
  monitor->set(reading::temperature_limit_c, 87, "C");
  Guard own(monitor, options(GuardPolicy::warn, std::nullopt), "scripted:0");
  CHECK(own.temperature_threshold() == 87);
  CHECK(own.describe().find("87.0 C (script)") != std::string::npos);

  auto bare = std::make_shared<ScriptedMonitor>();
  bare->set(reading::temperature_c, 99, "C");
  Guard none(bare, options(GuardPolicy::stop, std::nullopt), "scripted:0");
  CHECK_FALSE(none.temperature_threshold());
  CHECK(none.describe().find("no temperature threshold") != std::string::npos);
  CHECK(none.check(1) == GuardAction::proceed);  // nothing to compare with: never acts
}

TEST_CASE("guard: implausible readings are reported once and never acted on; throttling and power are events") {
  auto monitor = std::make_shared<ScriptedMonitor>();
  monitor->set(reading::temperature_c, 1e7, "C");  // a broken sensor, far above any threshold
  monitor->set(reading::power_w, -20, "W");        // a wrapped counter
  Guard guard(monitor, options(GuardPolicy::stop), "scripted:0");
  CHECK_FALSE(guard.latest().temperature_c);
  CHECK(guard.check(1) == GuardAction::proceed);
  CHECK(guard.check(2) == GuardAction::proceed);
  REQUIRE(kinds(guard) == std::vector<std::string>{"sensor", "sensor"});  // once per sensor
  CHECK(guard.events()[0].text.find("implausible") != std::string::npos);
  monitor->set(reading::temperature_c, -300, "C");  // below absolute zero
  settle(guard);
  CHECK(guard.check(3) == GuardAction::proceed);

  GuardOptions o = options(GuardPolicy::warn);
  o.power_w = 250;
  auto gpu = std::make_shared<ScriptedMonitor>();
  gpu->set(reading::temperature_c, 60, "C");
  gpu->set(reading::power_w, 200, "W");
  gpu->set(reading::throttled, 0, "bool");
  Guard watch(gpu, o, "scripted:1");
  watch.check(1);
  CHECK(watch.events().empty());
  gpu->set(reading::throttled, 1, "bool", "sw_power_cap,hw_thermal_slowdown");
  gpu->set(reading::power_w, 300, "W");
  settle(watch);
  CHECK(watch.check(2) == GuardAction::proceed);
  watch.check(3);
  REQUIRE(kinds(watch) == std::vector<std::string>{"throttle", "power"});
  CHECK(watch.events()[0].text.find("hw_thermal_slowdown") != std::string::npos);
  CHECK(watch.events()[1].value == 300);
}

TEST_CASE("guard off: a disabled guard says why and always proceeds") {
  Guard off("guard_interval is 0 (built-in)");
  CHECK_FALSE(off.enabled());
  CHECK(off.describe() == "thermal guard off: guard_interval is 0 (built-in)");
  CHECK(off.check(1) == GuardAction::proceed);
}

// ---- during training, through the CPU plugin's monitor on a fixture sysfs tree -------------

namespace {

// /sys with one k10temp hwmon chip whose Tctl the test rewrites.
struct HotSysfs {
  test::TempDir root{"accelkit-guard-sysfs"};
  std::string input;
  HotSysfs() {
    const auto dir = root.path() / "class" / "hwmon" / "hwmon0";
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "name") << "k10temp\n";
    std::ofstream(dir / "temp1_label") << "Tctl\n";
    input = (dir / "temp1_input").string();
    set(45);
  }
  void set(double celsius) const {
    const std::string tmp = input + ".tmp";
    std::ofstream(tmp) << static_cast<long long>(celsius * 1000) << "\n";
    std::filesystem::rename(tmp, input);  // never a half-written file
  }
};

std::unique_ptr<Runtime> guarded_runtime(const char* policy) {
  ::setenv("ACCELKIT_PLUGIN_PATH", ACCELKIT_PLUGIN_OUTPUT_DIR, 1);
  ContextOptions co;
  co.settings.cli = {{"device", "cpu"},          {"precision", "fp32"},      {"threads", "1"},
                     {"guard_interval", "0.02"}, {"guard_policy", policy},   {"guard_temperature", "80"},
                     {"guard_hysteresis", "10"}};
  return Runtime::start(co);
}

TrainConfig small_config(const std::string& dir) {
  TrainConfig c;
  c.steps = 30;
  c.batch_size = 16;
  c.width = 32;
  c.depth = 2;
  c.outputs = 4;
  c.log_every = 5;
  c.checkpoint_dir = dir;
  c.checkpoint_every = 0;
  return c;
}

// The losses of the same run without a guard.
std::vector<double> reference_losses() {
  test::TempDir dir("accelkit-guard-ref");
  auto rt = guarded_runtime("warn");
  Trainer trainer(*rt, small_config((dir.path() / "run").string()));
  return trainer.run().losses;
}

}  // namespace

TEST_CASE("guard during training: warn, pause-and-resume and stop-with-checkpoint on a fixture sensor") {
  HotSysfs sysfs;
  test::ScopedEnv root("ACCELKIT_SYSFS_ROOT", sysfs.root.path().string());
  const std::vector<double> reference = reference_losses();
  REQUIRE(reference.size() == 30);

  SUBCASE("warn: an event at the step the sensor crossed, the run goes on") {
    test::TempDir dir("accelkit-guard-warn");
    auto rt = guarded_runtime("warn");
    auto guard = accelkit::make_guard(*rt);
    REQUIRE(guard->enabled());
    CHECK(guard->temperature_threshold() == 80);
    Trainer trainer(*rt, small_config((dir.path() / "run").string()));
    TrainOptions o;
    o.guard = guard.get();
    std::vector<std::string> step_events;
    o.on_step = [&](const TrainProgress& p) {
      if (p.step == 10) {
        sysfs.set(92);
        settle(*guard);
      }
      for (const auto& e : p.guard_events) step_events.push_back(e.kind);
    };
    const TrainResult r = trainer.run(o);
    CHECK(r.end_step == 30);
    CHECK_FALSE(r.interrupted);
    CHECK(r.losses == reference);
    CHECK(kinds(*guard) == std::vector<std::string>{"warn"});
    CHECK(guard->events()[0].step == 11);  // seen by the check after the next step
    CHECK(step_events == std::vector<std::string>{"warn"});
    // The metrics file carries the event and the temperatures.
    std::ifstream metrics(r.metrics_path);
    std::string all((std::istreambuf_iterator<char>(metrics)), std::istreambuf_iterator<char>());
    CHECK(all.find("\"temperature_c\":92") != std::string::npos);
    CHECK(all.find("warn: ") != std::string::npos);
  }

  SUBCASE("pause: the run waits for the sensor to cool, then finishes every step") {
    test::TempDir dir("accelkit-guard-pause");
    auto rt = guarded_runtime("pause");
    std::atomic<bool> paused{false};
    auto guard = accelkit::make_guard(*rt, [&](const GuardEvent& e) {
      if (e.kind == "pause") paused = true;
    });
    std::thread fan([&] {  // cools the device once the run has paused
      const auto deadline = std::chrono::steady_clock::now() + 30s;
      while (!paused && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(5ms);
      std::this_thread::sleep_for(100ms);
      sysfs.set(75);  // below 80, not below 70: still paused
      std::this_thread::sleep_for(100ms);
      sysfs.set(50);
    });
    Trainer trainer(*rt, small_config((dir.path() / "run").string()));
    TrainOptions o;
    o.guard = guard.get();
    o.on_step = [&](const TrainProgress& p) {
      if (p.step == 7) {
        sysfs.set(95);
        settle(*guard);
      }
    };
    const TrainResult r = trainer.run(o);
    fan.join();
    CHECK(r.end_step == 30);
    CHECK(r.losses == reference);
    REQUIRE(kinds(*guard) == std::vector<std::string>{"pause", "resume"});
    CHECK(guard->events()[0].step == 8);
    CHECK(guard->events()[1].paused_s >= 0.19);
    CHECK(guard->events()[1].value == 50);
  }

  SUBCASE("stop: a checkpoint at the stop, and the resumed run ends as the uninterrupted one") {
    test::TempDir dir("accelkit-guard-stop");
    const std::string run_dir = (dir.path() / "run").string();
    {
      auto rt = guarded_runtime("stop");
      auto guard = accelkit::make_guard(*rt);
      Trainer trainer(*rt, small_config(run_dir));
      TrainOptions o;
      o.guard = guard.get();
      o.on_step = [&](const TrainProgress& p) {
        if (p.step == 12) {
          sysfs.set(85);
          settle(*guard);
        }
      };
      const TrainResult r = trainer.run(o);
      CHECK(r.guard_stopped);
      CHECK(r.interrupted);
      CHECK(r.end_step == 13);
      REQUIRE(r.saved.size() == 1);
      CHECK(r.saved[0].find("step-00000013") != std::string::npos);
      CHECK(std::vector<double>(reference.begin(), reference.begin() + 13) == r.losses);
      CHECK(kinds(*guard) == std::vector<std::string>{"stop"});
      CHECK(std::filesystem::exists(r.report_path));
    }
    sysfs.set(40);  // cooled: resume
    auto rt = guarded_runtime("stop");
    auto guard = accelkit::make_guard(*rt);
    Trainer trainer(*rt, small_config(run_dir));
    TrainOptions o;
    o.guard = guard.get();
    o.resume = true;
    const TrainResult r = trainer.run(o);
    CHECK(r.start_step == 13);
    CHECK(r.end_step == 30);
    CHECK(std::vector<double>(reference.begin() + 13, reference.end()) == r.losses);
    CHECK(guard->events().empty());
  }
}
