// The name a kernel is known by across two runs. A kernel's demangled name carries things that
// change without the kernel being another one: template arguments (a tile size, a functor type),
// anonymous-namespace and lambda decorations, the return type, the parameter list, and ordinals a
// code generator numbers its kernels with. `diff` pairs kernels by the name without them, so a
// re-tuned template reads as a changed kernel, not as one removed and one added.
#pragma once

#include <string>
#include <string_view>

namespace attnprof {

// "attnprof::kernels::flash::flash_fwd_kernel" from
// "void attnprof::kernels::flash::flash_fwd_kernel<Traits<64, 128>, true>(Params)". In order:
//   - a mangled name (_Z...) is demangled first, so a trace that kept it pairs with one that did not;
//   - everything inside <...>, (...), {...} and [...] is dropped: template arguments, parameters,
//     lambdas ({lambda(int)#1}, [lambda() (instance 2)]) and "(anonymous namespace)";
//   - the return type ("void ") and the empty scopes left behind ("a::::b") go;
//   - the ordinal Triton/Inductor appends to a kernel (triton_poi_fused_add_0) goes: it numbers
//     kernels in the order they were generated, so one new kernel renumbers the rest.
std::string normalize_kernel_name(std::string_view name);

}  // namespace attnprof
