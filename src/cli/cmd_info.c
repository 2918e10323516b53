/* kipp info FILE: validate an artifact strictly and describe it (registry
 * entry, metadata, tensor table, sizes). A rejected file exits 1 with the
 * loader's reason on stderr. Uses only include/kipp.h. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "kipp.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: kipp info FILE.gguf\n"
            "\n"
            "Validates the artifact exactly as the engine does before loading it, then\n"
            "prints its registry entry, metadata (large arrays summarised), the tensor\n"
            "table (name, type, shape, file offset, bytes) and the total sizes.\n"
            "Exits 1 with the rejection reason on stderr if the file is not accepted.\n");
}

static void print_size(uint64_t bytes) {
    if (bytes >= (1ull << 30)) printf("%.2f GiB", (double)bytes / (double)(1ull << 30));
    else if (bytes >= (1ull << 20)) printf("%.2f MiB", (double)bytes / (double)(1ull << 20));
    else printf("%.2f KiB", (double)bytes / 1024.0);
}

static void print_entry(const kipp_checkpoint *c, const char *scheme) {
    printf("checkpoint  %s\n", c->id);
    printf("source      %s @ %s\n", c->source_repository, c->revision);
    printf("variant     %s\n", kipp_variant_name(c->variant));
    printf("shape       layers %u, hidden %u, ffn %u, query heads %u (attention width %u), "
           "kv heads %d, head dim %d\n",
           c->layers, c->hidden, c->ffn, c->heads, c->heads * KIPP_HEAD_DIM, KIPP_KV_HEADS,
           KIPP_HEAD_DIM);
    printf("context     %u, rope theta %.0f, vocab %d, output head %s\n", c->context, c->rope_theta,
           KIPP_VOCAB_SIZE, c->tied ? "tied to token_embd" : "separate (untied)");
    printf("eos         %d, stops", c->eos);
    for (uint32_t i = 0; i < c->n_stops; i++) printf("%s%d", i ? "," : " ", c->stops[i]);
    printf("\nquant       %s\n", scheme);
    if (c->synthetic) printf("note        synthetic checkpoint: its weights are random\n");
}

int cmd_info(int argc, char **argv) {
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "kipp info: unknown option '%s'\n", argv[i]);
            return 2;
        } else if (!path) {
            path = argv[i];
        } else {
            fprintf(stderr, "kipp info: unexpected argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (!path) {
        usage(stderr);
        return 2;
    }
    kipp_inspect *ins;
    kipp_error err = {0};
    if (kipp_inspect_open(path, &ins, &err)) {
        fprintf(stderr, "kipp info: rejected: %s\n", err.message);
        return 1;
    }
    printf("file        %s\n", path);
    print_entry(kipp_inspect_checkpoint(ins), kipp_inspect_quant_scheme(ins));

    size_t n_kv = kipp_inspect_metadata_count(ins);
    printf("\nmetadata (%zu keys)\n", n_kv);
    for (size_t i = 0; i < n_kv; i++) {
        char key[128], type[48], value[512];
        kipp_inspect_metadata(ins, i, key, sizeof key, type, sizeof type, value, sizeof value);
        printf("  %-40s %-16s %s\n", key, type, value);
    }

    size_t n_t = kipp_inspect_tensor_count(ins);
    printf("\ntensors (%zu)\n  %-32s %-5s %-16s %12s %12s\n", n_t, "name", "type", "shape (ne)",
           "offset", "bytes");
    uint64_t data = 0;
    struct type_total { const char *type; size_t count; uint64_t bytes; } per[8];
    size_t n_per = 0;
    for (size_t i = 0; i < n_t; i++) {
        kipp_tensor_info t;
        kipp_inspect_tensor(ins, i, &t);
        char shape[64];
        int n = snprintf(shape, sizeof shape, "[");
        for (uint32_t d = 0; d < t.n_dims && n > 0 && (size_t)n < sizeof shape; d++)
            n += snprintf(shape + n, sizeof shape - (size_t)n, "%s%" PRIu64, d ? ", " : "", t.ne[d]);
        if (n > 0 && (size_t)n < sizeof shape) snprintf(shape + n, sizeof shape - (size_t)n, "]");
        printf("  %-32s %-5s %-16s %12" PRIu64 " %12" PRIu64 "\n", t.name, t.type, shape, t.offset,
               t.nbytes);
        data += t.nbytes;
        size_t k = 0;
        while (k < n_per && strcmp(per[k].type, t.type) != 0) k++;
        if (k == n_per && n_per < 8) per[n_per++] = (struct type_total){t.type, 0, 0};
        if (k < n_per) { per[k].count++; per[k].bytes += t.nbytes; }
    }

    uint64_t size = kipp_inspect_file_size(ins), header = kipp_inspect_data_offset(ins);
    printf("\nsizes\n  file          %12" PRIu64 " bytes (", size);
    print_size(size);
    printf(")\n  header        %12" PRIu64 " bytes (metadata + directory + padding)\n", header);
    printf("  tensor data   %12" PRIu64 " bytes (", data);
    print_size(data);
    printf("), padding %" PRIu64 " bytes\n", size - header - data);
    for (size_t k = 0; k < n_per; k++) {
        printf("  %-5s %4zu tensors %12" PRIu64 " bytes (", per[k].type, per[k].count, per[k].bytes);
        print_size(per[k].bytes);
        printf(")\n");
    }
    printf("status        valid: every check of the strict loader passed\n");
    kipp_inspect_close(ins);
    return 0;
}
