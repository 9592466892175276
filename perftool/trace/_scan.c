/* perftool.trace._scan: the fields perftool reads from a run of trace events, straight into columns.
 *
 * scan(piece) reads a comma-separated run of JSON event objects (what perftool.trace.decode cuts a
 * traceEvents array into) and returns, per event, its timestamp and duration as doubles, the index of
 * its (ph, name, cat, pid, tid) signature among the distinct raw signatures of the piece, its flow id
 * (an integer, or the span of another JSON value), the span of its args and the correlation id they hold (Kineto's
 * id of a launch and the device work it started: the top-level "correlation"). The distinct signatures
 * come back as the raw JSON bytes of their five values, for the caller to decode once each.
 *
 * It accepts only what msgspec's decoding of the same piece into perftool.trace.decode.RawEvent
 * accepts, and gives the same values. Anything it is not sure of (a duplicate or escaped key, a field
 * of an unexpected type, an integer past 18 digits, a number that over- or underflows, a lone surrogate,
 * malformed UTF-8, deep nesting) makes it return None, and the caller decodes the piece with msgspec,
 * which then decides. So the compiled path changes how fast a piece is read, never what it reads.
 *
 * slices(text, spans) and tails(text, spans, keys) cut many args out of a piece at once: whole, or each
 * from the first of the keys a reduction keeps (perftool.trace.columns); tail_groups(text, spans, keys) groups
 * them by those tails without making them.
 *
 * line_events(data, begin, end) and stat_value(stat) read a raw XSpace's (perftool.trace.xspace): the events of one
 * of its lines, and one stat's value, giving what the Python reader gives, or None where the bytes leave the schema,
 * for the Python reader to name where they break off.
 */
#define PY_SSIZE_T_CLEAN
#define _GNU_SOURCE /* memmem */
#include <Python.h>

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64        /* nesting inside an event beyond which msgspec decides */
#define MAX_INT_DIGITS 18   /* integers that surely fit an int64 */
#define MAX_NUMBER_CHARS 64 /* a timestamp or duration longer than this is left to msgspec */
#define EXACT_INT 9007199254740992LL /* 2^53: integers up to it are doubles exactly */

enum { F_PH, F_NAME, F_CAT, F_PID, F_TID, F_TS, F_DUR, F_ID, F_ARGS, N_FIELDS };
enum { ID_ABSENT = 0, ID_INT = 1, ID_OTHER = 2 }; /* ID_OTHER: a string or null, as its span */

typedef struct {
    const char *p;   /* the next byte to read */
    const char *end; /* one past the last byte */
} Cursor;

typedef struct {
    Py_ssize_t start, len; /* a value's raw span; len 0 when the field is absent */
} Span;

typedef struct {
    uint64_t hash;
    Span fields[5]; /* ph, name, cat, pid, tid */
    int32_t id;     /* -1: empty slot */
} Slot;

typedef struct {
    char *data;
    Py_ssize_t size, capacity;
} Column;

static inline int column_push(Column *c, const void *value, Py_ssize_t size) {
    if (c->size + size > c->capacity) {
        Py_ssize_t capacity = c->capacity ? c->capacity * 2 : 4096;
        while (capacity < c->size + size) capacity *= 2;
        char *data = realloc(c->data, (size_t)capacity);
        if (!data) return -1;
        c->data = data;
        c->capacity = capacity;
    }
    memcpy(c->data + c->size, value, (size_t)size);
    c->size += size;
    return 0;
}

static inline int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static inline void skip_space(Cursor *s) {
    const char *p = s->p, *end = s->end; /* locals: a byte read through a char may alias s, so s->p is reloaded */
    while (p < end && is_space(*p)) p++;
    s->p = p;
}

static inline int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* One UTF-8 sequence starting at a byte >= 0x80; 0 when it is malformed (overlong, a surrogate, past U+10FFFF). */
static int skip_utf8(Cursor *s) {
    const unsigned char *u = (const unsigned char *)s->p;
    Py_ssize_t left = s->end - s->p;
    if (u[0] >= 0xC2 && u[0] <= 0xDF) {
        if (left < 2 || (u[1] & 0xC0) != 0x80) return 0;
        s->p += 2;
        return 1;
    }
    if (u[0] >= 0xE0 && u[0] <= 0xEF) {
        if (left < 3 || (u[1] & 0xC0) != 0x80 || (u[2] & 0xC0) != 0x80) return 0;
        if (u[0] == 0xE0 && u[1] < 0xA0) return 0; /* overlong */
        if (u[0] == 0xED && u[1] >= 0xA0) return 0; /* a surrogate */
        s->p += 3;
        return 1;
    }
    if (u[0] >= 0xF0 && u[0] <= 0xF4) {
        if (left < 4 || (u[1] & 0xC0) != 0x80 || (u[2] & 0xC0) != 0x80 || (u[3] & 0xC0) != 0x80) return 0;
        if (u[0] == 0xF0 && u[1] < 0x90) return 0; /* overlong */
        if (u[0] == 0xF4 && u[1] >= 0x90) return 0; /* past U+10FFFF */
        s->p += 4;
        return 1;
    }
    return 0;
}

static unsigned char PLAIN[256]; /* ASCII a string holds as it is: not a quote, backslash or control character */

static void init_plain(void) {
    for (int c = 0x20; c < 0x80; c++) PLAIN[c] = c != '"' && c != '\\';
}

#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL

/* Whether any of a word's eight bytes is a quote, a backslash, a control character or not ASCII. */
static inline uint64_t special_bytes(uint64_t word) {
    uint64_t quote = word ^ (ONES * '"'), backslash = word ^ (ONES * '\\');
    return (((quote - ONES) & ~quote) | ((backslash - ONES) & ~backslash) | (word - ONES * 0x20) | word) & HIGHS;
}

