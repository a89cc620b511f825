#ifndef CJAVASCRIPTCORE_SHIM_H
#define CJAVASCRIPTCORE_SHIM_H
// JavaScriptCore's C API: Debian's libjavascriptcoregtk-4.1 on Linux (pkg-config
// javascriptcoregtk-4.1), the system JavaScriptCore framework on Apple platforms. Both ship the
// same public header, JavaScriptCore/JavaScript.h.
#include <stdbool.h>
#include <JavaScriptCore/JavaScript.h>

// Declared in JavaScriptCore's private header JSContextRefPrivate.h, which neither SDK ships, and
// exported by both libraries: a context group's watchdog. Once JavaScript entered from the C API
// has run for `limit` seconds of CPU time, `callback` is asked whether to stop it; returning true
// throws an uncatchable termination exception out of the running script. Returning false lets it
// run on, and the callback is asked again only if it set a new limit itself.
typedef bool (*JSShouldTerminateCallback)(JSContextRef ctx, void *context);
JS_EXPORT void JSContextGroupSetExecutionTimeLimit(JSContextGroupRef group, double limit,
                                                   JSShouldTerminateCallback callback, void *context);
JS_EXPORT void JSContextGroupClearExecutionTimeLimit(JSContextGroupRef group);
#endif
