# Real RDMA runs of rdmadiag perftest in the qemu lab (tests/lab), label "lab":
#   ctest -L lab -R perftest
# Each lab_perftest_* test boots one VM pair (Soft-RoCE) and runs several steps in it.
# JSON reports are written relative to the guest's working directory, which is the
# lab's per-role results share (<out>/server, <out>/client).
if(NOT TARGET rdmadiag OR NOT EXISTS ${PROJECT_SOURCE_DIR}/tests/lab/run)
  return()
endif()

set(PT_LAB_RUN ${PROJECT_SOURCE_DIR}/tests/lab/run)
set(PT_LAB_OUT ${CMAKE_CURRENT_BINARY_DIR}/lab)
set(PT_RD $<TARGET_FILE:rdmadiag>)
set(PT_DEV "-d $LAB_DEV -x 1")
set(PT_LAT "-n 100")
set(PT_BW "-n 60 -s 4096")

# perftest_lab(<name> [MODE rxe|siw] [TIMEOUT s] STEPS "<server>|<client>" ...)
# A step takes 2-12 s under emulation (-D 4 the longest); each command is bounded by
# LAB_STEP_TIMEOUT (CMakeLists.txt), the whole run by TIMEOUT.
function(perftest_lab name)
  cmake_parse_arguments(P "" "TIMEOUT;MODE" "STEPS" ${ARGN})
  if(NOT P_TIMEOUT)
    set(P_TIMEOUT 1200)
  endif()
  if(NOT P_MODE)
    set(P_MODE rxe)
  endif()
  set(args --mode ${P_MODE} --out ${PT_LAB_OUT}/${name} --replace --timeout ${P_TIMEOUT} --step-timeout ${LAB_STEP_TIMEOUT} -q)
  foreach(step IN LISTS P_STEPS)
    string(REPLACE "|" ";" pair "${step}")
    list(GET pair 0 server)
    list(GET pair 1 client)
    list(APPEND args --server "${server}" --client "${client}")
  endforeach()
  add_test(NAME lab_perftest_${name} COMMAND ${PT_LAB_RUN} ${args})
  math(EXPR ctest_timeout "${P_TIMEOUT} + 60")
  set_tests_properties(lab_perftest_${name} PROPERTIES
    LABELS lab FIXTURES_REQUIRED lab FIXTURES_SETUP lab_perftest_${name}
    TIMEOUT ${ctest_timeout} RESOURCE_LOCK lab_vms)
endfunction()

# Every subcommand, rdmadiag on both sides, JSON reports on both sides.
set(steps)
foreach(t write-lat read-lat send-lat atomic-lat)
  list(APPEND steps "${PT_RD} perftest ${t} ${PT_DEV} ${PT_LAT} --json ${t}.json|${PT_RD} perftest ${t} ${PT_DEV} ${PT_LAT} --json ${t}.json $LAB_SERVER_IP")
endforeach()
foreach(t write-bw read-bw send-bw)
  list(APPEND steps "${PT_RD} perftest ${t} ${PT_DEV} ${PT_BW} --json ${t}.json|${PT_RD} perftest ${t} ${PT_DEV} ${PT_BW} --report-both --json ${t}.json $LAB_SERVER_IP")
endforeach()
# -a keeps every size (few iterations: 8 MiB writes are slow in emulation).
list(APPEND steps "${PT_RD} perftest write-lat ${PT_DEV} -a -n 10 --json sweep.json|${PT_RD} perftest write-lat ${PT_DEV} -a -n 10 --json sweep.json $LAB_SERVER_IP")
perftest_lab(self STEPS ${steps})

add_test(NAME lab_perftest_self_json
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/validate_json.py ${PROJECT_SOURCE_DIR}/docs/perftest-schema.json
          ${PT_LAB_OUT}/self/client/write-lat.json ${PT_LAB_OUT}/self/client/read-lat.json
          ${PT_LAB_OUT}/self/client/send-lat.json ${PT_LAB_OUT}/self/client/atomic-lat.json
          ${PT_LAB_OUT}/self/client/write-bw.json ${PT_LAB_OUT}/self/client/read-bw.json
          ${PT_LAB_OUT}/self/client/send-bw.json ${PT_LAB_OUT}/self/server/write-lat.json)
