/* kipp tokenize -m FILE (--text STR | --file PATH | --jsonl IN.jsonl) [--json]
 * kipp detokenize -m FILE (--ids 1,2,3 | --jsonl IN.jsonl)
 *
 * Both open the model without a backend (KIPP_BACKEND_NONE: validation and
 * tokenizer only). The JSONL modes are batch modes for tests and tools: one
 * process, one model load, one output line per input line, in order. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "core/json.h" /* a standalone parser; knows nothing of models */
#include "kipp.h"

static void tokenize_usage(FILE *out) {
    fprintf(out,
            "usage: kipp tokenize -m FILE (--text STR | --file PATH) [--json]\n"
            "       kipp tokenize -m FILE --jsonl IN.jsonl\n"
            "\n"
            "Prints the token ids of a text: space-separated, or a JSON array with --json.\n"
            "No BOS is added; special tokens written in the text (<|im_start|>, <think>, ...)\n"
            "are recognised. Invalid UTF-8 is replaced by U+FFFD before tokenizing.\n"
            "\n"
            "  -m, --model FILE  a Kipp GGUF artifact\n"
            "  --text STR        the text\n"
            "  --file PATH       read the text from a file (byte for byte)\n"
            "  --json            print a JSON array\n"
            "  --jsonl IN        batch: IN holds one JSON string per line; prints one JSON\n"
            "                    array of ids per line, in order\n");
}

static void detokenize_usage(FILE *out) {
    fprintf(out,
            "usage: kipp detokenize -m FILE --ids 1,2,3\n"
            "       kipp detokenize -m FILE --jsonl IN.jsonl\n"
            "\n"
            "Prints the text of token ids, byte for byte (special tokens as their text,\n"
            "no newline added).\n"
            "\n"
            "  -m, --model FILE  a Kipp GGUF artifact\n"
            "  --ids LIST        comma- or space-separated token ids\n"
            "  --jsonl IN        batch: IN holds one JSON array of ids per line; prints one\n"
            "                    JSON string per line, in order\n");
}

static kipp_model *open_model(const char *cmd, const char *path) {
    kipp_model_options opt = {.backend = KIPP_BACKEND_NONE};
    kipp_model *m = NULL;
    kipp_error err = {0};
    if (kipp_model_open(path, &opt, &m, &err)) {
        fprintf(stderr, "kipp %s: %s\n", cmd, err.message);
        return NULL;
    }
    return m;
}

static void print_ids(FILE *out, const int32_t *ids, size_t n, bool json) {
    if (json) fputc('[', out);
    for (size_t i = 0; i < n; i++) fprintf(out, "%s%d", i ? (json ? "," : " ") : "", (int)ids[i]);
    fputs(json ? "]\n" : "\n", out);
}

/* Calls fn on every line of path (without its '\n'); stops at the first
 * failure. Returns 0, or 1 after printing what failed. */
static int each_line(const char *cmd, const char *path,
                     int (*fn)(void *ctx, const char *line, size_t len, size_t lineno),
                     void *ctx) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "kipp %s: cannot open %s: %s\n", cmd, path, strerror(errno));
        return 1;
    }
    char *line = NULL;
    size_t cap = 0, lineno = 0;
    ssize_t len;
    int rc = 0;
    while (rc == 0 && (len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        if (len > 0 && line[len - 1] == '\n') len--;
        rc = fn(ctx, line, (size_t)len, lineno);
    }
    if (rc == 0 && ferror(f)) {
        fprintf(stderr, "kipp %s: error reading %s\n", cmd, path);
        rc = 1;
    }
    free(line);
    if (f != stdin) fclose(f);
    return rc;
}

