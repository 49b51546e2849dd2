/* A minimal JSON reader for the fake NVML library (see json.h). */
#include "json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *text;
    size_t pos;
    char *err;
    size_t errlen;
    int depth;
} parser;

static jval *parse_value(parser *p);

static void fail(parser *p, const char *what) {
    if (p->err[0] == '\0') snprintf(p->err, p->errlen, "JSON error at offset %zu: %s", p->pos, what);
}

static void skip_ws(parser *p) {
    for (;;) {
        char c = p->text[p->pos];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') p->pos++;
        else return;
    }
}

static jval *new_val(jtype t) {
    jval *v = calloc(1, sizeof *v);
    if (v) v->type = t;
    return v;
}

static int append(jval *v, char *key, jval *item) {
    jval **items = realloc(v->items, (v->count + 1) * sizeof *items);
    if (!items) return 0;
    v->items = items;
    if (v->type == J_OBJ) {
        char **keys = realloc(v->keys, (v->count + 1) * sizeof *keys);
        if (!keys) return 0;
        v->keys = keys;
        v->keys[v->count] = key;
    }
    v->items[v->count++] = item;
    return 1;
}

static void put_utf8(char *out, size_t *n, unsigned cp) {
    if (cp < 0x80) {
        out[(*n)++] = (char)cp;
    } else if (cp < 0x800) {
        out[(*n)++] = (char)(0xC0 | (cp >> 6));
        out[(*n)++] = (char)(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out[(*n)++] = (char)(0xE0 | (cp >> 12));
        out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*n)++] = (char)(0x80 | (cp & 0x3F));
    } else {
        out[(*n)++] = (char)(0xF0 | (cp >> 18));
        out[(*n)++] = (char)(0x80 | ((cp >> 12) & 0x3F));
        out[(*n)++] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[(*n)++] = (char)(0x80 | (cp & 0x3F));
    }
}

static int hex4(parser *p, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p->text[p->pos + (size_t)i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return 0;
    }
    p->pos += 4;
    *out = v;
    return 1;
}

static char *parse_string(parser *p) {
    if (p->text[p->pos] != '"') {
        fail(p, "expected a string");
        return NULL;
    }
    p->pos++;
    /* Decoded text is never longer than the source (\uXXXX is 6 bytes for at most 4). */
    size_t start = p->pos, n = 0;
    const char *end = p->text + start;
    while (*end && *end != '"') end += (*end == '\\' && end[1]) ? 2 : 1;
    char *out = malloc((size_t)(end - (p->text + start)) + 1);
    if (!out) {
        fail(p, "out of memory");
        return NULL;
    }
    for (;;) {
        char c = p->text[p->pos];
        if (c == '\0') {
            fail(p, "unterminated string");
            free(out);
            return NULL;
        }
        if (c == '"') {
            p->pos++;
            break;
        }
        if ((unsigned char)c < 0x20) {
            fail(p, "control character in string");
            free(out);
            return NULL;
        }
        if (c != '\\') {
            out[n++] = c;
            p->pos++;
            continue;
        }
        p->pos++;
        char e = p->text[p->pos++];
        switch (e) {
            case '"': out[n++] = '"'; break;
            case '\\': out[n++] = '\\'; break;
            case '/': out[n++] = '/'; break;
            case 'b': out[n++] = '\b'; break;
            case 'f': out[n++] = '\f'; break;
            case 'n': out[n++] = '\n'; break;
            case 'r': out[n++] = '\r'; break;
            case 't': out[n++] = '\t'; break;
            case 'u': {
                unsigned cp;
                if (!hex4(p, &cp)) {
                    fail(p, "bad \\u escape");
                    free(out);
                    return NULL;
                }
                if (cp >= 0xD800 && cp < 0xDC00 && p->text[p->pos] == '\\' && p->text[p->pos + 1] == 'u') {
                    unsigned lo;
                    p->pos += 2;
                    if (!hex4(p, &lo) || lo < 0xDC00 || lo > 0xDFFF) {
                        fail(p, "bad surrogate pair");
                        free(out);
                        return NULL;
                    }
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                }
                put_utf8(out, &n, cp);
                break;
            }
            default:
                fail(p, "unknown escape");
                free(out);
                return NULL;
        }
    }
    out[n] = '\0';
    return out;
}