set_tests_properties(lab_perftest_self_json PROPERTIES LABELS lab FIXTURES_REQUIRED lab_perftest_self)
add_test(NAME lab_perftest_self_sweep
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/validate_json.py ${PROJECT_SOURCE_DIR}/docs/perftest-schema.json
          ${PT_LAB_OUT}/self/client/sweep.json ${PT_LAB_OUT}/self/server/sweep.json --min-results 23)
set_tests_properties(lab_perftest_self_sweep PROPERTIES LABELS lab FIXTURES_REQUIRED lab_perftest_self)

# Interoperability with Debian's perftest 4.5 (announces 6.06), both directions.
set(steps)
foreach(v write read send)
  list(APPEND steps "ib_${v}_lat ${PT_DEV} -F ${PT_LAT}|${PT_RD} perftest ${v}-lat ${PT_DEV} ${PT_LAT} --json ${v}-vs-ib.json $LAB_SERVER_IP")
  list(APPEND steps "${PT_RD} perftest ${v}-lat ${PT_DEV} ${PT_LAT} --json ${v}-vs-ib.json|ib_${v}_lat ${PT_DEV} -F ${PT_LAT} $LAB_SERVER_IP")
endforeach()
list(APPEND steps "ib_write_bw ${PT_DEV} -F ${PT_BW}|${PT_RD} perftest write-bw ${PT_DEV} ${PT_BW} $LAB_SERVER_IP")
list(APPEND steps "${PT_RD} perftest write-bw ${PT_DEV} ${PT_BW}|ib_write_bw ${PT_DEV} -F ${PT_BW} $LAB_SERVER_IP")
perftest_lab(interop STEPS ${steps})

# -R/--rdma_cm. siw connects only through rdma_cm: every subcommand but atomic-lat (siw has no
# atomics) rdmadiag <-> rdmadiag, then rdmadiag <-> Debian's ib_{write,read,send}_lat -R both ways.
set(PT_CM_DEV "-d $LAB_DEV -R")
set(steps)
set(cm_reports)
foreach(t write-lat read-lat send-lat)
  list(APPEND steps "${PT_RD} perftest ${t} ${PT_CM_DEV} ${PT_LAT} --json ${t}.json|${PT_RD} perftest ${t} ${PT_CM_DEV} ${PT_LAT} --json ${t}.json $LAB_SERVER_IP")
  list(APPEND cm_reports ${PT_LAB_OUT}/siw_cm/client/${t}.json ${PT_LAB_OUT}/siw_cm/server/${t}.json)
endforeach()
foreach(t write-bw read-bw send-bw)
  list(APPEND steps "${PT_RD} perftest ${t} ${PT_CM_DEV} ${PT_BW} --json ${t}.json|${PT_RD} perftest ${t} ${PT_CM_DEV} ${PT_BW} --report-both --json ${t}.json $LAB_SERVER_IP")
  list(APPEND cm_reports ${PT_LAB_OUT}/siw_cm/client/${t}.json ${PT_LAB_OUT}/siw_cm/server/${t}.json)
endforeach()
# -D over rdma_cm on iWARP.
list(APPEND steps
  "${PT_RD} perftest write-lat ${PT_CM_DEV} -D 4 --json write-lat-D.json|${PT_RD} perftest write-lat ${PT_CM_DEV} -D 4 --json write-lat-D.json $LAB_SERVER_IP"
  "${PT_RD} perftest send-bw ${PT_CM_DEV} -D 4 -s 4096 --json send-bw-D.json|${PT_RD} perftest send-bw ${PT_CM_DEV} -D 4 -s 4096 --json send-bw-D.json $LAB_SERVER_IP")
