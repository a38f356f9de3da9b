/* Old name of mla/plugin_abi.h (the C ABI of backend plugins), kept so that
 * plugins written against 0.1 still build. It will be removed in the next
 * release: include mla/plugin_abi.h. */
#ifndef MLA_PLUGIN_H_FORWARD
#define MLA_PLUGIN_H_FORWARD
#include "mla/plugin_abi.h"
#endif
