// accelkit::MemoryScope: the peak and change of device memory inside a region, through
// Device::memory() / reset_peak_memory(). Scripted devices check the arithmetic (nesting folds
// an outer scope's peak before an inner reset; a device without a reset or without memory);
// the CPU plugin's /proc readings check it on this process: touching 256 MiB inside a scope
// shows as its peak. Also the /proc/self/status parser on fixture text.
#include <doctest/doctest.h>

#include <cstring>
#include <memory>
#include <vector>

#include <accelkit/memory_scope.hpp>

#include "process_memory.hpp"

using namespace accelkit;

namespace {

// A device whose memory the test moves by hand; reset sets the peak to what is in use.
class ScriptedDevice final : public Device {
 public:
  explicit ScriptedDevice(bool resettable = true, bool reports = true) : resettable_(resettable), reports_(reports) {
    info_.id = "scripted:0";
  }
  const DeviceInfo& info() const noexcept override { return info_; }
  Result<std::shared_ptr<Precision>> precision() noexcept override {
    return Status(StatusCode::not_supported, "scripted");
  }
  Result<MemoryStats> memory() noexcept override {
    if (!reports_) return Status(StatusCode::not_supported, "this device's plugin reports no memory figures");
    MemoryStats s;
    s.in_use = in_use_;
    s.peak = peak_;
    s.source = "script";
    return s;
  }
  Status reset_peak_memory() noexcept override {
    if (!resettable_) return Status(StatusCode::not_supported, "no reset here");
    peak_ = in_use_;
    return Status();
  }
  void set(std::uint64_t bytes) {
    in_use_ = bytes;
    if (bytes > peak_) peak_ = bytes;
  }

 private:
  DeviceInfo info_;
  bool resettable_, reports_;
  std::uint64_t in_use_ = 0, peak_ = 0;
};

}  // namespace

TEST_CASE("a scope reports its own peak and change; nested scopes keep the outer peak") {
  auto dev = std::make_shared<ScriptedDevice>();
  dev->set(1000);
  dev->set(100);  // a peak from before the scope must not count
  MemoryScope outer(dev, "outer");
  dev->set(500);
  dev->set(200);
  {
    MemoryScope inner(dev, "inner");  // resets the device's peak: outer keeps its 500
    dev->set(300);
    dev->set(250);
    const MemoryReport r = inner.stop();
    CHECK(r.measured);
    CHECK(r.peak_measured);
    CHECK(r.start == 200);
    CHECK(r.peak == 300);
    CHECK(r.end == 250);
    CHECK(r.peak_over_start() == 100);
    CHECK(r.delta() == 50);
    CHECK(inner.stop().peak == 300);  // stopped: the same report
  }
  {
    MemoryScope sibling(dev, "sibling");
    dev->set(400);
    dev->set(150);
  }
  const MemoryReport r = outer.report();
  CHECK(r.start == 100);
  CHECK(r.peak == 500);  // from before the inner scopes' resets
  CHECK(r.end == 150);
  CHECK(r.delta() == 50);
  CHECK(r.summary().find("outer on scripted:0: peak +400 B over the start") == 0);
  dev->set(700);  // the outer scope still open: its peak moves
  CHECK(outer.report().peak == 700);
}

TEST_CASE("without a peak reset the scope says so and uses start and end; without memory it is not measured") {
  auto dev = std::make_shared<ScriptedDevice>(/*resettable=*/false);
  dev->set(900);
  dev->set(100);
  MemoryScope scope(dev, "no reset");
  dev->set(300);
  const MemoryReport r = scope.stop();
  CHECK(r.measured);
  CHECK_FALSE(r.peak_measured);
  CHECK(r.peak == 300);  // not the 900 from before the scope
  CHECK(r.note.find("no reset here") != std::string::npos);
  CHECK(r.summary().find("no peak from the device") != std::string::npos);

  auto silent = std::make_shared<ScriptedDevice>(true, /*reports=*/false);
  MemoryScope none(silent, "none");
  const MemoryReport n = none.stop();
  CHECK_FALSE(n.measured);
  CHECK(n.note == "this device's plugin reports no memory figures");
  CHECK(n.summary() == "none on scripted:0: not measured (this device's plugin reports no memory figures)");

  MemoryScope null_device(nullptr, "null");
  CHECK_FALSE(null_device.report().measured);
}

TEST_CASE("/proc/self/status: VmRSS and VmHWM in bytes; a missing or malformed line is unknown") {
  const auto m = cpu::parse_proc_status_memory("Name:\tx\nVmPeak:\t  999 kB\nVmHWM:\t    2048 kB\nVmRSS:\t    1024 kB\n");
  REQUIRE(m.rss_bytes.has_value());
  CHECK(*m.rss_bytes == 1024u * 1024u);
  CHECK(*m.peak_bytes == 2048u * 1024u);
  const auto bad = cpu::parse_proc_status_memory("VmRSS:\tlots kB\nVmHWMx:\t12 kB\n");
  CHECK_FALSE(bad.rss_bytes.has_value());
  CHECK_FALSE(bad.peak_bytes.has_value());
  CHECK_FALSE(cpu::parse_proc_status_memory("").rss_bytes.has_value());
}

namespace {

// The CPU plugin's memory functions behind the Device interface (what CpuDevice does).
class ProcDevice final : public Device {
 public:
  ProcDevice() { info_.id = "cpu:0"; }
  const DeviceInfo& info() const noexcept override { return info_; }
  Result<std::shared_ptr<Precision>> precision() noexcept override { return Status(StatusCode::not_supported, "-"); }
  Result<MemoryStats> memory() noexcept override { return cpu::read_process_memory(); }
  Status reset_peak_memory() noexcept override { return cpu::reset_process_peak(); }

 private:
  DeviceInfo info_;
};

}  // namespace

TEST_CASE("the CPU's resident set: 256 MiB touched inside a scope is its peak") {
  const MemoryStats now = cpu::read_process_memory();
  REQUIRE(now.in_use.has_value());
  CHECK(*now.in_use > 0);
  REQUIRE(now.total.has_value());
  REQUIRE(now.available.has_value());
  CHECK(*now.available <= *now.total);
  CHECK(now.source.find("status") != std::string::npos);

  auto dev = std::make_shared<ProcDevice>();
  constexpr std::size_t kBytes = 256u << 20;
  MemoryScope scope(dev, "touch 256 MiB");
  {
    std::vector<char> block(kBytes);
    std::memset(block.data(), 1, block.size());  // resident now
    CHECK(block[kBytes / 2] == 1);
  }
  const MemoryReport r = scope.stop();  // the block is freed (returned to the kernel: mmap'd)
  REQUIRE(r.measured);
  MESSAGE(r.summary());
  CHECK(r.peak_measured);  // clear_refs resets VmHWM on Linux 4.0+
  CHECK(r.peak_over_start() >= kBytes * 9 / 10);
  CHECK(r.delta() < static_cast<std::int64_t>(kBytes / 2));  // the block went back
}