list(APPEND cm_reports ${PT_LAB_OUT}/siw_cm/client/write-lat-D.json ${PT_LAB_OUT}/siw_cm/server/write-lat-D.json
     ${PT_LAB_OUT}/siw_cm/client/send-bw-D.json ${PT_LAB_OUT}/siw_cm/server/send-bw-D.json)
set(cm_interop)
foreach(v write read send)
  list(APPEND cm_interop "ib_${v}_lat ${PT_CM_DEV} -F ${PT_LAT}|${PT_RD} perftest ${v}-lat ${PT_CM_DEV} ${PT_LAT} --json ${v}-vs-ib.json $LAB_SERVER_IP")
  list(APPEND cm_interop "${PT_RD} perftest ${v}-lat ${PT_CM_DEV} ${PT_LAT} --json ${v}-vs-ib.json|ib_${v}_lat ${PT_CM_DEV} -F ${PT_LAT} $LAB_SERVER_IP")
endforeach()
# Errors over rdma_cm: a server on port 18600 nobody connects to (timeout after 12 s) while the
# client tries port 18515 where nobody listens (it retries, then says refused after 5 s); two
# rdmadiag peers running different tests (both say so). The server must outlive the client's
# attempts: the next step's server would otherwise answer them.
set(PT_EXPECT ${CMAKE_CURRENT_SOURCE_DIR}/expect_failure.sh)
set(cm_errors
  "${PT_EXPECT} 'no client connected to port 18600 within 12 s' ${PT_RD} perftest write-lat ${PT_CM_DEV} -p 18600 --timeout 12|${PT_EXPECT} 'refused the connection' ${PT_RD} perftest write-lat ${PT_CM_DEV} --timeout 5 $LAB_SERVER_IP"
  "${PT_EXPECT} 'runs a different test' ${PT_RD} perftest write-lat ${PT_CM_DEV} ${PT_LAT}|${PT_EXPECT} 'runs a different test' ${PT_RD} perftest read-lat ${PT_CM_DEV} ${PT_LAT} $LAB_SERVER_IP")
perftest_lab(siw_cm MODE siw STEPS ${cm_errors} ${steps} ${cm_interop})
add_test(NAME lab_perftest_siw_cm_json
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/validate_json.py ${PROJECT_SOURCE_DIR}/docs/perftest-schema.json ${cm_reports}
          ${PT_LAB_OUT}/siw_cm/client/write-vs-ib.json ${PT_LAB_OUT}/siw_cm/server/write-vs-ib.json
          --exchange rdma_cm --require-ok --check-modes)
set_tests_properties(lab_perftest_siw_cm_json PROPERTIES LABELS lab FIXTURES_REQUIRED lab_perftest_siw_cm)

# The same interop over rdma_cm on Soft-RoCE, and rdmadiag <-> rdmadiag atomic-lat -R (rxe has atomics).
perftest_lab(rxe_cm STEPS ${cm_errors} ${cm_interop}
  "${PT_RD} perftest atomic-lat ${PT_CM_DEV} ${PT_LAT} --json atomic-lat.json|${PT_RD} perftest atomic-lat ${PT_CM_DEV} ${PT_LAT} --json atomic-lat.json $LAB_SERVER_IP")
add_test(NAME lab_perftest_rxe_cm_json
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/validate_json.py ${PROJECT_SOURCE_DIR}/docs/perftest-schema.json
          ${PT_LAB_OUT}/rxe_cm/client/write-vs-ib.json ${PT_LAB_OUT}/rxe_cm/server/write-vs-ib.json
          ${PT_LAB_OUT}/rxe_cm/client/read-vs-ib.json ${PT_LAB_OUT}/rxe_cm/client/send-vs-ib.json
          ${PT_LAB_OUT}/rxe_cm/client/atomic-lat.json --exchange rdma_cm --require-ok --min-results 1)
set_tests_properties(lab_perftest_rxe_cm_json PROPERTIES LABELS lab FIXTURES_REQUIRED lab_perftest_rxe_cm)

