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

# capture_lab(<name> <mode> <perftest connection options> <tool>): tool "ib" runs
# Debian's ib_<t>_lat on both sides; "rdmadiag" runs `rdmadiag perftest <t>-lat` on
# both sides, and the check then also counts the test's own packets against -n
# (docs/capture.md): exactly -n WRITEs/SENDs from each side or -n READs (rxe),
# with every ICRC good and no PSN anomaly.
function(capture_lab name mode conn tool)
  set(rd $<TARGET_FILE:rdmadiag>)
  string(REPLACE "-" "_" test ${name})  # results in <name>/, tests named lab_capture_<name with _>
  set(args --mode ${mode} --out ${CAP_LAB_OUT}/${name} --replace --timeout 900 --step-timeout 300 -q)
  foreach(t write read send)
    if(tool STREQUAL "ib")
      set(cmd "ib_${t}_lat -d $LAB_DEV ${conn} -F -n 100")
    else()
      set(cmd "${rd} perftest ${t}-lat -d $LAB_DEV ${conn} -n 100")
    endif()
    list(APPEND args --server "${CAP_STEP} ${t}-lat ${cmd}" --client "${cmd} $LAB_SERVER_IP")
  endforeach()
  add_test(NAME lab_capture_${test} COMMAND ${PROJECT_SOURCE_DIR}/tests/lab/run ${args})
  set_tests_properties(lab_capture_${test} PROPERTIES
    LABELS lab FIXTURES_REQUIRED lab FIXTURES_SETUP lab_capture_${test}
    TIMEOUT 960 RESOURCE_LOCK lab_vms)
  set(count)
  if(NOT tool STREQUAL "ib")
    set(count 100)
  endif()
  foreach(t write read send)
    add_test(NAME lab_capture_${test}_${t}
      COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/lab_check.py ${rd} ${CAP_LAB_OUT}/${name} ${t}-lat ${mode} ${t} ${count})
    set_tests_properties(lab_capture_${test}_${t} PROPERTIES
      LABELS lab FIXTURES_REQUIRED lab_capture_${test} TIMEOUT 120)
  endforeach()
endfunction()

capture_lab(rxe rxe "-x 1" ib)
capture_lab(siw siw "-R" ib)
capture_lab(perftest-rxe rxe "-x 1" rdmadiag)
capture_lab(perftest-siw siw "-R" rdmadiag)
