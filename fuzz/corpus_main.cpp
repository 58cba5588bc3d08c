// A plain driver for the parser fuzz targets, so gcc (and the ASan+UBSan build of CI) runs
// them without clang:
//   <target>_driver [--mutate N] [--seed S] FILE|DIR ...
// Runs every file given (the committed corpus), then N inputs made from random corpus files
// by byte-level mutations (flip, overwrite, insert, erase, duplicate a range, splice two
// files) -- a small stand-in for libFuzzer's mutator, without its coverage guidance. Prints
// the seed; an invariant failure aborts (the target's fuzz_check.hpp).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

using Bytes = std::vector<std::uint8_t>;

Bytes read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

Bytes mutate(const std::vector<Bytes>& corpus, std::mt19937_64& rng) {
  Bytes in = corpus.empty() ? Bytes{} : corpus[rng() % corpus.size()];
  static const char* const tokens[] = {"=", "\n", "[", "]", "\"", ",", "{", "}", "-1", "0", "1e999",
                                       "4294967296", "[[job]]", "#", ":", "."};
  const int n = 1 + int(rng() % 8);
  for (int k = 0; k < n; ++k) {
    const std::size_t at = in.empty() ? 0 : rng() % (in.size() + 1);
    switch (rng() % 7) {
      case 0: if (at < in.size()) in[at] ^= std::uint8_t(1u << (rng() % 8)); break;
      case 1: if (at < in.size()) in[at] = std::uint8_t(rng()); break;
      case 2: in.insert(in.begin() + at, std::uint8_t(rng())); break;
      case 3: if (at < in.size()) in.erase(in.begin() + at, in.begin() + at + std::min<std::size_t>(in.size() - at, 1 + rng() % 16)); break;
      case 4: {  // duplicate a range
        if (at >= in.size()) break;
        const std::size_t len = std::min<std::size_t>(in.size() - at, 1 + rng() % 64);
        Bytes r(in.begin() + at, in.begin() + at + len);
        in.insert(in.begin() + rng() % (in.size() + 1), r.begin(), r.end());
        break;
      }
      case 5: {  // splice the tail of another file
        if (corpus.empty()) break;
        const Bytes& o = corpus[rng() % corpus.size()];
        const std::size_t from = o.empty() ? 0 : rng() % o.size();
        in.resize(at);
        in.insert(in.end(), o.begin() + from, o.end());
        break;
      }
      default: {  // a token of the text formats
        const std::string t = tokens[rng() % std::size(tokens)];
        in.insert(in.begin() + at, t.begin(), t.end());
        break;
      }
    }
  }
  return in;
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t seed = 1, mutations = 0;
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--mutate" && i + 1 < argc) mutations = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--seed" && i + 1 < argc) seed = std::strtoull(argv[++i], nullptr, 10);
    else paths.push_back(a);
  }
  std::vector<Bytes> corpus;
  for (const auto& p : paths) {
    if (std::filesystem::is_directory(p)) {
      for (const auto& e : std::filesystem::directory_iterator(p))
        if (e.is_regular_file()) corpus.push_back(read_file(e.path()));
    } else {
      corpus.push_back(read_file(p));
    }
  }
  std::printf("fuzz driver: seed %llu, %zu corpus inputs, %llu mutated inputs\n",
              (unsigned long long)seed, corpus.size(), (unsigned long long)mutations);
  std::fflush(stdout);
  for (const auto& in : corpus) LLVMFuzzerTestOneInput(in.data(), in.size());
  std::mt19937_64 rng(seed);
  for (std::uint64_t k = 0; k < mutations; ++k) {
    const Bytes in = mutate(corpus, rng);
    LLVMFuzzerTestOneInput(in.data(), in.size());
  }
  std::printf("%llu passed, 0 failed\n", (unsigned long long)(corpus.size() + mutations));
  return 0;
}