# -D (duration) and -c UD on Soft-RoCE, one boot: rdmadiag <-> rdmadiag for every latency test
# and write-bw/send-bw with -D 4 (a quarter warm-up, 2 s measured), write-lat -D against
# ib_write_lat -D both ways; send-lat/send-bw -c UD rdmadiag <-> rdmadiag and send-lat -c UD
# against ib_send_lat -c UD both ways.
set(PT_DUR "-D 4")
set(steps)
set(mode_reports)
foreach(t write-lat read-lat send-lat)
  list(APPEND steps "${PT_RD} perftest ${t} ${PT_DEV} ${PT_DUR} --json ${t}-D.json|${PT_RD} perftest ${t} ${PT_DEV} ${PT_DUR} --json ${t}-D.json $LAB_SERVER_IP")
  list(APPEND mode_reports ${PT_LAB_OUT}/rxe_modes/client/${t}-D.json)
endforeach()
foreach(t write-bw send-bw)
  list(APPEND steps "${PT_RD} perftest ${t} ${PT_DEV} ${PT_DUR} -s 4096 --json ${t}-D.json|${PT_RD} perftest ${t} ${PT_DEV} ${PT_DUR} -s 4096 --json ${t}-D.json $LAB_SERVER_IP")
  list(APPEND mode_reports ${PT_LAB_OUT}/rxe_modes/client/${t}-D.json ${PT_LAB_OUT}/rxe_modes/server/${t}-D.json)
endforeach()
list(APPEND steps
  "ib_write_lat ${PT_DEV} -F ${PT_DUR}|${PT_RD} perftest write-lat ${PT_DEV} ${PT_DUR} --json write-lat-D-vs-ib.json $LAB_SERVER_IP"
  "${PT_RD} perftest write-lat ${PT_DEV} ${PT_DUR} --json write-lat-D-vs-ib.json|ib_write_lat ${PT_DEV} -F ${PT_DUR} $LAB_SERVER_IP"
  "${PT_RD} perftest send-lat ${PT_DEV} -c UD ${PT_LAT} --json send-lat-UD.json|${PT_RD} perftest send-lat ${PT_DEV} -c UD ${PT_LAT} --json send-lat-UD.json $LAB_SERVER_IP"
  "${PT_RD} perftest send-bw ${PT_DEV} -c UD -n 60 -s 1024 --json send-bw-UD.json|${PT_RD} perftest send-bw ${PT_DEV} -c UD -n 60 -s 1024 --json send-bw-UD.json $LAB_SERVER_IP"
  "ib_send_lat ${PT_DEV} -F -c UD ${PT_LAT}|${PT_RD} perftest send-lat ${PT_DEV} -c UD ${PT_LAT} --json send-lat-UD-vs-ib.json $LAB_SERVER_IP"
  "${PT_RD} perftest send-lat ${PT_DEV} -c UD ${PT_LAT} --json send-lat-UD-vs-ib.json|ib_send_lat ${PT_DEV} -F -c UD ${PT_LAT} $LAB_SERVER_IP")
list(APPEND mode_reports
  ${PT_LAB_OUT}/rxe_modes/client/write-lat-D-vs-ib.json ${PT_LAB_OUT}/rxe_modes/server/write-lat-D-vs-ib.json
  ${PT_LAB_OUT}/rxe_modes/client/send-lat-UD.json ${PT_LAB_OUT}/rxe_modes/server/send-lat-UD.json
  ${PT_LAB_OUT}/rxe_modes/client/send-bw-UD.json ${PT_LAB_OUT}/rxe_modes/server/send-bw-UD.json
  ${PT_LAB_OUT}/rxe_modes/client/send-lat-UD-vs-ib.json ${PT_LAB_OUT}/rxe_modes/server/send-lat-UD-vs-ib.json)
perftest_lab(rxe_modes STEPS ${steps})
add_test(NAME lab_perftest_rxe_modes_json
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/validate_json.py ${PROJECT_SOURCE_DIR}/docs/perftest-schema.json ${mode_reports}
          --exchange tcp --require-ok --min-results 1 --check-modes)