/* A string at s->p (its opening quote) past its first eight bytes, or holding a special byte before its end. */
static int skip_long_string(Cursor *s, int *plain) {
    const char *p = s->p + 1, *end = s->end; /* locals: see skip_space */
    *plain = 1;
    while (p < end) {
        uint64_t word, special;
        while (end - p >= 8) { /* eight bytes at a time, up to the first special one */
            memcpy(&word, p, 8);
            special = special_bytes(word);
            if (special) {
#if defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
                p += __builtin_ctzll(special) / 8; /* the lowest flagged byte is always a special one */
#endif
                break;
            }
            p += 8;
        }
        while (p < end && PLAIN[(unsigned char)*p]) p++; /* the run of plain ASCII */
        if (p >= end) break;
        unsigned char c = (unsigned char)*p;
        if (c == '"') {
            s->p = p + 1;
            return 1;
        }
        if (c == '\\') {
            *plain = 0;
            if (end - p < 2) return 0;
            char e = p[1];
            if (e == 'u') {
                if (end - p < 6) return 0;
                int code = 0;
                for (int i = 2; i < 6; i++) {
                    int h = hex_value(p[i]);
                    if (h < 0) return 0;
                    code = code * 16 + h;
                }
                if (code >= 0xD800 && code <= 0xDFFF) return 0; /* pairs and lone halves: msgspec decides */
                p += 6;
            } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' ||
                       e == 't') {
                p += 2;
            } else {
                return 0;
            }
        } else if (c < 0x20) {
            return 0;
        } else if (c >= 0x80) {
            Cursor rest = {p, end};
            if (!skip_utf8(&rest)) return 0;
            p = rest.p;
        } else {
            p++;
        }
    }
    return 0; /* unterminated */
}

/* A string at s->p (its opening quote); sets *plain when it holds no escape. 0 when it is not one we accept. Most
 * are keys and short names: one word of eight bytes holds the closing quote, found without a call. */
static inline int skip_string(Cursor *s, int *plain) {
#if defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    const char *p = s->p + 1;
    if (s->end - p >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        uint64_t special = special_bytes(word);
        if (special) {
            int at = __builtin_ctzll(special) / 8;
            if (p[at] == '"') {
                s->p = p + at + 1;
                *plain = 1;
                return 1;
            }
        }
    }
#endif
    return skip_long_string(s, plain);
}

/* A JSON number at s->p; *integer tells whether it has no fraction or exponent, *digits its integer digits. */
static int skip_number(Cursor *s, int *integer, int *digits) {
    const char *p = s->p, *end = s->end; /* locals: see skip_space */
    if (p < end && *p == '-') p++;
    if (p >= end) return 0;
    const char *first = p;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        while (p < end && *p >= '0' && *p <= '9') p++;
    } else {
        return 0;
    }
    *digits = (int)(p - first);
    *integer = 1;
    if (p < end && *p == '.') {
        p++;
        if (p >= end || *p < '0' || *p > '9') return 0;
        while (p < end && *p >= '0' && *p <= '9') p++;
        *integer = 0;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (p >= end || *p < '0' || *p > '9') return 0;
        while (p < end && *p >= '0' && *p <= '9') p++;
        *integer = 0;
    }
    s->p = p;
    return 1;
}

static int skip_literal(Cursor *s, const char *word, Py_ssize_t len) {
    if (s->end - s->p < len || memcmp(s->p, word, (size_t)len) != 0) return 0;
    s->p += len;
    return 1;
}

/* Any JSON value, checked as msgspec checks one it skips. */
static int skip_value(Cursor *s, int depth) {
    if (s->p >= s->end) return 0;
    char c = *s->p;
    int plain, integer, digits;
    switch (c) {
    case '"':
        return skip_string(s, &plain);
    case '{':
    case '[': {
        if (depth >= MAX_DEPTH) return 0;
        char close = c == '{' ? '}' : ']';
        s->p++;
        skip_space(s);
        if (s->p < s->end && *s->p == close) {
            s->p++;
            return 1;
        }
        for (;;) {
            if (c == '{') {
                if (s->p >= s->end || *s->p != '"' || !skip_string(s, &plain)) return 0;
                skip_space(s);
                if (s->p >= s->end || *s->p != ':') return 0;
                s->p++;
                skip_space(s);
            }
            if (!skip_value(s, depth + 1)) return 0;
            skip_space(s);
            if (s->p >= s->end) return 0;
            if (*s->p == close) {
                s->p++;
                return 1;
            }
            if (*s->p != ',') return 0;
            s->p++;
            skip_space(s);
        }
    }
    case 't':
        return skip_literal(s, "true", 4);
    case 'f':
        return skip_literal(s, "false", 5);
    case 'n':
        return skip_literal(s, "null", 4);
    default:
        return skip_number(s, &integer, &digits);
    }
}

