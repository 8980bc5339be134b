// Pure parsers of the CPU plugin: cpuinfo, meminfo, /proc/stat, the BLAS classifier, RAPL deltas.
#include <doctest/doctest.h>

#include "blas.hpp"
#include "cpuinfo.hpp"
#include "meminfo.hpp"
#include "proc_stat.hpp"
#include "rapl.hpp"

using namespace accelkit::cpu;

TEST_CASE("cpuinfo: hyperthreaded single socket") {
  const char* text =
      "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Gold 6430\n"
      "physical id\t: 0\ncore id\t\t: 0\n\n"
      "processor\t: 1\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Gold 6430\n"
      "physical id\t: 0\ncore id\t\t: 1\n\n"
      "processor\t: 2\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Gold 6430\n"
      "physical id\t: 0\ncore id\t\t: 0\n\n"
      "processor\t: 3\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Gold 6430\n"
      "physical id\t: 0\ncore id\t\t: 1\n";
  auto s = parse_cpuinfo(text);
  CHECK(s.vendor_id == "GenuineIntel");
  CHECK(s.model_name == "Intel(R) Xeon(R) Gold 6430");
  CHECK(s.logical_cores == 4);
  CHECK(s.physical_cores == 2);
  CHECK(s.sockets == 1);
}

TEST_CASE("cpuinfo: two sockets reuse core ids") {
  std::string text;
  for (int i = 0; i < 8; ++i)
    text += "processor : " + std::to_string(i) + "\nphysical id : " + std::to_string(i / 4) +
            "\ncore id : " + std::to_string(i % 4) + "\n\n";
  auto s = parse_cpuinfo(text);
  CHECK(s.logical_cores == 8);
  CHECK(s.physical_cores == 8);
  CHECK(s.sockets == 2);
}

TEST_CASE("cpuinfo: no core ids (arm64, some VMs)") {
  auto s = parse_cpuinfo("processor\t: 0\nBogoMIPS\t: 50.00\n\nprocessor\t: 1\nBogoMIPS\t: 50.00\n");
  CHECK(s.logical_cores == 2);
  CHECK(s.physical_cores == 0);
  CHECK(s.vendor_id.empty());
  CHECK(s.model_name.empty());
}

TEST_CASE("vendor names") {
  CHECK(vendor_name("GenuineIntel") == "Intel");
  CHECK(vendor_name("AuthenticAMD") == "AMD");
  CHECK(vendor_name("HygonGenuine") == "Hygon");
  CHECK(vendor_name("Something") == "Something");
}

TEST_CASE("meminfo: MemTotal and MemAvailable in bytes") {
  auto m = parse_meminfo("MemTotal:       24682416 kB\nMemFree:        21897544 kB\n"
                         "MemAvailable:   24263616 kB\nHugePages_Total:       0\n");
  CHECK(m.total_bytes == 24682416ull * 1024);
  REQUIRE(m.available_bytes);
  CHECK(*m.available_bytes == 24263616ull * 1024);
}

TEST_CASE("meminfo: old kernels without MemAvailable") {
  auto m = parse_meminfo("MemTotal: 1000 kB\nMemFree: 100 kB\nBuffers: 20 kB\nCached: 300 kB\n");
  REQUIRE(m.available_bytes);
  CHECK(*m.available_bytes == 420ull * 1024);
  CHECK(parse_meminfo("").total_bytes == 0);
}

TEST_CASE("/proc/stat: aggregate line and utilisation between snapshots") {
  auto a = parse_proc_stat("cpu  100 5 50 1000 20 3 2 0 0 0\ncpu0 50 2 25 500 10 1 1 0 0 0\n");
  REQUIRE(a);
  CHECK(a->busy == 160);
  CHECK(a->total == 1180);
  auto b = parse_proc_stat("cpu  400 5 100 1100 20 3 2 0 0 0\n");
  REQUIRE(b);
  auto u = utilisation_pct(*a, *b);
  REQUIRE(u);
  CHECK(*u == doctest::Approx(350.0 * 100.0 / 450.0));
  CHECK_FALSE(utilisation_pct(*a, *a));  // no ticks elapsed
  CHECK_FALSE(utilisation_pct(*b, *a));  // counters went back (reboot, wrong file)
  CHECK_FALSE(parse_proc_stat("cpu0 1 2 3 4\nintr 5\n"));
}

