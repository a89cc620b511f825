// A thin C layer over ICU's root collator. Swift cannot import the system ICU headers in a module that
// also sees Foundation (Foundation ships its own ICU module), so the ICU calls live here behind plain C
// functions. Linux links libicui18n/libicuuc (libicu-dev); Apple platforms link the system libicucore.
#include "CICUCollation.h"

#include <pthread.h>
#include <stdio.h>

#if defined(__APPLE__) || defined(DOCSTORE_DECLARE_ICU)
// Apple platforms ship ICU as the system library libicucore, with its stable C API exported under
// unversioned names, but their SDKs carry no ICU headers. These are the declarations of the few
// functions and types used here, as ICU's public C API documents them (ucol.h, uversion.h, utypes.h).
// `DOCSTORE_DECLARE_ICU` lets a Linux build check that this branch compiles (.ci/run does).
typedef uint16_t UChar;
typedef int UErrorCode;
typedef struct UCollator UCollator;
typedef enum { UCOL_EQUAL = 0, UCOL_GREATER = 1, UCOL_LESS = -1 } UCollationResult;
typedef uint8_t UVersionInfo[4];
#define U_ZERO_ERROR 0
#define U_FAILURE(x) ((x) > U_ZERO_ERROR)
#define U_MAX_VERSION_STRING_LENGTH 20
UCollator *ucol_open(const char *locale, UErrorCode *status);
void ucol_close(UCollator *coll);
int32_t ucol_getSortKey(const UCollator *coll, const UChar *source, int32_t sourceLength, uint8_t *result,
                        int32_t resultLength);
UCollationResult ucol_strcoll(const UCollator *coll, const UChar *source, int32_t sourceLength, const UChar *target,
                              int32_t targetLength);
void ucol_getVersion(const UCollator *coll, UVersionInfo info);
void u_getVersion(UVersionInfo versionArray);
void u_versionToString(const UVersionInfo versionArray, char *versionString);
#else
#include <unicode/ucol.h>
#include <unicode/uversion.h>
#endif

// One collator per thread: a UCollator must not be used from two threads at once. A thread's collator
// is closed when the thread ends (the key's destructor): threads of Dispatch's pool come and go, and
// each would otherwise leave its collator behind (LeakSanitizer found them, Docs/Reliability.md).
static _Thread_local UCollator *thread_collator = NULL;
static pthread_key_t collator_key;
static pthread_once_t collator_key_once = PTHREAD_ONCE_INIT;

static void close_collator(void *collator) {
    ucol_close((UCollator *)collator);
}

static void make_collator_key(void) {
    pthread_key_create(&collator_key, close_collator);
}

static UCollator *collator(void) {
    if (thread_collator == NULL) {
        UErrorCode status = U_ZERO_ERROR;
        UCollator *opened = ucol_open("", &status);  // root locale: the UCA order CouchDB uses
        if (U_FAILURE(status) || opened == NULL) {
            return NULL;
        }
        pthread_once(&collator_key_once, make_collator_key);
        pthread_setspecific(collator_key, opened);
        thread_collator = opened;
    }
    return thread_collator;
}

int32_t docstore_collation_sort_key(const uint16_t *utf16, int32_t length, uint8_t *buffer, int32_t capacity) {
    UCollator *c = collator();
    if (c == NULL) {
        return -1;
    }
    return ucol_getSortKey(c, (const UChar *)utf16, length, buffer, capacity);
}

int32_t docstore_collation_compare(const uint16_t *a, int32_t a_length, const uint16_t *b, int32_t b_length) {
    UCollator *c = collator();
    if (c == NULL) {
        return 0;
    }
    switch (ucol_strcoll(c, (const UChar *)a, a_length, (const UChar *)b, b_length)) {
    case UCOL_LESS: return -1;
    case UCOL_GREATER: return 1;
    default: return 0;
    }
}

static char version_text[96];
static pthread_once_t version_once = PTHREAD_ONCE_INIT;

static void make_version(void) {
    UCollator *c = collator();
    UVersionInfo icu, coll;
    char icu_text[U_MAX_VERSION_STRING_LENGTH], coll_text[U_MAX_VERSION_STRING_LENGTH];
    u_getVersion(icu);
    u_versionToString(icu, icu_text);
    coll_text[0] = 0;
    if (c != NULL) {
        ucol_getVersion(c, coll);
        u_versionToString(coll, coll_text);
    }
    snprintf(version_text, sizeof version_text, "icu-%s/collator-%s", icu_text, coll_text);
}

const char *docstore_collation_version(void) {
    pthread_once(&version_once, make_version);
    return version_text;
}
