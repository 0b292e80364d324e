#pragma once
// Programmatic dependent launch (sm_90+). A kernel launched with the
// cudaLaunchAttributeProgrammaticStreamSerialization attribute may start while the previous
// kernel in its stream is still running; it must call grid_dependency_wait() before it touches
// anything that kernel writes (griddepcontrol.wait returns once the previous grid has completed
// and its memory is visible). Work that does not depend on it -- streaming a layer's weights --
// overlaps the previous kernel's tail and the launch latency. grid_launch_dependents() lets the
// next such kernel start launching early. Both are no-ops without a dependency, and on older
// architectures (where the attribute is not set).

#include "cute_gemm/arch/config_arch.hpp"

namespace cute_gemm {

CG_DEVICE void grid_dependency_wait() {
#if defined(CG_ARCH_SM90_ENABLED)
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

CG_DEVICE void grid_launch_dependents() {
#if defined(CG_ARCH_SM90_ENABLED)
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

}  // namespace cute_gemm
