/* kipp convert DIR -o FILE.gguf [--quant SCHEME] [--checkpoint ID] */
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/progress.h"
#include "convert/convert.h"
#include "kipp.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: kipp convert DIR -o FILE.gguf [--quant SCHEME] [--checkpoint ID]\n"
            "\n"
            "Converts a Hugging Face Qwen3 checkpoint directory (config.json, tokenizer.json,\n"
            "tokenizer_config.json, generation_config.json if present, model.safetensors or\n"
            "shards with model.safetensors.index.json) into one GGUF artifact.\n"
            "\n"
            "  -o, --output FILE    the artifact to write\n"
            "  --quant SCHEME       bf16 (default), q8_0, affine4_gs32 (Q4_1), scale4_gs32 (Q4_0);\n"
            "                       only the seven per-layer projections are quantized\n"
            "  --checkpoint ID      the registry entry this is (real checkpoints whose\n"
            "                       config.json alone is ambiguous); see `kipp registry`\n");
}

int cmd_convert(int argc, char **argv) {
    const char *dir = NULL, *out = NULL;
    kipp_convert_options opt = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if ((strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) && i + 1 < argc) {
            out = argv[++i];
        } else if (strcmp(a, "--quant") == 0 && i + 1 < argc) {
            opt.quant = argv[++i];
        } else if (strcmp(a, "--checkpoint") == 0 && i + 1 < argc) {
            opt.checkpoint_id = argv[++i];
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "kipp convert: unknown or incomplete option '%s'\n", a);
            return 2;
        } else if (!dir) {
            dir = a;
        } else {
            fprintf(stderr, "kipp convert: unexpected argument '%s'\n", a);
            return 2;
        }
    }
    if (!dir || !out) {
        usage(stderr);
        return 2;
    }
    cli_progress bar;
    cli_progress_init(&bar, "convert");
    opt.progress = cli_progress_update;
    opt.progress_ctx = &bar;
    kipp_error err = {0};
    int rc = kipp_convert(dir, out, &opt, &err);
    cli_progress_finish(&bar);
    if (rc) {
        fprintf(stderr, "kipp convert: %s\n", err.message);
        return 1;
    }
    fprintf(stderr, "kipp convert: wrote %s\n", out);
    return 0;
}
