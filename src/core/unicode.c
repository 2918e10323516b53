/* UTF-8 decoding (WHATWG policy) and NFC normalization over the generated
 * tables in unicode_tables.c. NFC = full canonical decomposition, canonical
 * ordering of each run of non-starters, then canonical composition
 * (UAX #15), with Hangul syllables handled algorithmically. */
#include "core/unicode.h"

#include <stdlib.h>
#include <string.h>

#include "core/common.h"

/* Hangul constants (Unicode ch. 3.12). */
enum {
    HANGUL_S_BASE = 0xAC00,
    HANGUL_L_BASE = 0x1100,
    HANGUL_V_BASE = 0x1161,
    HANGUL_T_BASE = 0x11A7,
    HANGUL_L_COUNT = 19,
    HANGUL_V_COUNT = 21,
    HANGUL_T_COUNT = 28,
    HANGUL_N_COUNT = HANGUL_V_COUNT * HANGUL_T_COUNT,
    HANGUL_S_COUNT = HANGUL_L_COUNT * HANGUL_N_COUNT,
};

uint8_t kipp_ccc(uint32_t cp) {
    if (!(kipp_uprops(cp) & KIPP_UPROP_NONSTARTER)) return 0;
    size_t lo = 0, hi = kipp_ccc_count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const uint32_t *r = &kipp_ccc_ranges[mid * 3];
        if (cp < r[0]) hi = mid;
        else if (cp > r[1]) lo = mid + 1;
        else return (uint8_t)r[2];
    }
    return 0;
}

/* ---- UTF-8 ------------------------------------------------------------ */

size_t kipp_utf8_decode(const uint8_t *s, size_t n, uint32_t *cp, bool *valid) {
    uint8_t b0 = s[0];
    if (b0 < 0x80) {
        *cp = b0;
        *valid = true;
        return 1;
    }
    size_t need;
    uint32_t value;
    uint8_t lower = 0x80, upper = 0xBF;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        need = 1;
        value = b0 & 0x1F;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        need = 2;
        value = b0 & 0x0F;
        if (b0 == 0xE0) lower = 0xA0;      /* no overlongs */
        if (b0 == 0xED) upper = 0x9F;      /* no surrogates */
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        need = 3;
        value = b0 & 0x07;
        if (b0 == 0xF0) lower = 0x90;      /* no overlongs */
        if (b0 == 0xF4) upper = 0x8F;      /* <= U+10FFFF */
    } else {
        *cp = KIPP_REPLACEMENT_CHAR;       /* stray continuation, C0, C1, F5..FF */
        *valid = false;
        return 1;
    }
    size_t i = 1;
    for (; i <= need; i++) {
        if (i >= n || s[i] < lower || s[i] > upper) {
            /* maximal subpart: the bytes so far become one U+FFFD; the
             * offending byte is decoded afresh by the caller */
            *cp = KIPP_REPLACEMENT_CHAR;
            *valid = false;
            return i;
        }
        value = (value << 6) | (s[i] & 0x3F);
        lower = 0x80;
        upper = 0xBF;
    }
    *cp = value;
    *valid = true;
    return i;
}

size_t kipp_utf8_encode(uint32_t cp, uint8_t *out) {
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | (cp >> 18));
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

size_t kipp_utf8_valid_prefix(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        /* ASCII fast path, 8 bytes at a time */
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (w & 0x8080808080808080ull) break;
            i += 8;
        }
        if (i >= n) break;
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t cp;
        bool ok;
        size_t len = kipp_utf8_decode(s + i, n - i, &cp, &ok);
        if (!ok) return i;
        i += len;
    }
    return n;
}

size_t kipp_utf8_incomplete_tail(const uint8_t *s, size_t n) {
    /* Look back at most 3 bytes for a lead byte whose sequence is cut short
     * by the end of the buffer but valid so far. */
    for (size_t back = 1; back <= 3 && back <= n; back++) {
        size_t start = n - back;
        uint8_t b = s[start];
        if (b >= 0x80 && b < 0xC0) continue; /* continuation: keep looking */
        if (b < 0xC2 || b > 0xF4) return 0;
        uint32_t cp;
        bool ok;
        size_t len = kipp_utf8_decode(s + start, back, &cp, &ok);
        /* decode ran out of input exactly at the end while still valid */
        return (!ok && len == back) ? back : 0;
    }
    return 0;
}

