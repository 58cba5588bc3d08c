// libFuzzer target for training model files (`inc model iteration FILE`, models/*.toml):
// parse_training_config.
// Invariant: the parse succeeds or throws inc::Error(config) with a message (file, line, key).
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_check.hpp"
#include "sim/analytical.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  inc::fuzz::parses([&] { (void)inc::sim::parse_training_config(inc::fuzz::text_of(data, size), "model.toml"); });
  return 0;
}
