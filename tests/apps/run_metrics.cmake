# A run's metrics.jsonl and report.html (apps/train/include/accelkit/run_metrics.hpp): the writer
# and the reader (exact doubles, nulls, escapes, events, resumed steps, torn and malformed lines),
# the report's plotted values read back from its HTML; then report.html rendered by a real browser
# (headless chromium: a screenshot that is not blank, the plotted values in its DOM), skipped
# with the reason when chromium is not installed.
accelkit_add_test(run_metrics_test SOURCES apps/run_metrics_test.cpp LINK accelkit::train)

add_executable(report_html_fixture apps/report_html_fixture.cpp)
target_link_libraries(report_html_fixture PRIVATE accelkit::train)
accelkit_warnings(report_html_fixture)
accelkit_test_code(report_html_fixture)
add_test(NAME run_metrics_report_html
  COMMAND "${CMAKE_CURRENT_SOURCE_DIR}/apps/report_html_test.sh" "$<TARGET_FILE:report_html_fixture>")
set_tests_properties(run_metrics_report_html PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
