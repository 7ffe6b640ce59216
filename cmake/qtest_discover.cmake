# Lists the test functions of a QtTest executable (EXE -functions) and writes one ctest entry per function to OUT, so
# that each function passes, fails or is skipped on its own: a QSKIP (missing data, no X server) is reported by ctest as
# "Skipped", never as passed. Run after each build of EXE (tests/demo/CMakeLists.txt).
#   -D EXE=... -D OUT=... -D PREFIX=demo:engine -D LABELS=demo -D ENV=VAR=value;VAR=value
execute_process(COMMAND ${CMAKE_COMMAND} -E env ASAN_OPTIONS=detect_leaks=0 QT_QPA_PLATFORM=offscreen ${EXE} -functions
                OUTPUT_VARIABLE listing ERROR_VARIABLE errors RESULT_VARIABLE rc)
if (NOT rc EQUAL 0)
    message(FATAL_ERROR "${EXE} -functions failed (${rc}): ${errors}")
endif()
string(REPLACE "\n" ";" lines "${listing}")
set(content "")
foreach(line IN LISTS lines)
    string(STRIP "${line}" line)
    if (line MATCHES "^([A-Za-z_][A-Za-z0-9_]*)\\(\\)$")
        set(fn "${CMAKE_MATCH_1}")
        string(APPEND content "add_test([=[${PREFIX}:${fn}]=] [=[${EXE}]=] ${fn})\n")
        string(APPEND content "set_tests_properties([=[${PREFIX}:${fn}]=] PROPERTIES LABELS [=[${LABELS}]=] "
                              "SKIP_REGULAR_EXPRESSION [=[SKIP   : ]=] FAIL_REGULAR_EXPRESSION [=[FAIL!  : ]=] "
                              "ENVIRONMENT [=[${ENV}]=])\n")
    endif()
endforeach()
if (content STREQUAL "")
    message(FATAL_ERROR "${EXE} -functions listed no test functions")
endif()
file(WRITE "${OUT}" "${content}")
