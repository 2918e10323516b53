/* The Qwen2 pre-tokenizer split pattern, by hand (no regex library):
 *
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d)        alt 1  contractions (ASCII case-insensitive)
 *   | [^\r\n\p{L}\p{N}]?\p{L}+          alt 2  a word, with one optional leading
 *                                              non-letter/number (space, punctuation)
 *   | \p{N}                             alt 3  one digit at a time
 *   | ?[^\s\p{L}\p{N}]+[\r\n]*          alt 4  punctuation run (+ optional leading
 *                                              space, trailing newlines)
 *   | \s*[\r\n]+                        alt 5  whitespace up to its last newline
 *   | \s+(?!\S)                         alt 6  whitespace, leaving the last one for
 *                                              the next word
 *   | \s+                               alt 7
 *
 * Semantics are those of the golden reference, transformers.js, which runs
 * this as a JavaScript RegExp with flags "gu" (leftmost alternative that
 * matches wins, backtracking): \s is ECMAScript's white space (see
 * unicode.h), \p{L} and \p{N} are general categories. What backtracking
 * does, case by case, is spelled out below; every branch consumes at least
 * one code point, so the pieces tile the text and the scan is linear. */
#include "core/tokenizer_internal.h"
#include "core/unicode.h"

/* Decode at i (well-formed UTF-8 guaranteed by the caller). */
static inline size_t next_cp(const uint8_t *s, size_t n, size_t i, uint32_t *cp) {
    if (s[i] < 0x80) {
        *cp = s[i];
        return 1;
    }
    bool ok;
    return kipp_utf8_decode(s + i, n - i, cp, &ok);
}

/* Class of each ASCII byte, so the common case skips the table walk. */
static int ascii_class(uint8_t b) {
    if ((b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z')) return KIPP_UCLASS_LETTER;
    if (b >= '0' && b <= '9') return KIPP_UCLASS_NUMBER;
    if (b == ' ' || (b >= 0x09 && b <= 0x0D)) return KIPP_UCLASS_SPACE;
    return KIPP_UCLASS_OTHER;
}

static inline int cls(uint32_t cp) {
    return cp < 0x80 ? ascii_class((uint8_t)cp) : kipp_uclass(cp);
}

/* End of the run of code points of class k starting at i. */
static size_t scan_class(const uint8_t *s, size_t n, size_t i, int k) {
    while (i < n) {
        uint32_t cp;
        size_t l = next_cp(s, n, i, &cp);
        if (cls(cp) != k) break;
        i += l;
    }
    return i;
}

static inline bool is_crlf(uint32_t cp) { return cp == '\r' || cp == '\n'; }

static inline uint8_t ascii_lower(uint8_t b) {
    return (b >= 'A' && b <= 'Z') ? (uint8_t)(b | 0x20) : b;
}

size_t kipp_pretok_next(const uint8_t *s, size_t n, size_t p) {
    uint32_t c0;
    size_t q = p + next_cp(s, n, p, &c0); /* q: just after c0 */
    int k0 = cls(c0);

    /* alt 1: 's 't 'm 'd, then 're 've 'll (no alternative is a prefix of
     * another, so the first that fits is the one the regex picks) */
    if (c0 == '\'' && q < n) {
        uint8_t a = ascii_lower(s[q]);
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return q + 1;
        if (q + 1 < n) {
            uint8_t b = ascii_lower(s[q + 1]);
            if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
                return q + 2;
        }
    }

    /* alt 2: a letter run, optionally preceded by one character that is not
     * CR, LF, a letter or a number. If c0 is a letter the optional part
     * matches empty and the run starts at c0. */
    if (k0 == KIPP_UCLASS_LETTER) return scan_class(s, n, q, KIPP_UCLASS_LETTER);
    uint32_t c1 = 0;
    size_t l1 = 0;
    int k1 = -1;
    if (q < n) {
        l1 = next_cp(s, n, q, &c1);
        k1 = cls(c1);
    }
    if (k0 != KIPP_UCLASS_NUMBER && !is_crlf(c0) && k1 == KIPP_UCLASS_LETTER)
        return scan_class(s, n, q + l1, KIPP_UCLASS_LETTER);

    /* alt 3 */
    if (k0 == KIPP_UCLASS_NUMBER) return q;

    /* alt 4: [^\s\p{L}\p{N}]+ then [\r\n]*, with one optional leading space
     * (if the space is not followed by such a character, the branch without
     * it fails too, because a space is \s). */
    size_t punct = SIZE_MAX;
    if (k0 == KIPP_UCLASS_OTHER) punct = p;
    else if (c0 == ' ' && k1 == KIPP_UCLASS_OTHER) punct = q;
    if (punct != SIZE_MAX) {
        size_t e = scan_class(s, n, punct, KIPP_UCLASS_OTHER);
        while (e < n && (s[e] == '\r' || s[e] == '\n')) e++;
        return e;
    }

    /* c0 is whitespace. Let W be the maximal whitespace run at p.
     * alt 5: \s* backtracks from the end of W to the last CR/LF in W; the
     *        piece ends just after it (a later CR/LF would be the last).
     * alt 6: no CR/LF in W. At the end of the text all of W; otherwise W
     *        minus its last character (the lookahead needs whitespace or
     *        the end after the match), which needs |W| >= 2.
     * alt 7: a single whitespace character before a non-space. */
    size_t e = p, after_last_crlf = 0, last_start = p, count = 0;
    while (e < n) {
        uint32_t cp;
        size_t l = next_cp(s, n, e, &cp);
        if (cls(cp) != KIPP_UCLASS_SPACE) break;
        last_start = e;
        e += l;
        count++;
        if (is_crlf(cp)) after_last_crlf = e;
    }
    if (after_last_crlf) return after_last_crlf;
    if (e == n) return e;
    if (count >= 2) return last_start;
    return e;
}