static const double POWERS_OF_TEN[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                       1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* A plain decimal (digits, a point, digits; no exponent) of at most 15 significant digits and 22 after the point,
 * as a double: the digits as an integer are a double exactly, and so is the power of ten, so one division rounds
 * correctly (Clinger's fast path). 0 where it does not apply. */
static int fast_decimal(const char *p, const char *end, double *out) {
    int negative = p < end && *p == '-';
    p += negative;
    uint64_t mantissa = 0;
    int digits = 0, after_point = -1;
    for (; p < end; p++) {
        if (*p == '.') {
            after_point = 0;
            continue;
        }
        if (*p < '0' || *p > '9') return 0; /* an exponent */
        mantissa = mantissa * 10 + (uint64_t)(*p - '0');
        if (mantissa) digits++;
        if (after_point >= 0) after_point++;
    }
    if (digits > 15 || after_point > 22) return 0;
    double value = (double)mantissa;
    if (after_point > 0) value /= POWERS_OF_TEN[after_point];
    *out = negative ? -value : value;
    return 1;
}

/* The number in [start, start + len) as a double, correctly rounded; 0 when it over- or underflows. */
static int parse_double(const char *start, Py_ssize_t len, double *out) {
    if (fast_decimal(start, start + len, out)) return 1;
    char text[MAX_NUMBER_CHARS + 1];
    if (len > MAX_NUMBER_CHARS) return 0;
    memcpy(text, start, (size_t)len);
    text[len] = '\0';
    errno = 0;
    char *stop;
    double value = strtod(text, &stop);
    if (errno != 0 || stop != text + len || !isfinite(value)) return 0;
    *out = value;
    return 1;
}

/* An integer already checked to have at most MAX_INT_DIGITS digits. */
static int64_t parse_int(const char *p, const char *end) {
    int negative = *p == '-';
    int64_t value = 0;
    for (p += negative; p < end; p++) value = value * 10 + (*p - '0');
    return negative ? -value : value;
}

/* A plain number of at most 15 digits (an integer, or digits, a point and digits: how profilers write times) read
 * in the one pass that finds its end, with the value the general path below gives it; 0 for any other (the general
 * path then reads it, from the start). */
static int short_decimal(Cursor *s, double *out) {
    const char *p = s->p, *end = s->end;
    int negative = p < end && *p == '-';
    p += negative;
    const char *first = p;
    uint64_t mantissa = 0;
    while (p < end && (unsigned char)(*p - '0') < 10) mantissa = mantissa * 10 + (uint64_t)(*p++ - '0');
    Py_ssize_t whole = p - first, fraction = 0;
    if (whole == 0 || (*first == '0' && whole > 1)) return 0;
    if (p < end && *p == '.') {
        const char *point = ++p;
        while (p < end && (unsigned char)(*p - '0') < 10) mantissa = mantissa * 10 + (uint64_t)(*p++ - '0');
        fraction = p - point;
        if (fraction == 0) return 0;
    }
    if ((p < end && (*p == 'e' || *p == 'E')) || whole + fraction > 15) return 0;
    if (fraction == 0) {
        int64_t value = (int64_t)mantissa; /* as parse_int: -0 is 0 */
        *out = (double)(negative ? -value : value);
    } else {
        double value = (double)mantissa / POWERS_OF_TEN[fraction]; /* as fast_decimal */
        *out = negative ? -value : value;
    }
    s->p = p;
    return 1;
}

/* A timestamp or duration: a JSON number, or a string that is exactly one (as Ascend tools write them). */
static int parse_time(Cursor *s, double *out) {
    int integer, digits, plain;
    if (short_decimal(s, out)) return 1;
    if (s->p < s->end && *s->p == '"') {
        const char *start = s->p;
        if (!skip_string(s, &plain) || !plain) return 0;
        Cursor inner = {start + 1, s->p - 1};
        if (!skip_number(&inner, &integer, &digits) || inner.p != inner.end) return 0;
        return parse_double(start + 1, s->p - start - 2, out);
    }
    const char *start = s->p;
    if (!skip_number(s, &integer, &digits)) return 0;
    if (!integer) return parse_double(start, s->p - start, out);
    if (digits > MAX_INT_DIGITS) return 0;
    int64_t value = parse_int(start, s->p);
    if (value > EXACT_INT || value < -EXACT_INT) return 0; /* past 2^53 a double rounds it: leave it to msgspec */
    *out = (double)value;
    return 1;
}

/* A pid or tid: a string or an integer that fits an int64. */
static int skip_int_or_string(Cursor *s) {
    int integer, digits, plain;
    if (s->p < s->end && *s->p == '"') return skip_string(s, &plain);
    return skip_number(s, &integer, &digits) && integer && digits <= MAX_INT_DIGITS;
}

static int field_of(const char *key, Py_ssize_t len) {
    switch (len) {
    case 2:
        if (key[0] == 'p' && key[1] == 'h') return F_PH;
        if (key[0] == 't' && key[1] == 's') return F_TS;
        if (key[0] == 'i' && key[1] == 'd') return F_ID;
        return -1;
    case 3:
        if (!memcmp(key, "cat", 3)) return F_CAT;
        if (!memcmp(key, "pid", 3)) return F_PID;
        if (!memcmp(key, "tid", 3)) return F_TID;
        if (!memcmp(key, "dur", 3)) return F_DUR;
        return -1;
    case 4:
        if (!memcmp(key, "name", 4)) return F_NAME;
        if (!memcmp(key, "args", 4)) return F_ARGS;
        return -1;
    default:
        return -1;
    }
}

/* A key a profiler writes, followed at once by its colon ("ph":), told from the next bytes without reading it as a
 * string: its field, with s->p past the colon; -2 for anything else, read by read_key. */
static inline int known_key(Cursor *s) {
    const char *p = s->p;
    if (s->end - p < 7) return -2; /* the longest, "name": and "args":, are seven bytes */
#define KEY(text, field)                                                                                               \
    if (!memcmp(p, text, sizeof(text) - 1)) {                                                                          \
        s->p = p + sizeof(text) - 1;                                                                                   \
        return field;                                                                                                  \
    }
    switch (p[1]) {
    case 'p':
        KEY("\"ph\":", F_PH)
        KEY("\"pid\":", F_PID)
        break;
    case 't':
        KEY("\"ts\":", F_TS)
        KEY("\"tid\":", F_TID)
        break;
    case 'n':
        KEY("\"name\":", F_NAME)
        break;
    case 'c':
        KEY("\"cat\":", F_CAT)
        break;
    case 'd':
        KEY("\"dur\":", F_DUR)
        break;
    case 'a':
        KEY("\"args\":", F_ARGS)
        break;
    case 'i':
        KEY("\"id\":", F_ID)
        break;
    }
#undef KEY
    return -2;
}

/* An event's key at s->p and the colon after it: *field is its field, or -1 for a key perftool does not read. 0
 * when it is not a plain string followed by a colon. */
static inline int read_key(Cursor *s, int *field) {
    int plain;
    *field = known_key(s);
    if (*field != -2) return 1;
    if (s->p >= s->end || *s->p != '"') return 0;
    const char *key = s->p + 1;
    if (!skip_string(s, &plain) || !plain) return 0;
    *field = field_of(key, s->p - key - 1);
    skip_space(s);
    if (s->p >= s->end || *s->p != ':') return 0;
    s->p++;
    return 1;
}

typedef struct {
    const char *base;
    Slot *slots;
    Py_ssize_t capacity, count;
    Span *distinct; /* the five spans of each distinct signature, by id */
} Signatures;

static inline uint64_t mix(uint64_t h, uint64_t word) {
    h ^= word;
    h *= 0x9E3779B97F4A7C15ULL;
    return h ^ (h >> 29);
}

/* The seed of every hash of names from the trace, drawn from the system's random source when the module loads: names
 * chosen to collide under a fixed hash would make every table lookup a long probe (one precomputed set slowed any
 * trace 7-26x). What the scanner returns never depends on it: ids are numbered in order of first occurrence. */
static uint64_t hash_seed = 1469598103934665603ULL;

/* h with the len bytes at b mixed in, eight at a time, and their length (absent and empty differ). */
static uint64_t hash_bytes(uint64_t h, const char *b, Py_ssize_t len) {
    Py_ssize_t i = 0;
    uint64_t word;
    for (; i + 8 <= len; i += 8) {
        memcpy(&word, b + i, 8);
        h = mix(h, word);
    }
    word = 0;
    for (; i < len; i++) word = word << 8 | (unsigned char)b[i];
    return mix(h, word ^ ((uint64_t)len << 56));
}

static uint64_t hash_spans(const char *base, const Span *fields) {
    uint64_t h = hash_seed;
    for (int f = 0; f < 5; f++) h = hash_bytes(h, base + fields[f].start, fields[f].len);
    return h;
}

static int same_spans(const char *base, const Span *a, const Span *b) {
    for (int f = 0; f < 5; f++) {
        if (a[f].len != b[f].len || memcmp(base + a[f].start, base + b[f].start, (size_t)a[f].len) != 0) return 0;
    }
    return 1;
}

static int signatures_grow(Signatures *t) {
    Py_ssize_t capacity = t->capacity ? t->capacity * 2 : 64;
    Slot *slots = malloc(sizeof(Slot) * (size_t)capacity);
    Span *distinct = realloc(t->distinct, sizeof(Span) * 5 * (size_t)(capacity / 2));
    if (!slots || !distinct) {
        free(slots);
        if (distinct) t->distinct = distinct;
        return -1;
    }
    t->distinct = distinct;
    for (Py_ssize_t i = 0; i < capacity; i++) slots[i].id = -1;
    for (Py_ssize_t i = 0; i < t->capacity; i++) {
        if (t->slots[i].id < 0) continue;
        Py_ssize_t j = (Py_ssize_t)(t->slots[i].hash & (uint64_t)(capacity - 1));
        while (slots[j].id >= 0) j = (j + 1) & (capacity - 1);
        slots[j] = t->slots[i];
    }
    free(t->slots);
    t->slots = slots;
    t->capacity = capacity;
    return 0;
}

/* The id of an event's signature, a new one in order of first occurrence; -1 when out of memory. */
static int32_t signature_id(Signatures *t, const Span *fields) {
    if ((t->count + 1) * 2 > t->capacity && signatures_grow(t) < 0) return -1;
    uint64_t h = hash_spans(t->base, fields);
    Py_ssize_t j = (Py_ssize_t)(h & (uint64_t)(t->capacity - 1));
    while (t->slots[j].id >= 0) {
        if (t->slots[j].hash == h && same_spans(t->base, t->slots[j].fields, fields)) return t->slots[j].id;
        j = (j + 1) & (t->capacity - 1);
    }
    t->slots[j].hash = h;
    memcpy(t->slots[j].fields, fields, sizeof(Span) * 5);
    t->slots[j].id = (int32_t)t->count;
    memcpy(t->distinct + 5 * t->count, fields, sizeof(Span) * 5);
    return (int32_t)t->count++;
}

typedef struct {
    Column ts, dur, signature, id_kind, id_value, id_span, args_span, correlation;
} Columns;

enum { OK = 0, DECLINE = 1, NO_MEMORY = 2 };

#define CORRELATION "\"correlation\""
#define UNDECIDED -2 /* a correlation id an escaped key may hold: msgspec reads it */

/* An event's args, checked as skip_value checks them, and the integer of 0 to 18 digits their top-level "correlation"
 * holds (the last, where the key repeats, as msgspec keeps it): -1 where it holds another value or none, UNDECIDED
 * where a top-level key is written with escapes (or in other than ASCII). */
static int skip_args(Cursor *s, int64_t *correlation) {
    *correlation = -1;
    if (s->p >= s->end || *s->p != '{') return skip_value(s, 1);
    s->p++;
    skip_space(s);
    if (s->p < s->end && *s->p == '}') {
        s->p++;
        return 1;
    }
    int plain, integer, digits, undecided = 0;
    for (;;) {
        const char *key = s->p;
        if (s->p >= s->end || *s->p != '"' || !skip_string(s, &plain)) return 0;
        int match = s->p - key == sizeof(CORRELATION) - 1 && !memcmp(key, CORRELATION, sizeof(CORRELATION) - 1);
        undecided |= !plain;
        skip_space(s);
        if (s->p >= s->end || *s->p != ':') return 0;
        s->p++;
        skip_space(s);
        const char *value = s->p;
        if (match && s->p < s->end && *s->p >= '0' && *s->p <= '9') {
            if (!skip_number(s, &integer, &digits)) return 0;
            *correlation = integer && digits <= MAX_INT_DIGITS ? parse_int(value, s->p) : -1;
        } else {
            if (!skip_value(s, 2)) return 0;
            if (match) *correlation = -1;
        }
        skip_space(s);
        if (s->p >= s->end) return 0;
        if (*s->p == '}') break;
        if (*s->p != ',') return 0;
        s->p++;
        skip_space(s);
    }
    s->p++;
    if (undecided) *correlation = UNDECIDED;
    return 1;
}

/* One event object at s->p. */
static int scan_event(Cursor *s, Signatures *t, Columns *out) {
    Span spans[N_FIELDS]; /* each field's, as its value is read; those never seen are emptied after */
    int seen = 0;
    double ts = NAN, dur = NAN;
    int8_t id_kind = ID_ABSENT;
    int64_t id_value = 0, correlation = -1;
    int plain;
    if (s->p >= s->end || *s->p != '{') return DECLINE;
    s->p++;
    skip_space(s);
    if (s->p < s->end && *s->p == '}') {
        s->p++;
    } else {
        for (;;) {
            int field;
            if (!read_key(s, &field)) return DECLINE;
            skip_space(s);
            const char *value = s->p;
            int ok;
            if (field < 0) {
                ok = skip_value(s, 1);
            } else {
                if (seen & (1 << field)) return DECLINE; /* msgspec keeps the last; rare enough to leave to it */
                seen |= 1 << field;
                switch (field) {
                case F_PH:
                case F_NAME:
                case F_CAT:
                    ok = s->p < s->end && *s->p == '"' && skip_string(s, &plain);
                    break;
                case F_PID:
                case F_TID:
                    ok = skip_int_or_string(s);
                    break;
                case F_TS:
                    ok = parse_time(s, &ts);
                    break;
                case F_DUR:
                    ok = parse_time(s, &dur);
                    break;
                case F_ID: {
                    int integer, digits;
                    if (s->p < s->end && (*s->p == '-' || (*s->p >= '0' && *s->p <= '9'))) {
                        ok = skip_number(s, &integer, &digits) && integer && digits <= MAX_INT_DIGITS;
                        if (ok) {
                            id_kind = ID_INT;
                            id_value = parse_int(value, s->p);
                        }
                    } else if (s->p < s->end && *s->p == '"') {
                        ok = skip_string(s, &plain);
                        id_kind = ID_OTHER;
                    } else {
                        ok = skip_literal(s, "null", 4);
                        id_kind = ID_OTHER;
                    }
                    break;
                }
                default: /* F_ARGS */
                    ok = skip_args(s, &correlation);
                }
                spans[field].start = value - t->base;
                spans[field].len = s->p - value;
            }
            if (!ok) return DECLINE;
            skip_space(s);
            if (s->p >= s->end) return DECLINE;
            if (*s->p == '}') {
                s->p++;
                break;
            }
            if (*s->p != ',') return DECLINE;
            s->p++;
            skip_space(s);
        }
    }
    for (int field = 0; field < N_FIELDS; field++) {
        if (!(seen & (1 << field))) spans[field] = (Span){0, 0};
    }
    int32_t signature = signature_id(t, spans);
    int64_t args[2] = {spans[F_ARGS].start, spans[F_ARGS].start + spans[F_ARGS].len};
    int64_t id_span[2] = {spans[F_ID].start, spans[F_ID].start + spans[F_ID].len};
    if (signature < 0 || column_push(&out->ts, &ts, 8) || column_push(&out->dur, &dur, 8) ||
        column_push(&out->signature, &signature, 4) || column_push(&out->id_kind, &id_kind, 1) ||
        column_push(&out->id_value, &id_value, 8) || column_push(&out->id_span, id_span, 16) ||
        column_push(&out->args_span, args, 16) || column_push(&out->correlation, &correlation, 8))
        return NO_MEMORY;
    return OK;
}

static PyObject *span_bytes(const char *base, Span span) {
    if (!span.len) Py_RETURN_NONE;
    return PyBytes_FromStringAndSize(base + span.start, span.len);
}

static PyObject *results(const char *base, Signatures *t, Columns *c) {
    PyObject *distinct = PyList_New(t->count);
    if (!distinct) return NULL;
    for (Py_ssize_t i = 0; i < t->count; i++) {
        const Span *f = t->distinct + 5 * i;
        PyObject *row = Py_BuildValue("(NNNNN)", span_bytes(base, f[0]), span_bytes(base, f[1]),
                                      span_bytes(base, f[2]), span_bytes(base, f[3]), span_bytes(base, f[4]));
        if (!row) {
            Py_DECREF(distinct);
            return NULL;
        }
        PyList_SET_ITEM(distinct, i, row);
    }
#define DATA(column) (column).data ? (column).data : "", (column).size /* y# makes None of a NULL pointer */
    return Py_BuildValue("(Ny#y#y#y#y#y#y#y#)", distinct, DATA(c->ts), DATA(c->dur), DATA(c->signature),
                         DATA(c->id_kind), DATA(c->id_value), DATA(c->id_span), DATA(c->args_span),
                         DATA(c->correlation));
#undef DATA
}

static PyObject *scan(PyObject *Py_UNUSED(self), PyObject *arg) {
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    const char *base = view.buf;
    Cursor s = {base, base + view.len};
    Signatures t = {base, NULL, 0, 0, NULL};
    Columns c;
    memset(&c, 0, sizeof c);
    int status = OK;
    Py_BEGIN_ALLOW_THREADS;
    skip_space(&s);
    while (s.p < s.end) {
        status = scan_event(&s, &t, &c);
        if (status != OK) break;
        skip_space(&s);
        if (s.p < s.end) {
            if (*s.p != ',') {
                status = DECLINE;
                break;
            }
            s.p++;
            skip_space(&s);
            if (s.p >= s.end) status = DECLINE; /* a trailing comma */
        }
    }
    Py_END_ALLOW_THREADS;
    PyObject *result = NULL;
    if (status == OK) {
        result = results(base, &t, &c);
    } else if (status == DECLINE) {
        result = Py_NewRef(Py_None);
    } else {
        PyErr_NoMemory();
    }
    free(t.slots);
    free(t.distinct);
    free(c.ts.data);
    free(c.dur.data);
    free(c.signature.data);
    free(c.id_kind.data);
    free(c.id_value.data);
    free(c.id_span.data);
    free(c.args_span.data);
    free(c.correlation.data);
    PyBuffer_Release(&view);
    return result;
}

/* The spans argument of slices() and tails(): (start, end) pairs of int64 into text, checked to lie in it. */
static int read_spans(PyObject *object, Py_ssize_t size, Py_buffer *view, Py_ssize_t *count) {
    if (PyObject_GetBuffer(object, view, PyBUF_C_CONTIGUOUS) < 0) return -1;
    *count = view->len / 16;
    const int64_t *spans = view->buf;
    for (Py_ssize_t i = 0; i < 2 * *count; i += 2) {
        if (view->len % 16 || spans[i] < 0 || spans[i] > spans[i + 1] || spans[i + 1] > size) {
            PyBuffer_Release(view);
            PyErr_SetString(PyExc_ValueError, "spans must be (start, end) pairs of int64 inside text");
            return -1;
        }
    }
    return 0;
}

#define MAX_KEYS 8

typedef struct {
    const char *bytes[MAX_KEYS];
    Py_ssize_t len[MAX_KEYS];
    Py_ssize_t count;
    int quoted; /* every key begins with a quote */
} Keys;

/* The keys of tails() and tail_groups(): a tuple of up to MAX_KEYS bytes (held by the caller's arguments). */
static int read_keys(PyObject *tuple, Keys *keys) {
    keys->count = PyTuple_GET_SIZE(tuple);
    keys->quoted = 1;
    if (keys->count > MAX_KEYS) {
        PyErr_SetString(PyExc_ValueError, "at most 8 keys");
        return -1;
    }
    for (Py_ssize_t k = 0; k < keys->count; k++) {
        PyObject *key = PyTuple_GET_ITEM(tuple, k);
        if (!PyBytes_Check(key)) {
            PyErr_SetString(PyExc_TypeError, "keys must be bytes");
            return -1;
        }
        keys->bytes[k] = PyBytes_AS_STRING(key);
        keys->len[k] = PyBytes_GET_SIZE(key);
        keys->quoted &= keys->len[k] > 0 && keys->bytes[k][0] == '"';
    }
    return 0;
}

/* The first quote in [p, end), or NULL: eight bytes at a time (args are short, and have a quote every few bytes, where
 * a call to memchr costs more than the search). */
static inline const char *next_quote(const char *p, const char *end) {
#if defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    for (; end - p >= 8; p += 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        uint64_t quote = word ^ (ONES * '"'), found = (quote - ONES) & ~quote & HIGHS;
        if (found) return p + __builtin_ctzll(found) / 8;
    }
#endif
    for (; p < end; p++)
        if (*p == '"') return p;
    return NULL;
}

/* Where the first occurrence of any of keys begins in text[0:size] (size where none occurs). Keys that all begin
 * with a quote (JSON keys, as the reductions look for) are tried at each quote in one pass: args hold a few dozen
 * quotes, and most keys occur in none of them, which a search per key would read through to the end. */
static Py_ssize_t first_key(const char *text, Py_ssize_t size, const Keys *keys) {
    Py_ssize_t first = size;
    if (!keys->quoted) {
        for (Py_ssize_t k = 0; k < keys->count; k++) {
            const char *at = memmem(text, (size_t)size, keys->bytes[k], (size_t)keys->len[k]);
            if (at && at - text < first) first = at - text;
        }
        return first;
    }
    const char *end = text + size;
    for (const char *at = text; (at = next_quote(at, end)) != NULL; at++) {
        for (Py_ssize_t k = 0; k < keys->count; k++) {
            Py_ssize_t len = keys->len[k];
            if (end - at >= len && (len < 2 || at[1] == keys->bytes[k][1]) && !memcmp(at, keys->bytes[k], (size_t)len))
                return at - text;
        }
    }
    return size;
}

/* The bytes of each span of text; with keys, each from the first occurrence of any key on (empty where none is). */
static PyObject *cut(PyObject *args, int from_key) {
    Py_buffer text, spans;
    PyObject *spans_object, *key_tuple = NULL;
    Py_ssize_t count;
    Keys keys = {{NULL}, {0}, 0, 1};
    if (!PyArg_ParseTuple(args, from_key ? "y*OO!:tails" : "y*O:slices", &text, &spans_object, &PyTuple_Type,
                          &key_tuple))
        return NULL;
    if (read_spans(spans_object, text.len, &spans, &count) < 0) {
        PyBuffer_Release(&text);
        return NULL;
    }
    PyObject *result = NULL;
    if (key_tuple && read_keys(key_tuple, &keys) < 0) goto done;
    result = PyList_New(count);
    if (!result) goto done;
    const int64_t *span = spans.buf;
    for (Py_ssize_t i = 0; i < count; i++) {
        const char *start = (const char *)text.buf + span[2 * i];
        Py_ssize_t end = (Py_ssize_t)(span[2 * i + 1] - span[2 * i]);
        Py_ssize_t first = from_key ? first_key(start, end, &keys) : 0;
        PyObject *piece = PyBytes_FromStringAndSize(start + first, end - first);
        if (!piece) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, i, piece);
    }
done:
    PyBuffer_Release(&spans);
    PyBuffer_Release(&text);
    return result;
}

