// Debian's libraries (libgloo, libopenblas, libabsl) are not built with
// ThreadSanitizer, so TSan cannot see their synchronization and reports races
// inside them. These suppressions name only those libraries, never our code.
extern "C" const char* __tsan_default_suppressions() {
  return "called_from_lib:libgloo.so\n"
         "race:libgloo.so\n"
         "called_from_lib:libopenblas.so\n"
         "called_from_lib:libabsl_synchronization.so\n"
         "called_from_lib:libabsl_status.so\n";
}
