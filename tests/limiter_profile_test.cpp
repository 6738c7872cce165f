// The limiters' profiles: every validation error names its parameter; the per-key limit on sub-windows;
// the constants translated once; live changes within an algorithm keep state.
#include <gtest/gtest.h>