set_tests_properties(lab_perftest_rxe_modes_json PROPERTIES LABELS lab FIXTURES_REQUIRED lab_perftest_rxe_modes)

# -q / -b / --report_gbits (issue 18) on Soft-RoCE, one boot, against Debian's perftest both
# ways: write-bw -q 4 --report_gbits, send-bw -q 4, send-bw -b, write-bw -q 4 -b. Known flaky:
# rxe's go-back-N resend under load sometimes re-sends multi-packet WRITEs with shifted opcodes
# and the responder NAKs "invalid request" (perftest against itself too; docs/perftest.md).
# Its first two runs failed that way in 2 and 1 of the 8 steps (write-bw -q 4 steps only),
# with 4096-byte (4-packet) messages; single-packet messages (-s 1024) avoid that rxe path.
set(PT_MQ "-n 200 -s 1024")
set(mq_reports)
set(steps
  "ib_write_bw ${PT_DEV} -F ${PT_MQ} -q 4 --report_gbits|${PT_RD} perftest write-bw ${PT_DEV} ${PT_MQ} -q 4 --report_gbits --json wq4.json $LAB_SERVER_IP"
  "${PT_RD} perftest write-bw ${PT_DEV} ${PT_MQ} -q 4 --report_gbits --json wq4.json|ib_write_bw ${PT_DEV} -F ${PT_MQ} -q 4 --report_gbits $LAB_SERVER_IP"
  "ib_send_bw ${PT_DEV} -F ${PT_MQ} -q 4|${PT_RD} perftest send-bw ${PT_DEV} ${PT_MQ} -q 4 --json sq4.json $LAB_SERVER_IP"
  "${PT_RD} perftest send-bw ${PT_DEV} ${PT_MQ} -q 4 --json sq4.json|ib_send_bw ${PT_DEV} -F ${PT_MQ} -q 4 $LAB_SERVER_IP"
  "ib_send_bw ${PT_DEV} -F ${PT_MQ} -b|${PT_RD} perftest send-bw ${PT_DEV} ${PT_MQ} -b --json sb.json $LAB_SERVER_IP"
  "${PT_RD} perftest send-bw ${PT_DEV} ${PT_MQ} -b --json sb.json|ib_send_bw ${PT_DEV} -F ${PT_MQ} -b $LAB_SERVER_IP"
  "ib_write_bw ${PT_DEV} -F ${PT_MQ} -q 4 -b|${PT_RD} perftest write-bw ${PT_DEV} ${PT_MQ} -q 4 -b --json wq4b.json $LAB_SERVER_IP"
  "${PT_RD} perftest write-bw ${PT_DEV} ${PT_MQ} -q 4 -b --json wq4b.json|ib_write_bw ${PT_DEV} -F ${PT_MQ} -q 4 -b $LAB_SERVER_IP")
foreach(f wq4 sq4 sb wq4b)
  list(APPEND mq_reports ${PT_LAB_OUT}/multi_qp/client/${f}.json ${PT_LAB_OUT}/multi_qp/server/${f}.json)
endforeach()
perftest_lab(multi_qp STEPS ${steps})
add_test(NAME lab_perftest_multi_qp_json
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/validate_json.py ${PROJECT_SOURCE_DIR}/docs/perftest-schema.json ${mq_reports}
          --exchange tcp --require-ok --min-results 1)
set_tests_properties(lab_perftest_multi_qp_json PROPERTIES LABELS lab FIXTURES_REQUIRED lab_perftest_multi_qp)

