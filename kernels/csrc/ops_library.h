// The torch op namespace this build registers into. Each instruction-set variant of the library is
// compiled with -DAE_OPS_NS=agent_engine_<variant> (kernels/isa.py), so several variants can be loaded
// in one process (the tests compare them) without their ops colliding.
#pragma once

#include <torch/library.h>

#ifndef AE_OPS_NS
#define AE_OPS_NS agent_engine
#endif

// The indirection expands AE_OPS_NS before TORCH_LIBRARY pastes and stringifies it.
#define AE_LIBRARY_EXPANDED(ns, m) TORCH_LIBRARY(ns, m)
#define AE_LIBRARY_IMPL_EXPANDED(ns, m) TORCH_LIBRARY_IMPL(ns, CPU, m)
#define AE_LIBRARY(m) AE_LIBRARY_EXPANDED(AE_OPS_NS, m)
#define AE_LIBRARY_IMPL(m) AE_LIBRARY_IMPL_EXPANDED(AE_OPS_NS, m)
