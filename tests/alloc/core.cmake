# tests/alloc/core.cmake: the cost of the core's slow paths (issue "server speed").
alloc_test(alloc_debug_cost SOURCES alloc/debug_cost.c PRELOAD TIMEOUT 120)
if(ALLOC_HAVE_LARDER)
  set_property(TEST alloc_debug_cost alloc_debug_cost.preload APPEND PROPERTY ENVIRONMENT "LARDER_DEBUG=1")
endif()