# --cpu_util, -W and the completion latency of bandwidth runs (issue 18) on Soft-RoCE, one boot
# of about two minutes: write-bw -D 4 -q 2 --cpu_util perftest<->perftest twice (the run-to-run
# spread) and rdmadiag against perftest both ways; write-lat -D 4 --cpu_util with rdmadiag's
# client against perftest's server (with -W hw_counters/sent_pkts); -W with a counter rxe lacks.
# lab_bw_stats_check.py compares the figures with perftest's runs, the completion latency with
# the message rate and -W's figure with the lab's own counter reading around the step.
set(PT_BS "-D 4 -q 2 -s 1024 --cpu_util")
set(PT_BS_IB "ib_write_bw ${PT_DEV} -F ${PT_BS}")
set(PT_BS_RD "${PT_RD} perftest write-bw ${PT_DEV} ${PT_BS}")
set(PT_BS_W "'no such counter' ${PT_RD} perftest write-lat ${PT_DEV} -W counters/no_such_counter")
perftest_lab(bw_stats TIMEOUT 240 STEPS
  "${PT_BS_IB}|${PT_BS_IB} $LAB_SERVER_IP"
  "${PT_BS_IB}|${PT_BS_RD} --json wbw-2.json $LAB_SERVER_IP"
  "${PT_BS_RD} --json wbw-3.json|${PT_BS_IB} $LAB_SERVER_IP"
  "${PT_BS_IB}|${PT_BS_IB} $LAB_SERVER_IP"
  "ib_write_lat ${PT_DEV} -F -D 4 --cpu_util|${PT_RD} perftest write-lat ${PT_DEV} -D 4 --cpu_util -W hw_counters/sent_pkts --json wlat-5.json $LAB_SERVER_IP"
  "${PT_EXPECT} ${PT_BS_W}|${PT_EXPECT} ${PT_BS_W} $LAB_SERVER_IP")
add_test(NAME lab_perftest_bw_stats_check
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/lab_bw_stats_check.py ${PT_LAB_OUT}/bw_stats)
set_tests_properties(lab_perftest_bw_stats_check PROPERTIES LABELS lab FIXTURES_REQUIRED lab_perftest_bw_stats)
add_test(NAME lab_perftest_bw_stats_json
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/validate_json.py ${PROJECT_SOURCE_DIR}/docs/perftest-schema.json
          ${PT_LAB_OUT}/bw_stats/client/wbw-2.json ${PT_LAB_OUT}/bw_stats/server/wbw-3.json
          ${PT_LAB_OUT}/bw_stats/client/wlat-5.json --exchange tcp --require-ok --min-results 1 --check-modes)
set_tests_properties(lab_perftest_bw_stats_json PROPERTIES LABELS lab FIXTURES_REQUIRED lab_perftest_bw_stats)

# Upstream >= 6.28's parameter negotiation, over rdma_cm on soft-iWARP, between two rdmadiag peers
# announcing 6.29: agreed (both JSON reports say so), then -s 1024 against -s 2048 (both sides
# must name the difference). Then -R bandwidth against Debian's perftest on siw (issue 18): an
# rdmadiag send-bw server with ib_send_bw -R as client (perftest's iWARP send credits: without
# them ib_send_bw sent 59 of 60 SENDs and waited for ever), and write-bw -q 2 -R (one rdma_cm
# connection per QP) with ib_write_bw -R -q 2 as server.
set(PT_NEG "${PT_RD} perftest write-bw ${PT_CM_DEV} -n 60 --perftest-version 6.29")
perftest_lab(siw_cm_negotiation MODE siw TIMEOUT 240 STEPS
  "${PT_NEG} -s 1024 --json neg.json|${PT_NEG} -s 1024 --json neg.json $LAB_SERVER_IP"
  "${PT_EXPECT} 'size mismatch: local=1024, remote=2048' ${PT_NEG} -s 1024|${PT_EXPECT} 'size mismatch: local=2048, remote=1024' ${PT_NEG} -s 2048 $LAB_SERVER_IP"
  "${PT_RD} perftest send-bw ${PT_CM_DEV} -n 60 -s 4096 --json sbw-vs-ib.json|ib_send_bw ${PT_CM_DEV} -F -n 60 -s 4096 $LAB_SERVER_IP"
  "ib_write_bw ${PT_CM_DEV} -F -n 60 -s 4096 -q 2|${PT_RD} perftest write-bw ${PT_CM_DEV} -n 60 -s 4096 -q 2 --json wq2-vs-ib.json $LAB_SERVER_IP")
