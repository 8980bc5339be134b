// One doctest main for every suite, with a listener that names the random seed after a failed
// run: a suite drawing fresh random inputs (test_support.hpp's test_seed) can be rerun on the
// very inputs that failed.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <iostream>

#include "test_support.hpp"

namespace {

struct SeedListener : doctest::IReporter {
  explicit SeedListener(const doctest::ContextOptions&) {}
  void test_run_end(const doctest::TestRunStats& stats) override {
    if (!accelkit::test::seed_drawn || (stats.numAssertsFailed == 0 && stats.numTestCasesFailed == 0)) return;
    const auto seed = accelkit::test::test_seed();
    std::cerr << "[accelkit] this run's random inputs came from seed " << seed << ": rerun with ACCELKIT_TEST_SEED="
              << seed << "\n";
  }
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

}  // namespace

DOCTEST_REGISTER_LISTENER("accelkit-seed", 1, SeedListener);