typedef struct {
    uint64_t hash;
    Py_ssize_t start, len;
    int32_t group; /* -1: empty slot */
} TailSlot;

/* Spans grouped by their tails (as tails() cuts them), equal tails alike, without making the tails: per span its
 * group, numbered in order of first occurrence, and per group the index of its first span. 0, or -1 out of memory. */
static int group_tails(const char *base, const int64_t *span, Py_ssize_t count, const Keys *keys, int32_t *group,
                       int64_t *firsts, Py_ssize_t *groups) {
    Py_ssize_t capacity = 16;
    while (capacity < 2 * count) capacity *= 2;
    TailSlot *slots = malloc(sizeof(TailSlot) * (size_t)capacity);
    if (!slots) return -1;
    for (Py_ssize_t j = 0; j < capacity; j++) slots[j].group = -1;
    *groups = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        const char *start = base + span[2 * i];
        Py_ssize_t size = (Py_ssize_t)(span[2 * i + 1] - span[2 * i]), first = first_key(start, size, keys);
        const char *tail = start + first;
        Py_ssize_t len = size - first;
        uint64_t h = hash_bytes(hash_seed, tail, len);
        Py_ssize_t j = (Py_ssize_t)(h & (uint64_t)(capacity - 1));
        while (slots[j].group >= 0 &&
               !(slots[j].hash == h && slots[j].len == len && !memcmp(base + slots[j].start, tail, (size_t)len)))
            j = (j + 1) & (capacity - 1);
        if (slots[j].group < 0) {
            slots[j] = (TailSlot){h, tail - base, len, (int32_t)*groups};
            firsts[(*groups)++] = i;
        }
        group[i] = slots[j].group;
    }
    free(slots);
    return 0;
}