add_test(NAME lab_perftest_siw_cm_negotiation_json
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/validate_json.py ${PROJECT_SOURCE_DIR}/docs/perftest-schema.json
          ${PT_LAB_OUT}/siw_cm_negotiation/client/neg.json ${PT_LAB_OUT}/siw_cm_negotiation/server/neg.json
          --exchange rdma_cm --require-ok --negotiated)
set_tests_properties(lab_perftest_siw_cm_negotiation_json PROPERTIES LABELS lab FIXTURES_REQUIRED lab_perftest_siw_cm_negotiation)
add_test(NAME lab_perftest_siw_cm_bw_json
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/validate_json.py ${PROJECT_SOURCE_DIR}/docs/perftest-schema.json
          ${PT_LAB_OUT}/siw_cm_negotiation/server/sbw-vs-ib.json ${PT_LAB_OUT}/siw_cm_negotiation/client/wq2-vs-ib.json
          --exchange rdma_cm --require-ok --min-results 1)
set_tests_properties(lab_perftest_siw_cm_bw_json PROPERTIES LABELS lab FIXTURES_REQUIRED lab_perftest_siw_cm_negotiation)

# write-bw -q 4 -b against Debian's ib_write_bw both ways on Soft-RoCE (issue 18), one boot with
# step markers: ib<->ib, ib server / rdmadiag client, rdmadiag server / ib client, ib<->ib.
# lab_q4b_check.py: the capture of each rdmadiag step shows 4 QP pairs both ways (tshark, and
# rdmadiag analyze agreeing), ib_write_bw's printed QPNs are the ones written to, and the
# client's -b sum row equals the server's and is within [0.5, 1.5] of the bandwidth tshark's
# timestamps give for the step (a perftest side whose clock sampling failed counts 0, as
# perftest prints it). -s 1024: single-packet WRITEs (see the rxe go-back-N note above).
set(PT_Q4B "-q 4 -b -n 200 -s 1024")
add_test(NAME lab_perftest_q4b
  COMMAND ${PT_LAB_RUN} --mode rxe --out ${PT_LAB_OUT}/q4b --replace --timeout 200 --mark-steps -q
          --server "ib_write_bw ${PT_DEV} -F ${PT_Q4B}" --client "ib_write_bw ${PT_DEV} -F ${PT_Q4B} $LAB_SERVER_IP"
          --server "ib_write_bw ${PT_DEV} -F ${PT_Q4B}" --client "${PT_RD} perftest write-bw ${PT_DEV} ${PT_Q4B} $LAB_SERVER_IP"
          --server "${PT_RD} perftest write-bw ${PT_DEV} ${PT_Q4B}" --client "ib_write_bw ${PT_DEV} -F ${PT_Q4B} $LAB_SERVER_IP"
          --server "ib_write_bw ${PT_DEV} -F ${PT_Q4B}" --client "ib_write_bw ${PT_DEV} -F ${PT_Q4B} $LAB_SERVER_IP")
set_tests_properties(lab_perftest_q4b PROPERTIES LABELS lab FIXTURES_REQUIRED lab FIXTURES_SETUP lab_perftest_q4b
  TIMEOUT 260 RESOURCE_LOCK lab_vms)
add_test(NAME lab_perftest_q4b_check
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/lab_q4b_check.py ${PT_LAB_OUT}/q4b ${PT_RD})
set_tests_properties(lab_perftest_q4b_check PROPERTIES LABELS lab FIXTURES_REQUIRED lab_perftest_q4b)

