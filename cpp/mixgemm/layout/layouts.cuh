// Both weight layouts' fragment code (LayoutOf<layout, Bits>), for the paths that read either.
#pragma once

#include "mixgemm/layout/sm80.cuh"
#include "mixgemm/layout/sm90.cuh"