static PyObject *tail_groups(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer text, spans;
    PyObject *spans_object, *key_tuple;
    Py_ssize_t count, groups = 0;
    Keys keys;
    if (!PyArg_ParseTuple(args, "y*OO!:tail_groups", &text, &spans_object, &PyTuple_Type, &key_tuple)) return NULL;
    if (read_spans(spans_object, text.len, &spans, &count) < 0) {
        PyBuffer_Release(&text);
        return NULL;
    }
    PyObject *result = NULL;
    int32_t *group = malloc(sizeof(int32_t) * (size_t)(count ? count : 1));
    int64_t *firsts = malloc(sizeof(int64_t) * (size_t)(count ? count : 1));
    if (!group || !firsts) {
        PyErr_NoMemory();
    } else if (read_keys(key_tuple, &keys) == 0) {
        int status;
        Py_BEGIN_ALLOW_THREADS;
        status = group_tails(text.buf, spans.buf, count, &keys, group, firsts, &groups);
        Py_END_ALLOW_THREADS;
        if (status < 0)
            PyErr_NoMemory();
        else
            result = Py_BuildValue("(y#y#)", (const char *)group, count * 4, (const char *)firsts, groups * 8);
    }
    free(group);
    free(firsts);
    PyBuffer_Release(&spans);
    PyBuffer_Release(&text);
    return result;
}