/* ---- NFC --------------------------------------------------------------- */

bool kipp_nfc_quick_check(const uint8_t *s, size_t n) {
    uint8_t last_ccc = 0;
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) {
            last_ccc = 0;
            i++;
            continue;
        }
        uint32_t cp;
        bool ok;
        i += kipp_utf8_decode(s + i, n - i, &cp, &ok);
        uint8_t p = kipp_uprops(cp);
        if (p & KIPP_UPROP_QC_MASK) return false; /* NO or MAYBE */
        if (p & KIPP_UPROP_NONSTARTER) {
            uint8_t c = kipp_ccc(cp);
            if (last_ccc > c) return false;
            last_ccc = c;
        } else {
            last_ccc = 0;
        }
    }
    return true;
}

void kipp_nfc_scratch_free(kipp_nfc_scratch *s) {
    free(s->cps);
    free(s->tmp);
    memset(s, 0, sizeof *s);
}

static bool scratch_reserve(kipp_nfc_scratch *s, size_t need) {
    if (need <= s->cap) return true;
    size_t cap = s->cap ? s->cap : 256;
    while (cap < need) {
        if (!kipp_mul_size(cap, 2, &cap)) return false;
    }
    size_t bytes;
    if (!kipp_mul_size(cap, sizeof(uint32_t), &bytes)) return false;
    uint32_t *a = realloc(s->cps, bytes);
    if (!a) return false;
    s->cps = a;
    uint32_t *b = realloc(s->tmp, bytes);
    if (!b) return false;
    s->tmp = b;
    s->cap = cap;
    return true;
}

static const uint32_t *decomposition(uint32_t cp, size_t *len) {
    size_t lo = 0, hi = kipp_decomp_count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        uint32_t key = kipp_decomp_index[mid * 2];
        if (cp < key) hi = mid;
        else if (cp > key) lo = mid + 1;
        else {
            uint32_t v = kipp_decomp_index[mid * 2 + 1];
            *len = v & 0xFF;
            return &kipp_decomp_pool[v >> 8];
        }
    }
    return NULL;
}

/* Primary composite of (a, b), or 0. */
static uint32_t compose_pair(uint32_t a, uint32_t b) {
    if (a >= HANGUL_L_BASE && a < HANGUL_L_BASE + HANGUL_L_COUNT &&
        b >= HANGUL_V_BASE && b < HANGUL_V_BASE + HANGUL_V_COUNT)
        return HANGUL_S_BASE + ((a - HANGUL_L_BASE) * HANGUL_V_COUNT + (b - HANGUL_V_BASE)) *
                                   HANGUL_T_COUNT;
    if (a >= HANGUL_S_BASE && a < HANGUL_S_BASE + HANGUL_S_COUNT &&
        (a - HANGUL_S_BASE) % HANGUL_T_COUNT == 0 && b > HANGUL_T_BASE &&
        b < HANGUL_T_BASE + HANGUL_T_COUNT)
        return a + (b - HANGUL_T_BASE);
    size_t lo = 0, hi = kipp_comp_count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const uint32_t *t = &kipp_comp_triples[mid * 3];
        if (a < t[0] || (a == t[0] && b < t[1])) hi = mid;
        else if (a > t[0] || b > t[1]) lo = mid + 1;
        else return t[2];
    }
    return 0;
}

/* Stable sort of cps[0..n) by combining class (canonical ordering of one
 * run of non-starters). Short runs: insertion sort; long runs (hostile
 * input): counting sort, so a megabyte of marks stays linear. */
