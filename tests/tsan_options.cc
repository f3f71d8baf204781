// Prints the TSAN_OPTIONS a shell test hands to the programs it starts
// (examples/train, ...), so that their reports inside Debian's
// uninstrumented libraries are suppressed as in every C++ test: under
// --config=tsan, tsan_suppressions.cc has written the list to a file and
// named it in this process's TSAN_OPTIONS before main(); in other builds
// there is nothing to print.
//
//   opts=$(tests/tsan_options) && [ -n "$opts" ] && export TSAN_OPTIONS="$opts"
#include <cstdio>
#include <cstdlib>

int main() {
#if defined(__SANITIZE_THREAD__)
  const char* options = std::getenv("TSAN_OPTIONS");
  if (options != nullptr) std::puts(options);
#endif
  return 0;
}
