// Debian's libraries (libgloo, libopenblas, libabsl) and the torch wheel's
// (libtorch_cpu, libgomp) are not built with
// ThreadSanitizer, so TSan cannot see their synchronization and reports races
// inside them (Gloo's TCP pairs reading and writing one socket from two
// threads; exceptions Gloo rethrows on another thread; absl::Status and std::exception_ptr reference counts dropped in an
// uninstrumented library). These suppressions name only those libraries and
// their functions, never our code. .bazelrc's tsan config links tests
// statically (--dynamic_mode=off) so TSan finds this function in the binary.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

extern "C" const char* __tsan_default_suppressions() {
  return "race:libgloo.so.0\n"
         // Exceptions Gloo stores and rethrows on another thread: their
         // allocation and hand-off happen inside uninstrumented libgloo.
         "race:__cxa_allocate_exception\n"
         "race:gloo::Exception::~Exception\n"
         "race:std::__exception_ptr::exception_ptr::_M_release\n"
         // The last reference to a Status rep dropped on another thread:
         // Status::Unref calls UnrefNonInlined inside libabsl_status, whose
         // decrement TSan does not see, so the free it ends in looks like a
         // race with the other thread's (instrumented) increment. Matches
         // both functions.
         "race:absl::debian3::Status::Unref\n"
         // A Status message read, then the shared rep freed on another thread
         // after the reference count, kept inside libabsl_status, hit zero:
         // TSan sees neither the count nor the frames that free it.
         "race:absl::debian3::Status::message\n"
         // libtorch_cpu.so and libgomp.so.1 are not instrumented either. What
         // TSan cannot see there: the guards of torch's lazily built
         // singletons (the default CPU generator, oneDNN's kernel lists and
         // primitive cache, TorchScript's name mangler and the type and
         // rewrite-pattern caches serialization fills), and the barriers
         // between torch's kernels (at::native) on OpenMP worker threads and
         // the thread that frees their tensors. TSan sees torch's side of
         // these only through memcpy/new interceptors called from torch's
         // own functions, which these name. A race in ddpx's autograd hooks,
         // which run under libtorch's AccumulateGrad frames, is still
         // reported (tests/torch:tsan_sees_hook_races_test). Not
         // called_from_lib:libtorch_cpu.so: it would also drop the mutexes
         // torch locks, then report their unlocks in torch's header code.
         "race:at::detail::createCPUGenerator\n"
         "race:dnnl::impl::\n"
         "race:torch::jit::\n"
         "race:c10::ListType\n"
         "race:c10::QualifiedName\n"
         "race:at::native::\n"
         "called_from_lib:libopenblas.so.0\n"
         "called_from_lib:libabsl_synchronization.so.20220623\n"
         "called_from_lib:libabsl_status.so.20220623\n";
}

#if defined(__SANITIZE_THREAD__)
namespace {

// The programs a test starts (examples/train, examples/pg_only, ...) are
// TSan-built without this file. They inherit the test's environment, so
// the test hands them the same list as a file through TSAN_OPTIONS before
// main() runs; a program that already got one (a helper binary linking this
// file, started by a test) keeps it.
const bool kChildrenGetTheSuppressions = [] {
  const char* given = getenv("TSAN_OPTIONS");
  std::string options = given != nullptr ? given : "";
  if (options.find("suppressions=") != std::string::npos) return true;
  const char* dir = getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/tsan_suppressions." +
                           std::to_string(getpid());
  FILE* f = fopen(path.c_str(), "w");
  if (f == nullptr) {
    fprintf(stderr, "tsan_suppressions: cannot write %s: the programs this test starts "
                    "will report races inside Debian's libraries\n", path.c_str());
    return false;
  }
  fputs(__tsan_default_suppressions(), f);
  fclose(f);
  options += (options.empty() ? "" : ":") + std::string("suppressions=") + path;
  setenv("TSAN_OPTIONS", options.c_str(), 1);
  return true;
}();

}  // namespace
#endif