static void sort_by_ccc(uint32_t *cps, size_t n, uint32_t *tmp) {
    if (n < 2) return;
    if (n <= 32) {
        for (size_t i = 1; i < n; i++) {
            uint32_t c = cps[i];
            uint8_t k = kipp_ccc(c);
            size_t j = i;
            while (j > 0 && kipp_ccc(cps[j - 1]) > k) {
                cps[j] = cps[j - 1];
                j--;
            }
            cps[j] = c;
        }
        return;
    }
    size_t count[257] = {0};
    for (size_t i = 0; i < n; i++) count[kipp_ccc(cps[i]) + 1]++;
    for (size_t k = 1; k < 257; k++) count[k] += count[k - 1];
    for (size_t i = 0; i < n; i++) tmp[count[kipp_ccc(cps[i])]++] = cps[i];
    memcpy(cps, tmp, n * sizeof *cps);
}

bool kipp_nfc(const uint8_t *s, size_t n, kipp_nfc_scratch *sc, uint8_t **out,
              size_t *out_len, size_t *out_cap) {
    /* 1. full canonical decomposition into sc->cps */
    size_t m = 0;
    if (!scratch_reserve(sc, n + 4)) return false;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        bool ok;
        i += kipp_utf8_decode(s + i, n - i, &cp, &ok);
        if (m + 4 > sc->cap && !scratch_reserve(sc, m + 4)) return false;
        if (cp >= HANGUL_S_BASE && cp < HANGUL_S_BASE + HANGUL_S_COUNT) {
            uint32_t si = cp - HANGUL_S_BASE;
            sc->cps[m++] = HANGUL_L_BASE + si / HANGUL_N_COUNT;
            sc->cps[m++] = HANGUL_V_BASE + (si % HANGUL_N_COUNT) / HANGUL_T_COUNT;
            if (si % HANGUL_T_COUNT) sc->cps[m++] = HANGUL_T_BASE + si % HANGUL_T_COUNT;
            continue;
        }
        size_t len = 0;
        const uint32_t *d = (cp >= 0xC0) ? decomposition(cp, &len) : NULL;
        if (d) {
            for (size_t k = 0; k < len; k++) sc->cps[m++] = d[k];
        } else {
            sc->cps[m++] = cp;
        }
    }
    uint32_t *cps = sc->cps;

    /* 2. canonical ordering: sort each maximal run of non-starters */
    for (size_t i = 0; i < m;) {
        if (!(kipp_uprops(cps[i]) & KIPP_UPROP_NONSTARTER)) {
            i++;
            continue;
        }
        size_t j = i;
        while (j < m && (kipp_uprops(cps[j]) & KIPP_UPROP_NONSTARTER)) j++;
        sort_by_ccc(cps + i, j - i, sc->tmp);
        i = j;
    }

    /* 3. canonical composition, in place (out index <= in index) */
    size_t w = 0;
    ptrdiff_t starter = -1;
    int last_ccc = 0;
    for (size_t i = 0; i < m; i++) {
        uint32_t c = cps[i];
        int cc = kipp_ccc(c);
        if (starter >= 0) {
            bool adjacent = (size_t)starter == w - 1;
            /* blocked unless adjacent to the starter, or every character in
             * between has a lower, non-zero class */
            if (adjacent || (last_ccc != 0 && last_ccc < cc)) {
                uint32_t comp = compose_pair(cps[starter], c);
                if (comp) {
                    cps[starter] = comp;
                    continue;
                }
            }
        }
        if (cc == 0) starter = (ptrdiff_t)w;
        last_ccc = cc;
        cps[w++] = c;
    }

    /* 4. encode */
    size_t need;
    if (!kipp_mul_size(w, 4, &need)) return false;
    if (need == 0) need = 4; /* *out is always a valid buffer */
    if (need > *out_cap) {
        uint8_t *b = realloc(*out, need);
        if (!b) return false;
        *out = b;
        *out_cap = need;
    }
    size_t len = 0;
    for (size_t i = 0; i < w; i++) len += kipp_utf8_encode(cps[i], *out + len);
    *out_len = len;
    return true;
}
