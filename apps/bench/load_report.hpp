// What `accelkit bench` says about other work on the machine (accelkit/machine_load.hpp reads
// it): it measures the load before and while it times, says when the figure is suspect, and
// can wait for a quiet machine first.
#pragma once

#include <optional>
#include <string>

#include "accelkit/bench.hpp"
#include "accelkit/machine_load.hpp"

namespace accelkit::bench_detail {

// The load readings are core's (accelkit/machine_load.hpp).
using accelkit::CpuSample;
using accelkit::other_cores;
using accelkit::other_cores_now;
using accelkit::sample_cpu;
using accelkit::wait_for_quiet;

// The machine before anything is timed: waits for quiet when `o` asks (progress phase "quiet"),
// then measures what other processes use.
void machine_before(BenchMachine& m, const BenchOptions& o, const std::string& label, const BenchProgressFn& progress);
// After timing (other processes' cores between `start` and now): busy and the note.
void machine_after(BenchMachine& m, const std::optional<CpuSample>& start, int threads_used);

}  // namespace accelkit::bench_detail
