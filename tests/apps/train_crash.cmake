# accelkit train killed (SIGKILL) at random points and resumed, twenty times.
accelkit_add_cli_test(train_crash_test SOURCES apps/train_crash_test.cpp LINK accelkit::train)
if(TEST train_crash_test)
  set_tests_properties(train_crash_test PROPERTIES TIMEOUT 600)
endif()
# accelkit train --nproc-per-node 2 (real local workers over Gloo), resumed at world size 1.
accelkit_add_cli_test(train_dist_test SOURCES apps/train_dist_test.cpp LINK accelkit::train)
# accelkit train under a file-size limit (ulimit -f), stopped by SIGHUP, under nohup.
accelkit_add_cli_test(train_signals_test SOURCES apps/train_signals_test.cpp LINK accelkit::train)
