/* The Unicode layer under the tokenizer, against independent data.
 *
 * Default: the Unicode conformance test for normalization
 * (NormalizationTest.txt of the same UCD version, from Debian's
 * unicode-data, read through bzcat): for every line c1;c2;c3;c4;c5,
 * NFC(c1) = NFC(c2) = NFC(c3) = c2 and NFC(c4) = NFC(c5) = c4; every code
 * point not listed in part 1 is its own NFC. The NFC quick check must never
 * say "already NFC" for a string that NFC changes.
 *
 * With KIPP_JS_CLASSES=FILE (written by tests/scripts/test_tokenizer_unicode.sh
 * with node): FILE has one byte per code point, 'L' \p{L}, 'N' \p{N},
 * 'S' \s, 'O' other, as node's RegExp engine (the golden reference's)
 * classifies them, 'x' for code points not assigned in our UCD version. The
 * generated class table must agree on every assigned code point. */
#include <stdint.h>

#include "core/unicode.h"
#include "test_util.h"

#define NORMTEST "/usr/share/unicode/NormalizationTest.txt.bz2"

static kipp_nfc_scratch scratch;
static uint8_t *out;
static size_t out_cap;

/* Parses space-separated hex code points into UTF-8. */
static size_t field_utf8(const char *s, const char *end, uint8_t *buf) {
    size_t n = 0;
    while (s < end) {
        while (s < end && *s == ' ') s++;
        if (s >= end) break;
        char *e;
        unsigned long cp = strtoul(s, &e, 16);
        n += kipp_utf8_encode((uint32_t)cp, buf + n);
        s = e;
    }
    return n;
}

static bool nfc_equals(const uint8_t *in, size_t n, const uint8_t *want, size_t n_want) {
    size_t len;
    if (!kipp_nfc(in, n, &scratch, &out, &len, &out_cap)) return false;
    bool same = len == n_want && memcmp(out, want, len) == 0;
    /* quick check "yes" must imply unchanged */
    if (kipp_nfc_quick_check(in, n) && !(len == n && memcmp(out, in, n) == 0)) same = false;
    return same;
}

static int test_normalization(void) {
    FILE *f = popen("bzcat " NORMTEST " 2>/dev/null", "r");
    if (!f) {
        return test_skip_all(TEST_SKIP_MISSING, "cannot run bzcat on " NORMTEST " (bzip2)");
    }
    static uint8_t listed[0x110000];
    char line[4096];
    int part = -1;
    size_t lines = 0, fails = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        if (line[0] == '@') {
            part = line[5] - '0';
            continue;
        }
        const char *fields[6];
        fields[0] = line;
        int nf = 1;
        for (char *p = line; *p && nf < 6; p++)
            if (*p == ';') fields[nf++] = p + 1;
        if (nf < 6) continue;
        uint8_t c[5][256];
        size_t len[5];
        for (int k = 0; k < 5; k++) len[k] = field_utf8(fields[k], fields[k + 1] - 1, c[k]);
        lines++;
        if (part == 1) {
            uint32_t cp;
            bool ok;
            kipp_utf8_decode(c[0], len[0], &cp, &ok);
            listed[cp] = 1;
        }
        bool ok = nfc_equals(c[0], len[0], c[1], len[1]) && nfc_equals(c[1], len[1], c[1], len[1]) &&
                  nfc_equals(c[2], len[2], c[1], len[1]) && nfc_equals(c[3], len[3], c[3], len[3]) &&
                  nfc_equals(c[4], len[4], c[3], len[3]);
        if (!ok && fails++ < 10) fprintf(stderr, "NormalizationTest line fails: %s", line);
    }
    int status = pclose(f);
    if (lines == 0) {
        return test_skip_all(TEST_SKIP_MISSING,
                             NORMTEST " not readable (make test-deps: Debian unicode-data, bzip2)");
    }
    CHECKF(status == 0, "bzcat failed");
    CHECKF(fails == 0, "%zu of %zu NormalizationTest lines fail", fails, lines);
    size_t unlisted_fails = 0;
    for (uint32_t cp = 0; cp < 0x110000; cp++) {
        if (listed[cp] || (cp >= 0xD800 && cp <= 0xDFFF)) continue;
        uint8_t b[4];
        size_t n = kipp_utf8_encode(cp, b);
        if (!nfc_equals(b, n, b, n) && unlisted_fails++ < 10)
            fprintf(stderr, "U+%04X is not its own NFC\n", cp);
    }
    CHECKF(unlisted_fails == 0, "%zu unlisted code points change under NFC", unlisted_fails);
    fprintf(stderr, "NormalizationTest (Unicode %s): %zu lines\n", kipp_unicode_version, lines);
    return -1;
}

static void test_js_classes(const char *path) {
    FILE *f = fopen(path, "rb");
    CHECKF(f != NULL, "cannot open %s", path);
    if (!f) return;
    static char cls[0x110000];
    size_t n = fread(cls, 1, sizeof cls, f);
    fclose(f);
    CHECKF(n == sizeof cls, "%s: %zu bytes, want one per code point", path, n);
    static const char names[4] = {'O', 'L', 'N', 'S'};
    size_t compared = 0, fails = 0;
    for (uint32_t cp = 0; cp < n; cp++) {
        if (cls[cp] == 'x') continue;
        compared++;
        char mine = names[kipp_uclass(cp)];
        if (mine != cls[cp] && fails++ < 20)
            fprintf(stderr, "U+%04X: JS says %c, table says %c\n", cp, cls[cp], mine);
    }
    CHECKF(fails == 0, "%zu of %zu code points classified differently from JS", fails, compared);
    CHECKF(compared > 200000, "only %zu code points compared", compared);
    fprintf(stderr, "JS classes: %zu assigned code points agree\n", compared);
}

int main(void) {
    const char *js = getenv("KIPP_JS_CLASSES");
    if (js && *js) {
        test_js_classes(js);
    } else {
        int rc = test_normalization();
        if (rc == 77) return 77;
    }
    kipp_nfc_scratch_free(&scratch);
    free(out);
    return test_finish("test_tokenizer_unicode");
}
