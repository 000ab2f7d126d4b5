# `rdmadiag capture -i eth0` inside the qemu lab (tests/lab, label "lab"):
#   ctest -R '^lab_capture'
# One VM pair per RDMA stack; in each step the server VM captures its eth0
# with rdmadiag while a perftest latency test runs; lab_check.py then checks
# the capture against tshark and against what the test did.
if(NOT TARGET rdmadiag OR NOT EXISTS ${PROJECT_SOURCE_DIR}/tests/lab/run)
  return()
endif()

set(CAP_LAB_OUT ${CMAKE_CURRENT_BINARY_DIR}/lab)
set(CAP_STEP "${CMAKE_CURRENT_SOURCE_DIR}/lab_capture_step.sh $<TARGET_FILE:rdmadiag>")

# capture_lab(<mode> <perftest connection options>)
function(capture_lab mode conn)
  set(args --mode ${mode} --out ${CAP_LAB_OUT}/${mode} --replace --timeout 900 --step-timeout 300 -q)
  foreach(t write read send)
    list(APPEND args
      --server "${CAP_STEP} ${t}-lat ib_${t}_lat -d $LAB_DEV ${conn} -F -n 100"
      --client "ib_${t}_lat -d $LAB_DEV ${conn} -F -n 100 $LAB_SERVER_IP")
  endforeach()
  add_test(NAME lab_capture_${mode} COMMAND ${PROJECT_SOURCE_DIR}/tests/lab/run ${args})
  set_tests_properties(lab_capture_${mode} PROPERTIES
    LABELS lab FIXTURES_REQUIRED lab FIXTURES_SETUP lab_capture_${mode}
    TIMEOUT 960 RESOURCE_LOCK lab_vms)
  foreach(t write read send)
    add_test(NAME lab_capture_${mode}_${t}
      COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/lab_check.py $<TARGET_FILE:rdmadiag> ${CAP_LAB_OUT}/${mode} ${t}-lat ${mode} ${t})
    set_tests_properties(lab_capture_${mode}_${t} PROPERTIES
      LABELS lab FIXTURES_REQUIRED lab_capture_${mode} TIMEOUT 120)
  endforeach()
endfunction()

capture_lab(rxe "-x 1")
capture_lab(siw "-R")

# The same with `rdmadiag perftest` on both sides (docs/perftest.md): the
# capture shows the packets the test reports — exactly -n WRITEs/SENDs from
# each side or -n READs (rxe) — with every ICRC good and no PSN anomaly.
function(capture_lab_perftest mode conn)
  set(rd $<TARGET_FILE:rdmadiag>)
  set(args --mode ${mode} --out ${CAP_LAB_OUT}/perftest-${mode} --replace --timeout 900 --step-timeout 300 -q)
  foreach(t write read send)
    list(APPEND args
      --server "${CAP_STEP} ${t}-lat ${rd} perftest ${t}-lat -d $LAB_DEV ${conn} -n 100"
      --client "${rd} perftest ${t}-lat -d $LAB_DEV ${conn} -n 100 $LAB_SERVER_IP")
  endforeach()
  add_test(NAME lab_capture_perftest_${mode} COMMAND ${PROJECT_SOURCE_DIR}/tests/lab/run ${args})
  set_tests_properties(lab_capture_perftest_${mode} PROPERTIES
    LABELS lab FIXTURES_REQUIRED lab FIXTURES_SETUP lab_capture_perftest_${mode}
    TIMEOUT 960 RESOURCE_LOCK lab_vms)
  foreach(t write read send)
    add_test(NAME lab_capture_perftest_${mode}_${t}
      COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/lab_check.py ${rd} ${CAP_LAB_OUT}/perftest-${mode} ${t}-lat ${mode} ${t} 100)
    set_tests_properties(lab_capture_perftest_${mode}_${t} PROPERTIES
      LABELS lab FIXTURES_REQUIRED lab_capture_perftest_${mode} TIMEOUT 120)
  endforeach()
endfunction()

capture_lab_perftest(rxe "-x 1")
capture_lab_perftest(siw "-R")