static PyObject *slices(PyObject *Py_UNUSED(self), PyObject *args) { return cut(args, 0); }

static PyObject *tails(PyObject *Py_UNUSED(self), PyObject *args) { return cut(args, 1); }

/* --- XSpace lines (perftool.trace.xspace) ---------------------------------------------------------------------
 * line_events(data, begin, end) reads the events of an XLine's bytes data[begin:end] (an XSpace protobuf: each event
 * field 4 of the line, its metadata id, offset and duration in picoseconds as fields 1, 2 and 3, its stats as
 * field 4, its occurrences as field 5; the line's other fields passed over). It gives the same values as
 * xspace._line_events, or None where anything is off (a field past its message's end, a number of more than 64 bits,
 * an unknown wire type), for the Python reader to decide: it names where the bytes break off. */

/* The varint at *at (not past end) into *value; 0, or -1 where it runs past end or past 64 bits. */
static inline int proto_varint(const uint8_t **at, const uint8_t *end, uint64_t *value) {
    uint64_t found = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (*at >= end) return -1;
        uint8_t byte = *(*at)++;
        if (shift == 63 && byte > 1) return -1;
        found |= (uint64_t)(byte & 0x7F) << shift;
        if (byte < 0x80) {
            *value = found;
            return 0;
        }
    }
    return -1;
}