TEST_CASE("BLAS: Debian's reference BLAS warns with the fix") {
  auto b = classify_blas(
      "7f1c2b400000-7f1c2b41a000 r--p 00000000 08:01 2201 /usr/lib/x86_64-linux-gnu/libtorch_cpu.so.1.13\n"
      "7f1c2c800000-7f1c2c803000 r--p 00000000 08:01 2202 /usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0\n"
      "7f1c2d000000-7f1c2d004000 r--p 00000000 08:01 2203 /usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0\n");
  CHECK(b.kind == BlasKind::reference);
  CHECK(b.path == "/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0");
  CHECK(b.warning.find("apt-get install libopenblas0-openmp") != std::string::npos);
  CHECK(b.warning.find("update-alternatives --config libblas.so.3-x86_64-linux-gnu") !=
        std::string::npos);
}

TEST_CASE("BLAS: arm64 reference BLAS names its own alternative") {
  auto b = classify_blas("aaaa-bbbb r-xp 0 0:1 2 /usr/lib/aarch64-linux-gnu/blas/libblas.so.3\n");
  CHECK(b.kind == BlasKind::reference);
  CHECK(b.warning.find("libblas.so.3-aarch64-linux-gnu") != std::string::npos);
}

TEST_CASE("BLAS: optimised implementations, no warning") {
  auto openmp = classify_blas("a-b r-xp 0 0:1 2 /usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3\n");
  CHECK(openmp.kind == BlasKind::openblas);
  CHECK(openmp.name == "openblas-openmp");
  CHECK(openmp.warning.empty());

  auto blis = classify_blas("a-b r-xp 0 0:1 2 /usr/lib/x86_64-linux-gnu/blis-openmp/libblas.so.3\n");
  CHECK(blis.kind == BlasKind::blis);
  CHECK(blis.warning.empty());

  // libblas.so.3 -> libmkl_rt.so through alternatives: maps shows the MKL file.
  auto mkl = classify_blas("a-b r-xp 0 0:1 2 /usr/lib/x86_64-linux-gnu/libmkl_rt.so\n");
  CHECK(mkl.kind == BlasKind::mkl);
  CHECK(mkl.warning.empty());

  auto deleted = classify_blas(
      "a-b r-xp 0 0:1 2 /usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3 (deleted)\n");
  CHECK(deleted.kind == BlasKind::openblas);
  CHECK(deleted.path == "/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3");
}

TEST_CASE("BLAS: what runs fp32 matmuls, named for people") {
  const auto openmp = classify_blas("a-b r-xp 0 0:1 2 /usr/lib/x86_64-linux-gnu/openblas-openmp/libblas.so.3\n");
  CHECK(blas_in_use(openmp, "SkylakeX") == "OpenBLAS SkylakeX");
  CHECK(blas_in_use(openmp, "") == "OpenBLAS");  // no kernels selected at run time
  CHECK(blas_in_use(classify_blas("a-b r-xp 0 0:1 2 /usr/lib/x86_64-linux-gnu/libmkl_rt.so\n"), "") == "MKL");
  CHECK(blas_in_use(classify_blas("aaaa-bbbb r-xp 0 0:1 2 /usr/lib/aarch64-linux-gnu/blas/libblas.so.3\n"), "") ==
        "reference BLAS");
  CHECK(blas_in_use(classify_blas(""), "").empty());  // nothing found: nothing claimed
}

TEST_CASE("BLAS: nothing mapped (statically linked into LibTorch)") {
  auto b = classify_blas(
      "a-b r-xp 0 0:1 2 /opt/libtorch/lib/libtorch_cpu.so\nc-d rw-p 0 0:0 0 [heap]\n\n");
  CHECK(b.kind == BlasKind::not_found);
  CHECK(b.warning.empty());
  CHECK(classify_blas("").kind == BlasKind::not_found);
}

TEST_CASE("RAPL energy deltas, with wrap-around") {
  CHECK(energy_delta_uj(100, 350, 1000) == std::optional<std::uint64_t>(250));
  CHECK(energy_delta_uj(900, 100, 1000) == std::optional<std::uint64_t>(200));
  CHECK_FALSE(energy_delta_uj(900, 100, 0));    // range unknown
  CHECK_FALSE(energy_delta_uj(2000, 100, 1000));  // previous beyond the range: not a wrap
}
