// JavaScriptCore contexts alive at exit, as DocStoreJavaScript's per-thread contexts are: LeakSanitizer
// reports blocks that JavaScriptCore allocated for them, referenced only from its own heap (memory it
// maps itself, which LeakSanitizer does not scan). Released contexts leave nothing: `lsan-proofs.sh`
// runs both.
#include <JavaScriptCore/JavaScript.h>
#include <stdio.h>
#include <string.h>

static JSGlobalContextRef kept[8];

int main(int argc, char **argv) {
    int release = argc > 1 && strcmp(argv[1], "release") == 0;
    for (int i = 0; i < 8; i++) {
        JSGlobalContextRef context = JSGlobalContextCreate(NULL);
        JSStringRef source = JSStringCreateWithUTF8CString("function map(doc) { return JSON.stringify({id: doc}); } map('x').length");
        JSEvaluateScript(context, source, NULL, NULL, 1, NULL);
        JSStringRelease(source);
        if (release) JSGlobalContextRelease(context); else kept[i] = context;
    }
    printf("%s 8 contexts\n", release ? "released" : "kept");
    return 0;
}
