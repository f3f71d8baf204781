// What a test needs to know about a sanitizer build (--config=asan, tsan):
// it runs several times slower, so a test whose deadlines bound how long
// real ops take (timeouts it provokes, the slack after them) scales them
// with kSlowdown instead of failing on a loaded machine.
#ifndef DDPX_TESTS_SANITIZERS_H_
#define DDPX_TESTS_SANITIZERS_H_

namespace ddpx {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitized = true;
inline constexpr int kSlowdown = 4;
#else
inline constexpr bool kSanitized = false;
inline constexpr int kSlowdown = 1;
#endif

}  // namespace ddpx

#endif  // DDPX_TESTS_SANITIZERS_H_
