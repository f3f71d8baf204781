// The library load order build_defs/torch.bzl pins for executables that
// link libtorch, checked where it matters: which library the dynamic linker
// binds a name to. libtorch_cpu.so exports its own Gloo under Debian
// libgloo's names and MKL's Fortran BLAS under OpenBLAS's names; the first
// library in load order wins every such name for the whole process.
// This binary is linked like //examples/torch:train (torch_cc_test adds the
// same link flags) and uses Gloo and OpenBLAS as the trainer does.
#include <cblas.h>
#include <dlfcn.h>

#include <string>

#include "gloo/rendezvous/context.h"
#include "gtest/gtest.h"

namespace {

// The file name of the library that the process-wide lookup binds `symbol`
// to, or "" if none defines it.
std::string library_defining(const char* symbol) {
  void* address = dlsym(RTLD_DEFAULT, symbol);
  if (address == nullptr) return "";
  Dl_info info{};
  if (dladdr(address, &info) == 0 || info.dli_fname == nullptr) return "?";
  return info.dli_fname;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

TEST(TorchLoadOrder, GlooNamesBindToDebiansLibgloo) {
  // The constructor ddpx's Gloo backend calls; libtorch_cpu.so defines the
  // same name for its newer Gloo, whose classes have other layouts.
  gloo::rendezvous::Context context(/*rank=*/0, /*size=*/1);
  EXPECT_EQ(context.size, 1);
  const std::string lib = library_defining("_ZN4gloo10rendezvous7ContextC1Eiii");
  EXPECT_NE(lib.find("libgloo.so"), std::string::npos)
      << "gloo::rendezvous::Context::Context(int, int, int) binds to " << lib
      << ": libgloo.so.0 must load before libtorch_cpu.so (build_defs/torch.bzl)";
}

TEST(TorchLoadOrder, FortranBlasBindsToTorchsMklAndCblasToOpenBlas) {
  // torch's own GEMMs call sgemm_: they must reach torch's MKL, not OpenBLAS.
  const std::string sgemm = library_defining("sgemm_");
  EXPECT_TRUE(ends_with(sgemm, "libtorch_cpu.so"))
      << "sgemm_ binds to " << sgemm
      << ": libtorch_cpu.so must load before libopenblas (build_defs/torch.bzl)";
  // ddpx's PowerSGD and MLP call cblas_sgemm, which only OpenBLAS exports.
  const std::string cblas = library_defining("cblas_sgemm");
  EXPECT_NE(cblas.find("libopenblas"), std::string::npos) << "cblas_sgemm binds to " << cblas;
  const float a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
  float c[4] = {};
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2);
  EXPECT_EQ(c[0], 19.0f);
  EXPECT_EQ(c[3], 50.0f);
}

}  // namespace