static jval *parse_container(parser *p, jtype type) {
    char close = type == J_OBJ ? '}' : ']';
    jval *v = new_val(type);
    if (!v) {
        fail(p, "out of memory");
        return NULL;
    }
    p->pos++; /* the opening bracket */
    skip_ws(p);
    if (p->text[p->pos] == close) {
        p->pos++;
        return v;
    }
    for (;;) {
        char *key = NULL;
        skip_ws(p);
        if (type == J_OBJ) {
            key = parse_string(p);
            if (!key) break;
            skip_ws(p);
            if (p->text[p->pos] != ':') {
                fail(p, "expected ':'");
                free(key);
                break;
            }
            p->pos++;
        }
        jval *item = parse_value(p);
        if (!item || !append(v, key, item)) {
            free(key);
            json_free(item);
            fail(p, "bad member");
            break;
        }
        skip_ws(p);
        char c = p->text[p->pos];
        if (c == ',') {
            p->pos++;
            continue;
        }
        if (c == close) {
            p->pos++;
            return v;
        }
        fail(p, type == J_OBJ ? "expected ',' or '}'" : "expected ',' or ']'");
        break;
    }
    json_free(v);
    return NULL;
}

static jval *parse_value(parser *p) {
    if (++p->depth > 64) {
        fail(p, "nested too deeply");
        return NULL;
    }
    skip_ws(p);
    jval *v = NULL;
    const char *s = p->text + p->pos;
    if (*s == '{') {
        v = parse_container(p, J_OBJ);
    } else if (*s == '[') {
        v = parse_container(p, J_ARR);
    } else if (*s == '"') {
        char *str = parse_string(p);
        if (str && (v = new_val(J_STR)) != NULL) v->string = str;
        else free(str);
    } else if (strncmp(s, "true", 4) == 0 || strncmp(s, "false", 5) == 0) {
        v = new_val(J_BOOL);
        if (v) v->boolean = *s == 't';
        p->pos += *s == 't' ? 4 : 5;
    } else if (strncmp(s, "null", 4) == 0) {
        v = new_val(J_NULL);
        p->pos += 4;
    } else if (*s == '-' || (*s >= '0' && *s <= '9')) {
        char *end;
        double d = strtod(s, &end);
        if (end == s) {
            fail(p, "bad number");
        } else if ((v = new_val(J_NUM)) != NULL) {
            v->number = d;
            p->pos += (size_t)(end - s);
        }
    } else {
        fail(p, "unexpected character");
    }
    p->depth--;
    return v;
}

jval *json_parse(const char *text, char *err, size_t errlen) {
    parser p = {text, 0, err, errlen, 0};
    err[0] = '\0';
    jval *v = parse_value(&p);
    if (v) {
        skip_ws(&p);
        if (text[p.pos] != '\0') {
            fail(&p, "trailing characters after the document");
            json_free(v);
            return NULL;
        }
    }
    return v;
}

void json_free(jval *v) {
    if (!v) return;
    for (size_t i = 0; i < v->count; i++) {
        json_free(v->items[i]);
        if (v->keys) free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->string);
    free(v);
}

const jval *json_get(const jval *v, const char *key) {
    if (!v || v->type != J_OBJ) return NULL;
    for (size_t i = 0; i < v->count; i++)
        if (strcmp(v->keys[i], key) == 0) return v->items[i];
    return NULL;
}

const jval *json_at(const jval *v, size_t i) {
    if (!v || v->type != J_ARR || i >= v->count) return NULL;
    return v->items[i];
}
