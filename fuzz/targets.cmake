# The fuzz targets: fuzz/<name>_fuzz.cpp, what each links, and its corpus fuzz/corpus/<name>.
# Included by fuzz/CMakeLists.txt (libFuzzer, clang, INC_FUZZ=ON) and by tests/CMakeLists.txt
# (the plain drivers that ctest runs on the corpus under any compiler).
set(INC_FUZZ_TARGETS switch_packet store_server switch_topology testbed_spec sim_scenario sim_model tuning_json control_message)
set(INC_FUZZ_switch_packet_LIBS inc_switch)
set(INC_FUZZ_store_server_LIBS inc_transport)
set(INC_FUZZ_switch_topology_LIBS inc_switch)
set(INC_FUZZ_control_message_LIBS inc_control)
# Only the parser of the testbed (spec.cpp), not inc_testbed (the launcher and all of inc_api).
set(INC_FUZZ_testbed_spec_SOURCES ${PROJECT_SOURCE_DIR}/src/testbed/spec.cpp)
set(INC_FUZZ_testbed_spec_LIBS inc_sim)
set(INC_FUZZ_sim_scenario_LIBS inc_sim)
set(INC_FUZZ_sim_model_LIBS inc_sim)
# Only tuning.cpp, not inc_api.
set(INC_FUZZ_tuning_json_SOURCES ${PROJECT_SOURCE_DIR}/src/api/tuning.cpp)
set(INC_FUZZ_tuning_json_LIBS inc_schedule nlohmann_json::nlohmann_json fmt::fmt)

function(inc_fuzz_executable exe name)
  add_executable(${exe} ${PROJECT_SOURCE_DIR}/fuzz/${name}_fuzz.cpp ${INC_FUZZ_${name}_SOURCES} ${ARGN})
  target_include_directories(${exe} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/src
                             ${PROJECT_SOURCE_DIR}/include)
  target_link_libraries(${exe} PRIVATE ${INC_FUZZ_${name}_LIBS})
endfunction()