# Pairing response flows with their requesters by PSN alone (no CM), 16 QPs between two hosts,
# 3 % loss on both VMs (so NAKs, resends and connections whose first requests never reach the
# capture point): Debian's ib_write_bw -b and ib_read_bw, one boot. lab_pairing_check.py checks
# each flow's pair against the connection perftest's printout and the first captured request's
# PSN name (tests/perftest/lab_pairs.py).
add_test(NAME lab_pairing_many_qps
  COMMAND ${PT_LAB_RUN} --mode rxe --out ${PT_LAB_OUT}/pairing --replace --timeout 300 --mark-steps -q
          --loss 3 --netem-on both
          --server "ib_write_bw ${PT_DEV} -F -q 16 -b -n 100 -s 1024" --client "ib_write_bw ${PT_DEV} -F -q 16 -b -n 100 -s 1024 $LAB_SERVER_IP"
          --server "ib_read_bw ${PT_DEV} -F -q 16 -n 50 -s 4096" --client "ib_read_bw ${PT_DEV} -F -q 16 -n 50 -s 4096 $LAB_SERVER_IP")
set_tests_properties(lab_pairing_many_qps PROPERTIES LABELS lab FIXTURES_REQUIRED lab FIXTURES_SETUP lab_pairing_many_qps
  TIMEOUT 360 RESOURCE_LOCK lab_vms)
add_test(NAME lab_pairing_many_qps_check
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/lab_pairing_check.py ${PT_RD} ${PT_LAB_OUT}/pairing/wire.pcap
          ${PT_LAB_OUT}/pairing/client/step1.stdout ${PT_LAB_OUT}/pairing/client/step2.stdout)
set_tests_properties(lab_pairing_many_qps_check PROPERTIES LABELS lab FIXTURES_REQUIRED lab_pairing_many_qps)

# The option audit (issue 18): every bandwidth option set run perftest<->perftest, perftest
# server / rdmadiag client and rdmadiag server / perftest client in one boot per stack;
# rdmadiag's header lines, title, table columns, #bytes/#iterations and peak must be what
# Debian's perftest prints in the same role, its BW within 6x of the two perftest<->perftest runs
# (tests/perftest/lab_audit.py prints the table; docs/perftest.md holds a run of it).
foreach(stack rxe siw)
  add_test(NAME lab_perftest_audit_${stack}
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/lab_audit.py run ${PT_RD} ${PT_LAB_OUT}/audit_${stack} ${stack})
  set_tests_properties(lab_perftest_audit_${stack} PROPERTIES
    LABELS lab FIXTURES_REQUIRED lab TIMEOUT 960 RESOURCE_LOCK lab_vms)
endforeach()

# The timing comparison is a measurement, not a pass/fail test: emulated VMs on a
# shared machine are too noisy for a 10 % bound to hold on every CI run. It is
# built only on request: cmake -DRDMADIAG_LAB_ACCEPTANCE=ON, then
#   ctest -R lab_perftest_acceptance   (docs/perftest.md has the numbers).
option(RDMADIAG_LAB_ACCEPTANCE "Add the perftest timing comparison to the lab tests (slow, a measurement)" OFF)
if(NOT RDMADIAG_LAB_ACCEPTANCE)
  return()
endif()
# Acceptance: ib_*_lat -s 2 vs rdmadiag -s 2, same iterations, alternated 5 times on one
# VM pair; tests/perftest/lab_compare.py prints the medians of t_typical (see docs/perftest.md).
set(steps)
foreach(round 1 2 3 4 5)
  foreach(v write read send)
    list(APPEND steps "ib_${v}_lat ${PT_DEV} -F -s 2 ${PT_LAT}|ib_${v}_lat ${PT_DEV} -F -s 2 ${PT_LAT} $LAB_SERVER_IP")
    list(APPEND steps "${PT_RD} perftest ${v}-lat ${PT_DEV} -s 2 ${PT_LAT}|${PT_RD} perftest ${v}-lat ${PT_DEV} -s 2 ${PT_LAT} $LAB_SERVER_IP")
  endforeach()
endforeach()
perftest_lab(acceptance TIMEOUT 3000 STEPS ${steps})
add_test(NAME lab_perftest_acceptance_compare
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/lab_compare.py ${PT_LAB_OUT}/acceptance)
set_tests_properties(lab_perftest_acceptance_compare PROPERTIES LABELS lab FIXTURES_REQUIRED lab_perftest_acceptance)