/* Passes over the field at *at (not past end): 0, or -1 where it is malformed. */
static int proto_skip(const uint8_t **at, const uint8_t *end) {
    uint64_t tag, size;
    if (proto_varint(at, end, &tag) < 0 || (tag >> 3) == 0) return -1;
    switch (tag & 7) {
    case 0: return proto_varint(at, end, &size);
    case 1: size = 8; break;
    case 5: size = 4; break;
    case 2:
        if (proto_varint(at, end, &size) < 0) return -1;
        break;
    default: return -1;
    }
    if (size > (uint64_t)(end - *at)) return -1;
    *at += size;
    return 0;
}

/* Appends (kind, offset, duration, stats) for the event data[*at:stop]; 0, 1 where it is malformed, -1 on error. */
static int xspace_event(const uint8_t *at, const uint8_t *stop, PyObject *events) {
    uint64_t kind = 0, offset = 0, duration = 0, value, size;
    PyObject *stats = PyList_New(0);
    if (!stats) return -1;
    while (at < stop) {
        uint8_t tag = *at;
        if (tag == 0x22) { /* a stat: its bytes */
            at++;
            if (proto_varint(&at, stop, &size) < 0 || size > (uint64_t)(stop - at)) goto malformed;
            PyObject *stat = PyBytes_FromStringAndSize((const char *)at, (Py_ssize_t)size);
            if (!stat || PyList_Append(stats, stat) < 0) {
                Py_XDECREF(stat);
                Py_DECREF(stats);
                return -1;
            }
            Py_DECREF(stat);
            at += size;
        } else if (tag == 0x08 || tag == 0x10 || tag == 0x18 || tag == 0x28) {
            at++;
            if (proto_varint(&at, stop, &value) < 0) goto malformed;
            if (tag == 0x08) kind = value;
            else if (tag == 0x10) offset = value;
            else if (tag == 0x18) duration = value;
        } else if (proto_skip(&at, stop) < 0) {
            goto malformed;
        }
    }
    PyObject *event = Py_BuildValue("(LLLN)", (long long)(int64_t)kind, (long long)(int64_t)offset,
                                    (long long)(int64_t)duration, stats);
    if (!event) return -1;
    int status = PyList_Append(events, event);
    Py_DECREF(event);
    return status;
malformed:
    Py_DECREF(stats);
    return 1;
}

/* stat_value(stat) reads an XStat's bytes: (metadata id, field, value) of its last value field (field 2 a double,
 * 3 a uint64, 4 an int64, 5 a string's bytes, 6 None for bytes, 7 a ref's metadata id; 0 and None where it holds
 * none), or None where a field is not of the wire type the schema gives it, for the Python reader to decide. */
