/* A minimal JSON reader for the fake NVML library.
 *
 * Owns parsing one JSON document (the canonical machine form written by
 * `kubegpu machines export`) into a tree of jval nodes. It must not know
 * anything about NVML or machines; it accepts standard JSON only (no comments,
 * no trailing commas) and reports the byte offset of the first error.
 */
#ifndef KUBEGPU_FAKE_NVML_JSON_H
#define KUBEGPU_FAKE_NVML_JSON_H

#include <stddef.h>

typedef enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } jtype;

typedef struct jval {
    jtype type;
    int boolean;
    double number;
    char *string;          /* J_STR: NUL-terminated, escapes decoded (\uXXXX to UTF-8) */
    size_t count;          /* J_ARR / J_OBJ: number of items */
    struct jval **items;   /* J_ARR / J_OBJ: the values */
    char **keys;           /* J_OBJ: the keys, parallel to items */
} jval;

/* Parse text; on failure returns NULL and writes a message naming the offset into err. */
jval *json_parse(const char *text, char *err, size_t errlen);
void json_free(jval *v);

/* Object member by key, or NULL when absent or v is not an object. */
const jval *json_get(const jval *v, const char *key);
/* Array item, or NULL when out of range or v is not an array. */
const jval *json_at(const jval *v, size_t i);

#endif