static int tokenize_jsonl_line(void *ctx, const char *line, size_t len, size_t lineno) {
    const kipp_model *m = ctx;
    kipp_error err = {0};
    json_doc *doc = NULL;
    if (kipp_json_parse(line, len, &doc, &err) || kipp_json_root(doc)->type != JSON_STRING) {
        fprintf(stderr, "kipp tokenize: line %zu: %s\n", lineno,
                doc ? "not a JSON string" : err.message);
        kipp_json_free(doc);
        return 1;
    }
    const json_value *s = kipp_json_root(doc);
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = kipp_tokenize(m, s->as.string.chars, s->as.string.length, &ids, &n, &err);
    kipp_json_free(doc);
    if (rc) {
        fprintf(stderr, "kipp tokenize: line %zu: %s\n", lineno, err.message);
        return 1;
    }
    print_ids(stdout, ids, n, true);
    free(ids);
    return 0;
}

int cmd_tokenize(int argc, char **argv) {
    const char *model = NULL, *text = NULL, *file = NULL, *jsonl = NULL;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            tokenize_usage(stdout);
            return 0;
        } else if ((strcmp(a, "-m") == 0 || strcmp(a, "--model") == 0) && i + 1 < argc) {
            model = argv[++i];
        } else if (strcmp(a, "--text") == 0 && i + 1 < argc) {
            text = argv[++i];
        } else if (strcmp(a, "--file") == 0 && i + 1 < argc) {
            file = argv[++i];
        } else if (strcmp(a, "--jsonl") == 0 && i + 1 < argc) {
            jsonl = argv[++i];
        } else if (strcmp(a, "--json") == 0) {
            json = true;
        } else {
            fprintf(stderr, "kipp tokenize: unknown or incomplete option '%s'\n", a);
            tokenize_usage(stderr);
            return 2;
        }
    }
    if (!model || (!!text + !!file + !!jsonl) != 1) {
        fprintf(stderr, "kipp tokenize: need -m FILE and exactly one of --text, --file, --jsonl\n");
        tokenize_usage(stderr);
        return 2;
    }
    kipp_model *m = open_model("tokenize", model);
    if (!m) return 1;
    static char outbuf[1 << 16];
    setvbuf(stdout, outbuf, _IOFBF, sizeof outbuf);
    int rc = 0;
    if (jsonl) {
        rc = each_line("tokenize", jsonl, tokenize_jsonl_line, m);
    } else {
        char *data = NULL;
        size_t len = 0;
        if (file) {
            FILE *f = fopen(file, "rb");
            if (!f) {
                fprintf(stderr, "kipp tokenize: cannot open %s: %s\n", file, strerror(errno));
                kipp_model_close(m);
                return 1;
            }
            size_t cap = 0;
            for (;;) {
                if (len + 65536 > cap) {
                    cap = cap ? cap * 2 : 1 << 20;
                    char *nd = realloc(data, cap);
                    if (!nd) break;
                    data = nd;
                }
                size_t got = fread(data + len, 1, cap - len, f);
                len += got;
                if (got == 0) break;
            }
            if (ferror(f) || !data) {
                fprintf(stderr, "kipp tokenize: error reading %s\n", file);
                rc = 1;
            }
            fclose(f);
        }
        if (rc == 0) {
            int32_t *ids = NULL;
            size_t n = 0;
            kipp_error err = {0};
            const char *src = file ? data : text;
            size_t n_src = file ? len : strlen(text);
            if (kipp_tokenize(m, src, n_src, &ids, &n, &err)) {
                fprintf(stderr, "kipp tokenize: %s\n", err.message);
                rc = 1;
            } else {
                print_ids(stdout, ids, n, json);
                free(ids);
            }
        }
        free(data);
    }
    if (fflush(stdout) != 0) rc = 1;
    kipp_model_close(m);
    return rc;
}

/* ---- detokenize ---------------------------------------------------------- */

/* Parses "1,2,3" (commas and/or spaces) into ids. */
static bool parse_id_list(const char *s, int32_t **ids, size_t *n) {
    size_t cap = 16;
    *n = 0;
    *ids = malloc(cap * sizeof **ids);
    if (!*ids) return false;
    while (*s) {
        while (*s == ',' || *s == ' ' || *s == '\t' || *s == '\n') s++;
        if (!*s) break;
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (end == s || errno || v < INT32_MIN || v > INT32_MAX ||
            (*end && *end != ',' && *end != ' ' && *end != '\t' && *end != '\n'))
            return false;
        if (*n == cap) {
            cap *= 2;
            int32_t *ni = realloc(*ids, cap * sizeof **ids);
            if (!ni) return false;
            *ids = ni;
        }
        (*ids)[(*n)++] = (int32_t)v;
        s = end;
    }
    return true;
}

