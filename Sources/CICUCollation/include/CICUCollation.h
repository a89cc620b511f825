#ifndef CICUCOLLATION_H
#define CICUCOLLATION_H

#include <stdint.h>

/// Writes the ICU root-collator sort key of a UTF-16 string into `buffer` and returns its length,
/// terminating zero included. If the key is longer than `capacity`, nothing useful is written and the
/// needed length is returned: call again with a larger buffer. Returns a negative value on error.
/// Sort keys compare with memcmp exactly as the collator orders the strings; they contain no zero byte
/// except the terminating one.
int32_t docstore_collation_sort_key(const uint16_t *utf16, int32_t length, uint8_t *buffer, int32_t capacity);

/// Compares two UTF-16 strings with the ICU root collator: -1, 0 or 1.
int32_t docstore_collation_compare(const uint16_t *a, int32_t a_length, const uint16_t *b, int32_t b_length);

/// The ICU library version and the root collator's version, e.g. "icu-72.1/collator-153.120";
/// indexes are rebuilt when it changes.
const char *docstore_collation_version(void);

#endif
