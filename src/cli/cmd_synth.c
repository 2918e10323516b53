/* kipp synth ID DIR [--shards N] [--tokenizer-dir DIR] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/progress.h"
#include "convert/synth.h"
#include "kipp.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: kipp synth ID DIR [--shards N] [--tokenizer-dir DIR]\n"
            "\n"
            "Writes the synthetic registry entry ID (synthetic-*) to DIR in the Hugging Face\n"
            "layout: config.json, generation_config.json, model.safetensors (or N shards and\n"
            "model.safetensors.index.json), tokenizer.json, tokenizer_config.json.\n"
            "The weights are deterministic random numbers, not a trained model.\n"
            "\n"
            "  --shards N           split the weights over N safetensors files (default 1)\n"
            "  --tokenizer-dir DIR  where tokenizer.json and tokenizer_config.json are\n"
            "                       (default $KIPP_TOKENIZER_DIR, else build/cache/tokenizer-qwen3;\n"
            "                       `make tokenizer` fetches them)\n");
}

int cmd_synth(int argc, char **argv) {
    const char *id = NULL, *dir = NULL, *tokdir = getenv("KIPP_TOKENIZER_DIR");
    unsigned long shards = 1;
    if (!tokdir || !*tokdir) tokdir = "build/cache/tokenizer-qwen3";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--shards") == 0 && i + 1 < argc) {
            char *end;
            shards = strtoul(argv[++i], &end, 10);
            if (*end || shards < 1 || shards > 99999) {
                fprintf(stderr, "kipp synth: --shards needs a positive integer, got '%s'\n",
                        argv[i]);
                return 2;
            }
        } else if (strcmp(argv[i], "--tokenizer-dir") == 0 && i + 1 < argc) {
            tokdir = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "kipp synth: unknown or incomplete option '%s'\n", argv[i]);
            return 2;
        } else if (!id) {
            id = argv[i];
        } else if (!dir) {
            dir = argv[i];
        } else {
            fprintf(stderr, "kipp synth: unexpected argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (!id || !dir) {
        usage(stderr);
        return 2;
    }
    const kipp_checkpoint *c = kipp_registry_find_id(id);
    if (!c) {
        fprintf(stderr, "kipp synth: '%s' is not in the registry (kipp registry lists it)\n", id);
        return 1;
    }
    cli_progress bar;
    cli_progress_init(&bar, "synth");
    kipp_synth_options opt = {.shards = (unsigned)shards, .tokenizer_dir = tokdir,
                              .progress = cli_progress_update, .progress_ctx = &bar};
    kipp_error err = {0};
    int rc = kipp_synth(c, dir, &opt, &err);
    cli_progress_finish(&bar);
    if (rc) {
        fprintf(stderr, "kipp synth: %s\n", err.message);
        return 1;
    }
    fprintf(stderr, "kipp synth: wrote %s to %s (random weights, not a trained model)\n", id, dir);
    return 0;
}