static int detokenize_jsonl_line(void *ctx, const char *line, size_t len, size_t lineno) {
    const kipp_model *m = ctx;
    kipp_error err = {0};
    json_doc *doc = NULL;
    if (kipp_json_parse(line, len, &doc, &err) || kipp_json_root(doc)->type != JSON_ARRAY) {
        fprintf(stderr, "kipp detokenize: line %zu: %s\n", lineno,
                doc ? "not a JSON array" : err.message);
        kipp_json_free(doc);
        return 1;
    }
    const json_value *a = kipp_json_root(doc);
    size_t n = a->as.array.count;
    int32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    int rc = ids ? 0 : 1;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const json_value *v = a->as.array.items[i];
        if (v->type != JSON_NUMBER || !v->as.number.is_integer || !v->as.number.fits_int64 ||
            v->as.number.integer < INT32_MIN || v->as.number.integer > INT32_MAX) {
            fprintf(stderr, "kipp detokenize: line %zu: item %zu is not a token id\n", lineno, i);
            rc = 1;
        } else {
            ids[i] = (int32_t)v->as.number.integer;
        }
    }
    kipp_json_free(doc);
    char *text = NULL;
    size_t n_text = 0;
    if (rc == 0 && kipp_detokenize(m, ids, n, &text, &n_text, &err)) {
        fprintf(stderr, "kipp detokenize: line %zu: %s\n", lineno, err.message);
        rc = 1;
    }
    if (rc == 0) {
        json_buf b = {0};
        kipp_json_buf_append_string(&b, text, n_text);
        kipp_json_buf_append(&b, "\n", 1);
        if (b.failed || fwrite(b.data, 1, b.length, stdout) != b.length) rc = 1;
        kipp_json_buf_free(&b);
    }
    free(text);
    free(ids);
    return rc;
}

int cmd_detokenize(int argc, char **argv) {
    const char *model = NULL, *list = NULL, *jsonl = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            detokenize_usage(stdout);
            return 0;
        } else if ((strcmp(a, "-m") == 0 || strcmp(a, "--model") == 0) && i + 1 < argc) {
            model = argv[++i];
        } else if (strcmp(a, "--ids") == 0 && i + 1 < argc) {
            list = argv[++i];
        } else if (strcmp(a, "--jsonl") == 0 && i + 1 < argc) {
            jsonl = argv[++i];
        } else {
            fprintf(stderr, "kipp detokenize: unknown or incomplete option '%s'\n", a);
            detokenize_usage(stderr);
            return 2;
        }
    }
    if (!model || (!!list + !!jsonl) != 1) {
        fprintf(stderr, "kipp detokenize: need -m FILE and exactly one of --ids, --jsonl\n");
        detokenize_usage(stderr);
        return 2;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    if (list && !parse_id_list(list, &ids, &n)) {
        fprintf(stderr, "kipp detokenize: --ids needs integers separated by commas, got '%s'\n",
                list);
        free(ids);
        return 2;
    }
    kipp_model *m = open_model("detokenize", model);
    if (!m) {
        free(ids);
        return 1;
    }
    static char outbuf[1 << 16];
    setvbuf(stdout, outbuf, _IOFBF, sizeof outbuf);
    int rc = 0;
    if (jsonl) {
        rc = each_line("detokenize", jsonl, detokenize_jsonl_line, m);
    } else {
        char *text = NULL;
        size_t len = 0;
        kipp_error err = {0};
        if (kipp_detokenize(m, ids, n, &text, &len, &err)) {
            fprintf(stderr, "kipp detokenize: %s\n", err.message);
            rc = 1;
        } else if (fwrite(text, 1, len, stdout) != len) {
            rc = 1;
        }
        free(text);
    }
    if (fflush(stdout) != 0) rc = 1;
    free(ids);
    kipp_model_close(m);
    return rc;
}
