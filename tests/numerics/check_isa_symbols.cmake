# Fails if the x86-64-v3 kernel object defines any external symbol other than its entry
# points. Anything else (an out-of-line inline function, a std:: template instance) could be
# picked by the linker for baseline code and run AVX2 instructions on a CPU without them.
# Usage: cmake -DNM=<nm> -DOBJECTS=<list of object files> -P check_isa_symbols.cmake
set(found FALSE)
foreach(obj IN LISTS OBJECTS)
  if(NOT obj MATCHES "(reduce|repro|minifloat|bitpack)_x86_64_v3")
    continue()
  endif()
  set(found TRUE)
  execute_process(COMMAND ${NM} -C --defined-only --extern-only ${obj}
                  OUTPUT_VARIABLE symbols RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "nm failed on ${obj}")
  endif()
  string(REPLACE "\n" ";" lines "${symbols}")
  foreach(line IN LISTS lines)
    if(line STREQUAL "" OR line MATCHES "DW\\.ref\\.__gxx_personality_v0$"
       OR line MATCHES " T inc::numerics::detail::(reduce|divide|sum_counted)_x86_64_v3\\("
       OR line MATCHES " T inc::numerics::repro::detail::(scan|encode|decode)_x86_64_v3\\("
       OR line MATCHES " T inc::numerics::detail::encode_(minifloat|mxint8)_x86_64_v3\\("
       OR line MATCHES " T inc::numerics::detail::(encode_minifloat_counted|f32_to_half_counted|table_to_f32|fp8_to_f32|abs_max_bits)_x86_64_v3\\("
       OR line MATCHES " T inc::numerics::detail::(half_to_f32|f32_to_half)_x86_64_v3\\("
       OR line MATCHES " T inc::numerics::detail::(pack|unpack)_codes_x86_64_v3\\(")
      continue()
    endif()
    message(FATAL_ERROR "unexpected external symbol in ${obj}:\n  ${line}")
  endforeach()
endforeach()
if(NOT found)
  message(STATUS "no x86-64-v3 kernel object in this build; nothing to check")
endif()