static PyObject *stat_value(PyObject *Py_UNUSED(self), PyObject *arg) {
    char *buf;
    Py_ssize_t length;
    if (PyBytes_AsStringAndSize(arg, &buf, &length) < 0) return NULL;
    const uint8_t *at = (const uint8_t *)buf, *end = at + length, *text = NULL;
    uint64_t name = 0, number = 0, tag, size = 0;
    double real = 0.0;
    int field = 0;
    while (at < end) {
        const uint8_t *start = at;
        if (proto_varint(&at, end, &tag) < 0) Py_RETURN_NONE;
        int number_of = (int)(tag >> 3), wire = (int)(tag & 7);
        if (number_of == 0 || number_of > 7) {
            at = start;
            if (proto_skip(&at, end) < 0) Py_RETURN_NONE;
            continue;
        }
        int expected = number_of == 2 ? 1 : (number_of == 5 || number_of == 6) ? 2 : 0;
        if (wire != expected) Py_RETURN_NONE;
        if (wire == 0) {
            if (proto_varint(&at, end, number_of == 1 ? &name : &number) < 0) Py_RETURN_NONE;
        } else if (wire == 1) {
            if (end - at < 8) Py_RETURN_NONE;
            memcpy(&real, at, 8);
            at += 8;
        } else {
            if (proto_varint(&at, end, &size) < 0 || size > (uint64_t)(end - at)) Py_RETURN_NONE;
            text = at;
            at += size;
        }
        if (number_of != 1) field = number_of;
    }
    long long id = (long long)(int64_t)name;
    switch (field) {
    case 2: return Py_BuildValue("(Lid)", id, field, real);
    case 3:
    case 7: return Py_BuildValue("(LiK)", id, field, (unsigned long long)number);
    case 4: return Py_BuildValue("(LiL)", id, field, (long long)(int64_t)number);
    case 5: return Py_BuildValue("(Liy#)", id, field, (const char *)text, (Py_ssize_t)size);
    default: return Py_BuildValue("(LiO)", id, field, Py_None);
    }
}

static PyObject *line_events(PyObject *Py_UNUSED(self), PyObject *args) {
    Py_buffer data;
    Py_ssize_t begin, end;
    if (!PyArg_ParseTuple(args, "y*nn", &data, &begin, &end)) return NULL;
    if (begin < 0 || end > data.len || begin > end) {
        PyBuffer_Release(&data);
        PyErr_SetString(PyExc_ValueError, "line_events: the range lies outside the data");
        return NULL;
    }
    const uint8_t *at = (const uint8_t *)data.buf + begin, *stop = (const uint8_t *)data.buf + end;
    PyObject *events = PyList_New(0);
    int status = events ? 0 : -1;
    while (status == 0 && at < stop) {
        uint64_t size;
        if (*at != 0x22) { /* another field of the line */
            status = proto_skip(&at, stop) < 0 ? 1 : 0;
            continue;
        }
        at++;
        if (proto_varint(&at, stop, &size) < 0 || size > (uint64_t)(stop - at)) {
            status = 1;
            break;
        }
        status = xspace_event(at, at + size, events);
        at += size;
    }
    PyBuffer_Release(&data);
    if (status != 0) {
        Py_XDECREF(events);
        if (status < 0) return NULL;
        Py_RETURN_NONE;
    }
    return events;
}

static PyMethodDef methods[] = {
    {"slices", slices, METH_VARARGS,
     "slices(text, spans) -> list of bytes\n\nThe bytes of each (start, end) span of text (spans: int64 pairs)."},
    {"tails", tails, METH_VARARGS,
     "tails(text, spans, keys) -> list of bytes\n\nEach span of text from the first occurrence of any of keys on "
     "(empty where none occurs)."},
    {"tail_groups", tail_groups, METH_VARARGS,
     "tail_groups(text, spans, keys) -> (groups, firsts)\n\nThe spans grouped by their tails as tails() cuts them, "
     "equal tails alike: per span its group\n(int32 bytes, numbered in order of first occurrence), and per group the "
     "index of its first span (int64 bytes)."},
    {"line_events", line_events, METH_VARARGS,
     "line_events(data, begin, end) -> list of (kind, offset, duration, stats) or None\n\nThe events of the XSpace "
     "line whose bytes are data[begin:end]: each one's metadata id, offset and duration (ps) and\nits stats' bytes; "
     "None where the bytes are malformed, for the Python reader to say where."},
    {"stat_value", stat_value, METH_O,
     "stat_value(stat) -> (metadata id, field, value) or None\n\nAn XStat's bytes read: its metadata id and its last "
     "value field's number and value (0 and None where it holds none);\nNone where a field is not of its schema's "
     "wire type."},
    {"scan", scan, METH_O,
     "scan(piece) -> (signatures, ts, dur, signature, id_kind, id_value, id_span, args_span, correlation) or None\n\n"
     "A comma-separated run of trace event objects read into columns (raw bytes of float64, int32, int8 and int64\n"
     "arrays; spans as start, end pairs; correlation -1 where none, -2 where msgspec must read it), or None where\n"
     "msgspec must decide."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_scan", "Trace events read straight into columns.", -1, methods, NULL, NULL, NULL, NULL,
};

/* hash_seed from os.urandom: 0, or -1 with an exception set. */
static int draw_hash_seed(void) {
    PyObject *os = PyImport_ImportModule("os");
    PyObject *drawn = os ? PyObject_CallMethod(os, "urandom", "i", 8) : NULL;
    Py_XDECREF(os);
    if (!drawn) return -1;
    if (PyBytes_Check(drawn) && PyBytes_GET_SIZE(drawn) == 8) memcpy(&hash_seed, PyBytes_AS_STRING(drawn), 8);
    Py_DECREF(drawn);
    return 0;
}

PyMODINIT_FUNC PyInit__scan(void) {
    init_plain();
    if (draw_hash_seed() < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddObject(m, "hash_seed", PyLong_FromUnsignedLongLong(hash_seed)) < 0) Py_CLEAR(m);
    return m;
}
